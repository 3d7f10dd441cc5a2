"""simengine: persona panels from Python, on the same library ``sim-cli`` runs.

    >>> import simengine
    >>> r = simengine.run(personas=50, ticks=3)      # the embedded defaults
    >>> r.digest                                     # the same as sim-cli's
    >>> r.outcomes()                                 # one row per job, a DataFrame

Runs are written to a run directory, as ``sim-cli run`` writes them, and
``simengine.open(path)`` reads one made by either. The engine works with the
GIL released; Ctrl-C stops a run at its next tick boundary and raises
``simengine.Interrupted``, which ``run(resume=...)`` continues.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union

from . import _native
from .errors import (
    BudgetError,
    ConfigError,
    Interrupted,
    PanelError,
    ProviderError,
    ScenarioError,
    SimEngineError,
)

if TYPE_CHECKING:
    import pandas

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

PathLike = Union[str, "os.PathLike[str]"]
Progress = Union[bool, Callable[[int, str, int, int], Any]]

# The outcome table's columns and their pandas dtypes. Nullable integers
# (Int64) where a cell can be empty (a failed job has no intent); lists stay
# lists (object).
_OUTCOME_DTYPES: dict[str, str] = {
    "tick": "int64",
    "position": "int64",
    "persona": "string",
    "name": "string",
    "age": "Int64",
    "age_band": "string",
    "city": "string",
    "occupation": "string",
    "income": "string",
    "interests": "object",
    "price_sensitivity": "Float64",
    "stimulus": "string",
    "exposure": "int64",
    "status": "string",
    "failed_stage": "string",
    "reason": "string",
    "intent": "Int64",
    "sentiment": "Float64",
    "importance": "Int64",
    "ssr_expected": "Float64",
    "chat_nano_usd": "int64",
    "embedding_nano_usd": "int64",
    "total_nano_usd": "int64",
    "input_tokens": "int64",
    "output_tokens": "int64",
    "reaction": "string",
    "respondent": "string",
}

# The memory table's columns and their pandas dtypes.
_MEMORY_DTYPES: dict[str, str] = {
    "persona": "string",
    "record": "string",
    "version": "int64",
    "current": "bool",
    "tier": "string",
    "from_tier": "string",
    "energy": "float64",
    "peak_energy": "float64",
    "access_count": "int64",
    "decay_rate": "float64",
    "kind": "string",
    "text": "string",
    "importance": "Int64",
    "sentiment": "Float64",
    "tick": "Int64",
    "sources": "object",
    "created_hour": "float64",
    "last_accessed_hour": "float64",
    "valid_from_hour": "float64",
    "valid_to_hour": "Float64",
    "previous": "Int64",
    "is_test": "bool",
}


def _pandas() -> Any:
    try:
        import pandas
    except ImportError as e:  # pragma: no cover - pandas is a dependency
        raise ImportError("simengine's tables are pandas DataFrames: pip install pandas") from e
    return pandas


class Run:
    """A run directory: one written by ``simengine.run`` or by ``sim-cli run``.

    Tables are read from the run's trace, the one record of what happened.
    """

    def __init__(self, path: PathLike, summary: dict[str, Any] | None = None) -> None:
        self.path: Path = Path(path)
        self._summary = summary

    @property
    def summary(self) -> dict[str, Any]:
        """The run's summary, as ``sim-cli run --json`` prints it."""
        if self._summary is None:
            self._summary = json.loads(_native.summary_json(str(self.path)))
        return self._summary

    @property
    def digest(self) -> str:
        """The run's digest: persona state and outcome content, the figure a
        replay, a resume and a merge of shards reproduce."""
        return str(self.summary["digest"])

    @property
    def full_digest(self) -> str:
        """The digest of everything recorded, costs included."""
        return str(self.summary["full_digest"])

    def outcomes(self) -> "pandas.DataFrame":
        """One row per job (a persona meeting a stimulus in a tick).

        Columns, in order: ``tick``, ``position`` (the job's place in its
        tick), ``persona`` (``p-00007``), the persona's ``name``, ``age``,
        ``age_band``, ``city``, ``occupation``, ``income``, ``interests`` (a
        list) and ``price_sensitivity``; the ``stimulus`` and its
        ``exposure``; ``status`` (``ok``, ``failed``, ``refused``),
        ``failed_stage`` and ``reason``; the reply's ``intent`` (1-5),
        ``sentiment`` (-1 to 1) and ``importance`` (1-10); ``ssr_expected``
        (the SSR rating's expected value, with ``[intent] method = "ssr"`` or
        ``"both"``); the job's costs ``chat_nano_usd``,
        ``embedding_nano_usd`` (an allocated estimate), ``total_nano_usd``,
        ``input_tokens``, ``output_tokens``; the ``reaction`` text and the
        panel row's ``respondent`` id for a panel given by data. Empty cells
        are ``<NA>``.
        """
        pd = _pandas()
        columns = _native.outcome_columns(str(self.path))
        frame = pd.DataFrame(columns, columns=list(_OUTCOME_DTYPES))
        typed: pandas.DataFrame = frame.astype(_OUTCOME_DTYPES)
        return typed

    def intents(self) -> "pandas.DataFrame":
        """Purchase intent per persona, stimulus and tick: ``tick``,
        ``persona``, ``stimulus``, ``intent`` (1-5; ``<NA>`` for a job with
        no reply) and ``ssr_expected``."""
        return self.outcomes()[["tick", "persona", "stimulus", "intent", "ssr_expected"]].reset_index(drop=True)

    def costs(self) -> "pandas.DataFrame":
        """What each job cost, allocated to the persona that caused it:
        ``tick``, ``position``, ``persona``, ``stimulus``, the nano-USD
        columns and tokens, and ``total_usd``. The totals are the run's
        provider spend exactly (``summary["cost"]``)."""
        frame = self.outcomes()[
            [
                "tick",
                "position",
                "persona",
                "stimulus",
                "chat_nano_usd",
                "embedding_nano_usd",
                "total_nano_usd",
                "input_tokens",
                "output_tokens",
            ]
        ].reset_index(drop=True)
        frame["total_usd"] = frame["total_nano_usd"] / 1e9
        return frame

    def memories(self, persona: str | int | None = None, history: bool = False) -> "pandas.DataFrame":
        """The personas' memories at the run's end, with their tiers and
        energy: one row per memory record's current version, or per version
        with ``history=True`` (records are versioned, never destroyed).

        The states are rebuilt from the trace with no model call, and the
        run's memory operations (``sim-cli memory decay``, ``promote``, …)
        applied over them, as the ``memory`` commands see them. ``persona``
        keeps one persona's (``7`` or ``"p-00007"``; ``"test"`` for the test
        memories). Operation log lines that no longer apply are skipped with
        a warning (``warnings.warn``), as the CLI skips them.

        Columns, in order: ``persona``, ``record`` (the record's id),
        ``version``, ``current`` (whether it is the record's current
        version), ``tier`` (``working``, ``shortTerm``, ``longTerm``,
        ``archived``, ``expired``), ``from_tier`` (an archived or expired
        version's former tier), ``energy``, ``peak_energy``,
        ``access_count``, ``decay_rate`` (per simulated hour, as last
        applied); the memory's ``kind`` (``observation``, ``reflection``),
        ``text``, ``importance`` (1-10), ``sentiment`` (-1 to 1), ``tick``
        and ``sources`` (a list: the stimulus or memories it came from);
        ``created_hour``, ``last_accessed_hour``, ``valid_from_hour`` and
        ``valid_to_hour`` (simulated hours from the run's start;
        ``<NA>`` for a current version); ``previous`` (the version it
        follows) and ``is_test``.
        """
        pd = _pandas()
        who = None if persona is None else str(persona)
        columns, skipped = _native.memory_columns(str(self.path), who, history)
        for why in skipped:
            warnings.warn(why, stacklevel=2)
        frame = pd.DataFrame(columns, columns=list(_MEMORY_DTYPES))
        typed: pandas.DataFrame = frame.astype(_MEMORY_DTYPES)
        return typed

    def report(self, out: PathLike | None = None) -> Path:
        """Writes the run's HTML report; returns the page's path."""
        return report(self.path, out=out)

    def replay(self) -> dict[str, Any]:
        """Replays the run from its trace with no model call (see ``replay``)."""
        return replay(self.path)

    def to_parquet(self, directory: PathLike) -> list[Path]:
        """Writes ``outcomes.parquet``, ``intents.parquet``,
        ``costs.parquet`` and ``memories.parquet`` into ``directory``
        (created if missing), with the columns and types of the methods of
        those names. Needs pyarrow."""
        frames = {
            "outcomes": self.outcomes(),
            "intents": self.intents(),
            "costs": self.costs(),
            "memories": self.memories(),
        }
        return _write_parquet(directory, frames, "Run.to_parquet")

    def __repr__(self) -> str:
        s = self.summary
        return f"Run({str(self.path)!r}, personas={s.get('personas')}, ticks={s.get('ticks')}, digest={self.digest[:16]}…)"

    def _repr_html_(self) -> str:
        import html

        s = self.summary
        jobs = s.get("jobs", {})
        cost = s.get("cost", {})
        rows = [
            ("directory", str(self.path)),
            ("scenario", s.get("scenario")),
            ("personas x ticks", f"{s.get('personas')} x {s.get('ticks')} (completed {s.get('ticks_completed')})"),
            ("seed", s.get("seed")),
            ("jobs", f"{jobs.get('total')} total, {jobs.get('ok')} ok, {jobs.get('failed')} failed, {jobs.get('refused')} refused"),
            ("cost (nano-USD)", cost.get("provider_total_nano_usd", cost)),
            ("digest", s.get("digest")),
        ]
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(str(k))}</th><td><code>{html.escape(str(v))}</code></td></tr>"
            for k, v in rows
        )
        return f"<table><caption>simengine run</caption>{body}</table>"


