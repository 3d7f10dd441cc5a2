"""The agents' workload from Python: ``field_simulate``, the shared memory
field driven by a seeded synthetic mission (``sim-cli field simulate``),
in a build with it (``HAS_AGENTS``)."""

from __future__ import annotations

import json
from typing import Any

from . import _native
from .errors import SimEngineError
from .inputs import PathLike, _counts
from .progress import Progress, _progress

__all__ = ["field_simulate"]


def field_simulate(
    *,
    seed: int = 42,
    agents: int = 3,
    phases: int = 24,
    ops: int = 4,
    dim: int = 256,
    topics: int = 6,
    k: int = 5,
    hours_per_phase: float = 1.0,
    lambda_: float = 0.1,
    permeability: float = 1.0,
    out: PathLike | None = None,
    threads: int | None = None,
    progress: Progress = True,
) -> dict[str, Any]:
    """Drives the shared memory field with a seeded synthetic mission
    (``sim-cli field simulate``, the same defaults and the same digest):
    ``agents`` inject findings near ``topics`` centres and query for them,
    ``ops`` operations each per phase, over ``phases`` phases of
    ``hours_per_phase`` simulated hours; the field decays at ``lambda_`` per
    hour and resonates with ``permeability``.

    Returns ``digest`` (the field's, as the CLI prints it), ``operations``
    (``ok``, ``failed``), ``out`` and ``telemetry`` (the report the CLI
    writes to ``telemetry.json``: patterns, resonance, stability, the
    ratio monitor, lock-in). With ``out`` (a new or empty directory) the
    field's event log, index and patterns are written there, as the CLI
    writes them, so that ``sim-cli field replay`` and ``field stats`` read
    them.

    Needs a build with the agents' workload (``HAS_AGENTS``): without it
    this raises ``SimEngineError`` saying how to install one.
    """
    native = getattr(_native, "field_simulate", None)
    if native is None:
        raise SimEngineError(
            "field_simulate: this simengine was built without the agents' workload (the shared memory field, "
            'and so FAISS); reinstall it with it: MATURIN_PEP517_ARGS="--features agents" pip install .'
        )
    _counts(agents=(agents, 1), phases=(phases, 1), ops=(ops, 1), dim=(dim, 1), topics=(topics, 1), k=(k, 1))
    bar, callback = _progress(progress, phases, "phase")
    done = None
    try:
        text = native(
            seed=seed,
            agents=agents,
            phases=phases,
            ops=ops,
            dim=dim,
            topics=topics,
            k=k,
            hours_per_phase=hours_per_phase,
            lambda_=lambda_,
            permeability=permeability,
            out=None if out is None else str(out),
            threads=threads,
            progress=callback,
        )
        done = phases
    finally:
        if bar is not None:
            bar.close(done)
    result: dict[str, Any] = json.loads(text)
    return result
