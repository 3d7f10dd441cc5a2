"""simengine: persona panels from Python, on the same library ``sim-cli`` runs.

    >>> import simengine
    >>> r = simengine.run(personas=50, ticks=3)      # the embedded defaults
    >>> r.digest                                     # the same as sim-cli's
    >>> r.outcomes()                                 # one row per job, a DataFrame

Runs are written to a run directory, as ``sim-cli run`` writes them, and
``simengine.open(path)`` reads one made by either. The engine works with the
GIL released; Ctrl-C stops a run at its next tick boundary and raises
``simengine.Interrupted``, which ``run(resume=...)`` continues.

The package's rooms: ``run`` (runs and ``Run``), ``validation``
(``validate`` and ``Validation``), ``field`` (``field_simulate``),
``inputs`` (panels, maps and answers read and converted), ``progress``
(the bar), ``tables`` (pandas and Parquet) and ``errors``. Everything
public is here, at the top, but for ``simengine.ray`` (shards as Ray
tasks), an optional extra imported on its own: ``pip install ".[ray]"``.
"""

from . import _native
from .errors import (
    BudgetError,
    ConfigError,
    Interrupted,
    PanelError,
    ProviderError,
    ScenarioError,
    ShardError,
    SimEngineError,
)
from .field import field_simulate
from .run import Run, merge, open, replay, report, run
from .validation import Validation, validate

__all__ = [
    "run",
    "open",
    "replay",
    "report",
    "merge",
    "validate",
    "Run",
    "Validation",
    "SimEngineError",
    "ConfigError",
    "ScenarioError",
    "PanelError",
    "ProviderError",
    "BudgetError",
    "Interrupted",
    "ShardError",
    "ENGINE_VERSION",
    "HAS_AGENTS",
    "field_simulate",
]

ENGINE_VERSION: str = _native.ENGINE_VERSION
"""The engine's version (the workspace's, as ``sim-cli --version`` prints it)."""

HAS_AGENTS: bool = bool(getattr(_native, "HAS_AGENTS", False))
"""Whether this build has the agents' workload (the shared memory field, and
so FAISS): ``field_simulate``. The default build leaves it out, as FAISS
adds minutes to the first build; ``MATURIN_PEP517_ARGS="--features agents"
pip install .`` puts it in."""