def _read(what: str, path: PathLike) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise PanelError(f"{what} {path}: cannot read it: {e}") from e


def _csv(what: str, data: Any) -> tuple[str, str]:
    """A DataFrame's CSV text (written in memory) or a CSV file's, and the
    name its errors use."""
    pd = _pandas()
    if isinstance(data, pd.DataFrame):
        frame = data.copy()
        for column in frame.columns:
            values = frame[column]
            present = values.dropna()
            # An integer column with a missing value is float in pandas; its
            # CSV must say 2, not 2.0, and leave the missing cell empty.
            if pd.api.types.is_float_dtype(values) and len(present) and (present == present.round()).all():
                frame[column] = values.astype("Int64")
        return frame.to_csv(index=False), f"<{what} DataFrame>"
    if isinstance(data, (str, os.PathLike)):
        return _read(what, data), str(data)
    raise PanelError(f"{what}: expected a pandas DataFrame or a CSV file's path, not {type(data).__name__}")


def _map(panel_map: Any) -> tuple[str, str]:
    """A panel map's TOML text (from a dict shaped like ``[panel.columns]``,
    or a file's), and the name its errors use."""
    if isinstance(panel_map, Mapping):
        return _native.panel_map_toml(json.dumps(dict(panel_map))), "<panel_map dict>"
    if isinstance(panel_map, (str, os.PathLike)):
        return _read("panel_map", panel_map), str(panel_map)
    raise PanelError(
        f"panel_map: expected a dict shaped like [panel.columns] or a panel-map file's path, not {type(panel_map).__name__}"
    )


