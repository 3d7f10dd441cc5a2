"""Runs: ``run`` a panel (as ``sim-cli run``), ``open`` a run directory
made by either, ``replay``, ``report`` and ``merge`` it; and ``Run``, a run
directory read into pandas DataFrames."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from . import _native
from .errors import ConfigError
from .inputs import PathLike, _counts, _panel
from .progress import Progress, _progress
from .tables import _pandas, _write_parquet

if TYPE_CHECKING:
    import pandas

__all__ = ["Run", "run", "open", "replay", "report", "merge"]

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
    def response_cache(self) -> dict[str, Any] | None:
        """What the response cache did (``summary["chat"]["response_cache"]``):
        ``cache_hits``, ``provider_calls``, ``billed_usd`` against
        ``would_have_billed_usd``, and entries ``ignored``; ``None`` when the
        run had none (a scripted model, ``cache=False``)."""
        found = self.summary.get("chat", {}).get("response_cache")
        return None if found is None else dict(found)

    @property
    def estimate(self) -> dict[str, Any] | None:
        """The pre-flight estimate made before a live or local model's run
        (``summary["estimate"]``): ``calls``, ``low_usd``, ``expected_usd``,
        ``high_usd``, ``low_tokens``, ``expected_tokens``, ``high_tokens``,
        the ``pilot`` it rests on (jobs, calls and their ``spend``) and its
        ``assumptions``; compare it with ``summary["cost"]``. ``None`` for a
        scripted model (and a resumed or replayed run)."""
        found = self.summary.get("estimate")
        return None if found is None else dict(found)

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
    answer_mode: str | None = None,
    calibration: PathLike | None = None,
    confirm_live: bool = False,
    progress: Progress = True,
    shard: tuple[int, int] | None = None,
    cache: bool = True,
    pilot: int = 3,
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

    ``answer_mode`` (``"sample"``, ``"probabilities"`` or
    ``"verbalized"``; default the config's ``[answers] mode``, else
    sample), as ``sim-cli run --answer-mode``: ``"probabilities"`` weighs
    each persona's purchase intent and probe answers by its model's
    probability of every option; ``"verbalized"`` asks the persona for the
    shares of people like it who would choose each option. The summary's
    ``intent`` and ``probes`` then carry the panel's distribution
    (``mixture``). ``calibration`` is a ``calibration.json`` written by
    ``validate(calibrate=True)`` (or ``sim-cli validate --calibrate``), as
    ``sim-cli run --calibration``: it is applied to the scenario's probes
    that ask its questions. A calibration needs the run in a distribution
    mode (``"probabilities"`` or ``"verbalized"``, the one it was fitted
    in), and is refused otherwise. Neither goes with ``resume``: a resumed
    run continues as it was configured.

    ``shard=(i, n)`` runs shard ``i`` (from 0) of ``n``, as ``sim-cli run
    --shard i/n``: a contiguous 1/n of the panel's personas, each with the
    outcomes it has in the whole panel, and 1/n of ``budget_usd`` and of
    the rate limits. The default ``out`` is the CLI's,
    ``runs/NAME/shard-000i-of-000n``; the same call on an unfinished
    shard's directory resumes it, on a finished one returns it.
    ``merge`` joins the shards into the unsharded run's digest.

    ``cache=False`` neither serves answers from the response cache nor
    keeps them there (``sim-cli run --no-cache``). By default a live
    model's replies are kept under the user's cache directory (``[cache]
    dir`` elsewhere), and a later run asking the same gets them with no
    call and the same digests; ``Run.response_cache`` says what it did.

    On a live or local model (OpenAI-compatible or GGUF), the first
    ``pilot`` jobs of tick 1 are conversed before the run (billed, and
    served to the run: nothing is paid twice, as ``sim-cli run --pilot``)
    to measure its prompt and reply lengths; ``Run.estimate`` is the range
    built on them (``low_usd``, ``expected_usd``, ``high_usd``, tokens
    likewise, and its ``assumptions``). ``pilot=0`` prices every reply at
    ``max_output_tokens``.

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
    _counts(personas=(personas, 1), ticks=(ticks, 1), seed=(seed, 0), threads=(threads, 1), pilot=(pilot, 0))
    if shard is not None:
        pair = tuple(shard) if isinstance(shard, (tuple, list)) else ()
        if len(pair) != 2 or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair):
            raise ConfigError(f"shard={shard!r}: give a pair (i, n) of integers, i counted from 0")
        if pair[1] < 1 or not 0 <= pair[0] < pair[1]:
            raise ConfigError(f"shard={shard!r}: give (i, n) with n >= 1 and 0 <= i < n, i counted from 0")
        shard = (int(pair[0]), int(pair[1]))
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
            answer_mode=answer_mode,
            calibration=None if calibration is None else str(calibration),
            confirm_live=confirm_live,
            progress=callback,
            shard=shard,
            cache=cache,
            pilot=pilot,
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