def _panel(panel: Any, panel_map: Any) -> tuple[str, str, str, str] | None:
    if panel is None and panel_map is None:
        return None
    if panel is None or panel_map is None:
        raise PanelError("panel and panel_map go together: a panel needs its map, and a map its panel")
    csv, csv_name = _csv("panel", panel)
    map_text, map_name = _map(panel_map)
    return csv, csv_name, map_text, map_name


class _Bar:
    """Progress on a tqdm.auto bar over the run's ticks (or the field's
    phases), when tqdm is installed."""

    def __init__(self, ticks: int, unit: str = "tick") -> None:
        self.unit = unit
        try:
            from tqdm.auto import tqdm
        except ImportError:
            self.bar = None
            return
        self.bar = tqdm(total=ticks or None, unit=unit, desc="simengine")
        self.tick = 0

    def __call__(self, tick: int, stage: str, done: int, total: int) -> None:
        if self.bar is None:
            return
        if tick - 1 > self.tick:
            self.bar.update(tick - 1 - self.tick)
            self.tick = tick - 1
        self.bar.set_postfix_str(f"{self.unit} {tick}: {stage} {done}/{total}", refresh=False)
        self.bar.refresh()

    def close(self, ticks_done: int | None) -> None:
        if self.bar is None:
            return
        if ticks_done is not None and ticks_done > self.tick:
            self.bar.update(ticks_done - self.tick)
        self.bar.close()


def _counts(**counts: tuple[int | None, int]) -> None:
    """Refuses a count that is not a whole number of at least its least
    value (``None`` is the default), as ``ConfigError``."""
    for name, (value, least) in counts.items():
        if value is not None and (not isinstance(value, int) or value < least):
            raise ConfigError(f"{name}: expected a whole number of at least {least}, not {value!r}")


def _progress(
    progress: Progress, ticks: int, unit: str = "tick"
) -> tuple[_Bar | None, Callable[[int, str, int, int], Any] | None]:
    """The bar (for ``progress=True``) and the callable the engine's progress goes to."""
    if progress is True:
        bar = _Bar(ticks, unit)
        return bar, bar
    if progress is False or progress is None:
        return None, None
    if callable(progress):
        return None, progress
    raise ConfigError(f"progress: expected True, False or a callable, not {type(progress).__name__}")


def _write_parquet(directory: PathLike, frames: dict[str, "pandas.DataFrame"], what: str) -> list[Path]:
    """Writes each frame to ``directory/NAME.parquet``; returns the paths."""
    try:
        import pyarrow  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{what} needs pyarrow: pip install pyarrow") from e
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, frame in frames.items():
        path = out / f"{name}.parquet"
        frame.to_parquet(path, index=False)
        written.append(path)
    return written


def run(
    *,
    scenario: str = "default",
    personas: int | None = None,
    ticks: int = 3,
    seed: int = 42,
    config: PathLike | None = None,
    out: PathLike | None = None,
    panel: "pandas.DataFrame | PathLike | None" = None,
    panel_map: "Mapping[str, Any] | PathLike | None" = None,
    resume: bool | PathLike = False,
    threads: int | None = None,
    budget_usd: float | None = None,
    confirm_live: bool = False,
    progress: Progress = True,
) -> Run:
    """Runs a panel, as ``sim-cli run`` does, and returns its ``Run``.

    ``scenario`` is a built-in name or a scenario file; ``personas`` defaults
    to 50 (with a panel: every row, or a seeded subsample of that many);
    ``config`` is a configuration file (the embedded defaults without one:
    scripted models, no network). ``out`` is the run directory (default a new
    one under ``runs/``).

    ``panel`` is a pandas DataFrame (used as it is, no file written) or a CSV
    file, one persona per row; ``panel_map`` a dict shaped like the panel
    map's ``[panel.columns]`` table (``{"id": "id", "age": {"trait":
    "age"}}``) or a panel-map file.

    ``resume=True`` continues the interrupted run in ``out`` (or give its
    directory), to the digest an uninterrupted run would have had.
    ``progress`` is True (a tqdm.auto bar when tqdm is installed, silence
    otherwise), False, or a callable ``(tick, stage, done, total)`` called on
    this thread. A live chat model (``provider = "openai"``) is billed, and
    runs only with ``confirm_live=True``.

    Raises ``ConfigError``, ``ScenarioError``, ``PanelError``,
    ``ProviderError``, ``BudgetError``, or ``Interrupted`` (Ctrl-C, with
    ``run_dir`` to resume).
    """
    _counts(personas=(personas, 1), ticks=(ticks, 1), seed=(seed, 0), threads=(threads, 1))
    resume_dir: str | None = None
    if resume is True:
        if out is None:
            raise ConfigError("resume=True continues the run in out: give out= (or resume=its directory)")
        resume_dir = str(out)
    elif resume is not False:
        resume_dir = str(resume)
    panel_data = None if resume_dir else _panel(panel, panel_map)
    # A resumed run's ticks are in its trace: the bar counts without a total.
    bar, callback = _progress(progress, 0 if resume_dir else ticks)
    summary: dict[str, Any] | None = None
    try:
        directory, summary_json = _native.run(
            scenario=scenario,
            personas=personas,
            ticks=ticks,
            seed=seed,
            config=None if config is None else str(config),
            out=None if out is None else str(out),
            panel=panel_data,
            resume=resume_dir,
            threads=threads,
            budget_usd=budget_usd,
            confirm_live=confirm_live,
            progress=callback,
        )
        summary = json.loads(summary_json)
    finally:
        if bar is not None:
            bar.close(None if summary is None else summary.get("ticks_completed"))
    return Run(directory, summary)


def open(path: PathLike) -> Run:  # noqa: A001 - mirrors the CLI's verbs
    """The ``Run`` of an existing run directory (or its ``trace.bin``), one
    written by ``sim-cli run`` included."""
    r = Run(path)
    r.summary  # noqa: B018 - reads it now, so that a bad path raises here
    return r


def replay(path: PathLike) -> dict[str, Any]:
    """Re-runs a run from its trace with no model call (``sim-cli replay``):
    the answers come from the trace, and every tick's digests are compared.
    Returns ``ticks_recorded``, ``ticks_matched``, ``complete``,
    ``provider_calls`` (0) and ``divergence`` (``None``, or the first
    difference: its tick, persona, job and field)."""
    return dict(_native.replay(str(path)))


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


def report(path: PathLike, out: PathLike | None = None) -> Path:
    """Writes a run's self-contained HTML report (``sim-cli report``); returns
    the page's path."""
    return Path(_native.report(str(path), None if out is None else str(out)))


def merge(paths: Sequence[PathLike], out: PathLike) -> Run:
    """Joins a panel's shard runs (``run --shard I/N`` each, or ``sim-cli run
    --shard``) into one run in ``out`` whose digest equals the unsharded
    run's (``sim-cli merge``)."""
    directory, summary_json = _native.merge([str(p) for p in paths], str(out))
    return Run(directory, json.loads(summary_json))


class Validation:
    """A validation (``simengine.validate`` or ``sim-cli validate``): a
    panel's answers scored against real people's, on the held-out half."""

    def __init__(self, path: PathLike, summary: dict[str, Any], answers_path: PathLike) -> None:
        self.path: Path = Path(path)
        self.summary: dict[str, Any] = summary
        self._answers = Path(answers_path)

    @property
    def digest(self) -> str:
        """The validation's digest (its answers and figures)."""
        return str(self.summary["digest"])

    def figures(self) -> "pandas.DataFrame":
        """One row per question, source and figure, on the held-out half:
        ``question``, ``kind`` (``ordinal`` or ``nominal``), ``source`` (the
        model, and the baselines it must beat), ``figure`` (``ks_similarity``,
        ``wasserstein``, ``spread_ratio``, ``subgroup_correlation``,
        ``exact_match``, ``within_one``, ``log_loss``, ``brier``,
        ``own_probability``, ``simbench``, as applicable), ``value`` and the
        bootstrap interval ``low`` and ``high``, and the source's
        ``answered`` and ``missing`` counts. A figure a source cannot have is
        left out; an interval that cannot be drawn is ``<NA>``."""
        pd = _pandas()
        rows = []
        for q in self.summary["questions"]:
            for src in q["sources"]:
                for figure, cell in src.items():
                    if not isinstance(cell, dict) or "value" not in cell:
                        continue
                    interval = cell.get("interval") or [None, None]
                    rows.append(
                        {
                            "question": q["id"],
                            "kind": q["kind"],
                            "source": src["name"],
                            "figure": figure,
                            "value": cell["value"],
                            "low": interval[0],
                            "high": interval[1],
                            "answered": src.get("answered"),
                            "missing": src.get("missing"),
                        }
                    )
        columns = ["question", "kind", "source", "figure", "value", "low", "high", "answered", "missing"]
        dtypes = {
            "question": "string",
            "kind": "string",
            "source": "string",
            "figure": "string",
            "value": "Float64",
            "low": "Float64",
            "high": "Float64",
            "answered": "Int64",
            "missing": "Int64",
        }
        typed: pandas.DataFrame = pd.DataFrame(rows, columns=columns).astype(dtypes)
        return typed

    def answers(self) -> "pandas.DataFrame":
        """One row per respondent and question: ``respondent``, ``half``
        (``fitted`` or ``held_out``), ``question``, the person's answer
        ``human``, the model's ``model`` and its re-run ``model_rerun``
        (option numbers from 1; ``<NA>`` where none parsed), the
        ``attempts``, ``cost_nano_usd`` and the model's ``why``."""
        pd = _pandas()
        frame = pd.read_csv(self._answers, dtype={"respondent": "string", "half": "string", "question": "string", "why": "string"}, keep_default_na=False, na_values=[""])
        for column in ("human", "model", "model_rerun", "attempts", "attempts_rerun", "cost_nano_usd"):
            if column in frame:
                frame[column] = frame[column].astype("Int64")
        typed: pandas.DataFrame = frame
        return typed

    def calibration(self) -> "pandas.DataFrame":
        """With ``validate(calibrate=True)``, one row per question: the
        ``question``, the fitted ``respondents``, the ``temperature``
        (``<NA>`` for sampled answers, which no temperature changes), the
        model's weight in its blend with the marginal (``weight_marginal``)
        and with the demographic cell (``weight_demographic``), the fitted
        half's log-loss of each (``fitted_log_loss_raw``, ``_temperature``,
        ``_blend_marginal``, ``_blend_demographic``) and the ``digest`` of
        what the calibration fits. Empty without ``calibrate``."""
        pd = _pandas()
        rows = []
        for c in (self.summary.get("calibration") or {}).get("questions", []):
            losses = c["fitted_log_loss"]
            rows.append(
                {
                    "question": c["question"],
                    "respondents": c["respondents"],
                    "temperature": c["temperature"],
                    "weight_marginal": c["weight_marginal"],
                    "weight_demographic": c["weight_demographic"],
                    **{f"fitted_log_loss_{k}": v for k, v in losses.items()},
                    "digest": c["digest"],
                }
            )
        dtypes = {
            "question": "string",
            "respondents": "Int64",
            "temperature": "Float64",
            "weight_marginal": "Float64",
            "weight_demographic": "Float64",
            "fitted_log_loss_raw": "Float64",
            "fitted_log_loss_temperature": "Float64",
            "fitted_log_loss_blend_marginal": "Float64",
            "fitted_log_loss_blend_demographic": "Float64",
            "digest": "string",
        }
        typed: pandas.DataFrame = pd.DataFrame(rows, columns=list(dtypes)).astype(dtypes)
        return typed

    def rectified(self) -> "pandas.DataFrame":
        """With ``validate(rectify=True)``, one row per question and
        option: ``question``, ``option`` (from 1), ``label``, the people-only
        estimate of its share with its 95% interval (``people_only``,
        ``people_only_low``, ``people_only_high``), the PPI++ estimate with
        its interval (``rectified``, ``rectified_low``, ``rectified_high``),
        its ``lambda`` (0: the model's forecasts unused) and
        ``effective_n``, and the held-out people's actual share
        (``held_out_share``), which both estimates are scored against.
        Empty without ``rectify``."""
        pd = _pandas()
        rows = []
        for r in self.summary.get("rectified") or []:
            for o in r["options"]:
                p, e = o["people_only"], o["rectified"]
                rows.append(
                    {
                        "question": r["question"],
                        "option": o["option"],
                        "label": o["label"],
                        "people_only": p["value"],
                        "people_only_low": p["interval"][0],
                        "people_only_high": p["interval"][1],
                        "rectified": e["value"],
                        "rectified_low": e["interval"][0],
                        "rectified_high": e["interval"][1],
                        "lambda": e["lambda"],
                        "effective_n": e["effective_n"],
                        "held_out_share": o["held_out_share"],
                    }
                )
        dtypes = {
            "question": "string",
            "option": "Int64",
            "label": "string",
            "people_only": "Float64",
            "people_only_low": "Float64",
            "people_only_high": "Float64",
            "rectified": "Float64",
            "rectified_low": "Float64",
            "rectified_high": "Float64",
            "lambda": "Float64",
            "effective_n": "Float64",
            "held_out_share": "Float64",
        }
        typed: pandas.DataFrame = pd.DataFrame(rows, columns=list(dtypes)).astype(dtypes)
        return typed

    def to_parquet(self, directory: PathLike) -> list[Path]:
        """Writes ``figures.parquet`` and ``answers.parquet`` into
        ``directory``, and ``calibration.parquet`` and ``rectified.parquet``
        when the validation has them. Needs pyarrow."""
        frames = {"figures": self.figures(), "answers": self.answers()}
        if self.summary.get("calibration"):
            frames["calibration"] = self.calibration()
        if self.summary.get("rectified"):
            frames["rectified"] = self.rectified()
        return _write_parquet(directory, frames, "Validation.to_parquet")

    def __repr__(self) -> str:
        s = self.summary
        return f"Validation({str(self.path)!r}, suite={s.get('suite')!r}, respondents={s.get('respondents')}, digest={self.digest[:16]}…)"


def validate(
    *,
    suite: str = "anes96",
    panel: "pandas.DataFrame | PathLike | None" = None,
    panel_map: "Mapping[str, Any] | PathLike | None" = None,
    answers: "pandas.DataFrame | PathLike | None" = None,
    questions: PathLike | None = None,
    subgroups: PathLike | None = None,
    config: PathLike | None = None,
    seed: int = 42,
    sample: int | None = None,
    out: PathLike | None = None,
    resamples: int = 1000,
    answer_mode: str | None = None,
    option_order: str | None = None,
    calibrate: bool = False,
    rectify: bool = False,
    confirm_live: bool = False,
    progress: Progress = True,
) -> Validation:
    """Checks a panel against real people (``sim-cli validate``): personas
    built from respondents answer the survey's questions on the configured
    chat model, and their answers are scored against the people's on the
    held-out half, beside baselines, with bootstrap intervals.

    ``suite`` is a built-in survey (``anes96``: ANES 1996), or give your four
    inputs: ``panel`` (a DataFrame or a CSV file, one respondent per row),
    ``panel_map`` (a dict shaped like ``[panel.columns]``, or a TOML file),
    ``answers`` (a DataFrame or a CSV file: the people's answers, one column
    per question) and ``questions`` (a TOML file: the questions, their
    options and subgroups), as the guide's "Checked against people"
    describes. ``sample`` takes a seeded subsample of that many respondents
    (at least 10). A validation of the same inputs left unfinished in
    ``out`` is continued.

    ``answer_mode`` (``"sample"``, ``"probabilities"`` or
    ``"verbalized"``; default the config's ``[answers] mode``, else
    sample): ``"probabilities"`` asks each persona for its model's
    probability of every option at the answer, once, with no reason
    generated (the scripted and GGUF models and OpenAI-compatible servers
    that return logprobs give them), and scores those distributions;
    ``"verbalized"`` asks each persona for the shares of people like it
    who would choose each option (for servers without logprobs). ``option_order="permuted"`` shows each
    persona the options in a seeded order (the answer mapped back), and
    the second run another order, so reliability measures order
    sensitivity; default the config's ``[answers] order``, else as asked.

    ``calibrate=True`` fits, per question on the fitted half, a temperature
    and the model's weight in a blend with the marginal and with the
    demographic baseline, and scores each calibrated model on the held-out
    half as a source of its own (``Validation.calibration()``; the fit is
    written to ``calibration.json``). ``rectify=True`` estimates each
    option's share by PPI++ from the fitted half's people and the model's
    forecasts of the held-out half (``Validation.rectified()``).
    """
    _counts(seed=(seed, 0), sample=(sample, 1), resamples=(resamples, 1))
    given = [panel, panel_map, answers, questions]
    if any(p is not None for p in given) and not all(p is not None for p in given):
        raise PanelError("validate: panel, panel_map, answers and questions go together; give all four or none")
    texts = None
    if panel is not None and panel_map is not None and answers is not None and questions is not None:
        texts = [
            _csv("panel", panel),
            _map(panel_map),
            _csv("answers", answers),
            (_read("questions", questions), str(questions)),
        ]
    bar, callback = _progress(progress, 0)
    summary: dict[str, Any] | None = None
    try:
        directory, summary_json, answers_path = _native.validate(
            suite=suite,
            texts=texts,
            subgroups=None if subgroups is None else str(subgroups),
            config=None if config is None else str(config),
            seed=seed,
            sample=sample,
            out=None if out is None else str(out),
            resamples=resamples,
            answer_mode=answer_mode,
            option_order=option_order,
            calibrate=calibrate,
            rectify=rectify,
            confirm_live=confirm_live,
            progress=callback,
        )
        summary = json.loads(summary_json)
    finally:
        if bar is not None:
            bar.close(None)
    return Validation(directory, summary, answers_path)
