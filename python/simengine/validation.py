"""Validations: ``validate`` a panel against real people's answers (as
``sim-cli validate``), and ``Validation``, its figures, answers,
calibration and rectified estimates as pandas DataFrames."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from . import _native
from .errors import ConfigError, PanelError
from .inputs import PathLike, _counts, _csv, _map, _read
from .progress import Progress, _progress
from .tables import _pandas, _write_parquet

if TYPE_CHECKING:
    import pandas

__all__ = ["Validation", "validate"]

class Validation:
    """A validation (``simengine.validate`` or ``sim-cli validate``): a
    panel's answers scored against real people's, on the held-out half."""

    def __init__(self, path: PathLike, summary: dict[str, Any], answers_path: PathLike | None) -> None:
        self.path: Path = Path(path)
        self.summary: dict[str, Any] = summary
        self._answers = None if answers_path is None else Path(answers_path)

    @property
    def is_comparison(self) -> bool:
        """Whether this compares several models (``validate(configs=...)``)."""
        return "models" in self.summary

    @property
    def digest(self) -> str:
        """The validation's digest (its answers and figures); a comparison
        has one per model (``digests``), and raises ``ConfigError``."""
        if self.is_comparison:
            raise ConfigError("a comparison has one digest per model: see Validation.digests")
        return str(self.summary["digest"])

    @property
    def models(self) -> list[dict[str, Any]]:
        """A comparison's models, in the order given: ``label``,
        ``config``, ``chat_model``, and ``error`` for one that failed
        (empty for one validation)."""
        return [{k: v for k, v in m.items() if k != "summary"} for m in self.summary.get("models", [])]

    @property
    def digests(self) -> dict[str, str]:
        """Each finished model's digest by its label (a comparison), or the
        one digest under ``"model"``."""
        if not self.is_comparison:
            return {"model": self.digest}
        return {m["label"]: m["summary"]["digest"] for m in self.summary["models"] if "summary" in m}

    def model(self, label: str) -> Validation:
        """A comparison's model ``label`` as a validation of its own (its
        ``calibration()``, ``rectified()``, ``imputer()`` and
        ``response_cache`` among the rest); raises ``ConfigError`` for a
        label that did not finish, or on one validation."""
        for m in self.summary.get("models", []):
            if m["label"] == label and "summary" in m:
                return Validation(self.path / label, m["summary"], self.path / label / "answers.csv")
        finished = [m["label"] for m in self.summary.get("models", []) if "summary" in m]
        raise ConfigError(f"no finished model {label!r} in this validation (finished: {finished})")

    def _single(self, what: str) -> None:
        if self.is_comparison:
            raise ConfigError(f"a comparison has one {what} per model: use Validation.model(label).{what}()")

    def _parts(self) -> list[tuple[str | None, dict[str, Any], Path]]:
        """Each finished model's label, summary and answers file."""
        if not self.is_comparison:
            assert self._answers is not None
            return [(None, self.summary, self._answers)]
        return [
            (m["label"], m["summary"], self.path / m["label"] / "answers.csv")
            for m in self.summary["models"]
            if "summary" in m
        ]

    def comparison(self) -> "pandas.DataFrame":
        """A comparison's pairs: one row per question (and ``overall``) and
        pair, ``a`` (a model) against ``b`` (another model or a baseline):
        the ``figure`` (``log_loss``, lower is better, or ``exact_match``),
        a's figure minus b's as ``value`` with its paired bootstrap
        interval ``low`` and ``high``, the ``verdict`` (``a better``, ``b
        better`` or ``tied``), and the same for the question's
        ``distribution_figure``. Empty for one validation."""
        pd = _pandas()
        rows = []
        c = self.summary.get("comparison") or {"questions": [], "overall": []}
        blocks = [(q["question"], q["pairs"]) for q in c["questions"]] + [("overall", c["overall"])]
        for question, pairs in blocks:
            for p in pairs:
                d, dd = p["difference"], p["distribution_difference"]
                low, high = d.get("interval") or [None, None]
                dlow, dhigh = dd.get("interval") or [None, None]
                rows.append({
                    "question": question, "a": p["a"], "b": p["b"], "figure": p["figure"], "value": d["value"],
                    "low": low, "high": high, "verdict": p["verdict"], "distribution_figure": p["distribution_figure"],
                    "distribution_value": dd["value"], "distribution_low": dlow, "distribution_high": dhigh,
                })
        columns = ["question", "a", "b", "figure", "value", "low", "high", "verdict", "distribution_figure", "distribution_value", "distribution_low", "distribution_high"]
        floats = ["value", "low", "high", "distribution_value", "distribution_low", "distribution_high"]
        dtypes = {c: ("Float64" if c in floats else "string") for c in columns}
        typed: pandas.DataFrame = pd.DataFrame(rows, columns=columns).astype(dtypes)
        return typed

    def ranking(self) -> "pandas.DataFrame":
        """A comparison's ranking: one row per question (and ``overall``)
        and model: its ``rank`` (1 plus the models better beyond doubt, so
        models whose paired interval covers 0 tie), the ``figure`` ranked
        on and the model's ``value``. Empty for one validation."""
        pd = _pandas()
        c = self.summary.get("comparison") or {"questions": [], "ranking": []}
        blocks = [(q["question"], q["ranking"]) for q in c["questions"]] + [("overall", c["ranking"])]
        rows = [
            {"question": question, "model": s["name"], "rank": s["rank"], "figure": s["figure"], "value": s["value"]}
            for question, standings in blocks
            for s in standings
        ]
        columns = ["question", "model", "rank", "figure", "value"]
        dtypes = {"question": "string", "model": "string", "rank": "Int64", "figure": "string", "value": "Float64"}
        typed: pandas.DataFrame = pd.DataFrame(rows, columns=columns).astype(dtypes)
        return typed

    @property
    def estimate(self) -> dict[str, Any] | None:
        """The pre-flight estimate made before a live or local model's
        validation (``summary["estimate"]``), as ``Run.estimate`` describes;
        ``None`` for a scripted model (and for a comparison: see each
        ``model(label)``)."""
        found = self.summary.get("estimate")
        return None if found is None else dict(found)

    @property
    def response_cache(self) -> dict[str, Any] | None:
        """What the response cache did (``summary["calls"]["response_cache"]``),
        as ``Run.response_cache`` describes; ``None`` without one (and for a
        comparison: see each ``model(label)``)."""
        found = self.summary.get("calls", {}).get("response_cache")
        return None if found is None else dict(found)

    def figures(self) -> "pandas.DataFrame":
        """One row per question, source and figure, on the held-out half (a
        comparison's rows start with the ``model``, its label):
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
        for model, summary, _ in self._parts():
            for q in summary["questions"]:
                for src in q["sources"]:
                    for figure, cell in src.items():
                        if not isinstance(cell, dict) or "value" not in cell:
                            continue
                        interval = cell.get("interval") or [None, None]
                        rows.append(
                            {
                                "model": model,
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
        if self.is_comparison:
            columns = ["model", *columns]
        dtypes = {
            "model": "string",
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
        typed: pandas.DataFrame = pd.DataFrame(rows, columns=columns).astype({c: dtypes[c] for c in columns})
        return typed

    def answers(self) -> "pandas.DataFrame":
        """One row per respondent and question: ``respondent``, ``half``
        (``fitted`` or ``held_out``), ``question``, the person's answer
        ``human``, the model's ``model`` and its re-run ``model_rerun``
        (option numbers from 1; ``<NA>`` where none parsed), the
        ``attempts``, ``cost_nano_usd`` and the model's ``why``; a
        comparison's rows start with the model's ``label``."""
        pd = _pandas()
        frames = []
        for label, _, path in self._parts():
            frame = pd.read_csv(path, dtype={"respondent": "string", "half": "string", "question": "string", "why": "string"}, keep_default_na=False, na_values=[""])
            for column in ("human", "model", "model_rerun", "attempts", "attempts_rerun", "cost_nano_usd"):
                if column in frame:
                    frame[column] = frame[column].astype("Int64")
            if label is not None:
                frame.insert(0, "label", pd.array([label] * len(frame), dtype="string"))
            frames.append(frame)
        typed: pandas.DataFrame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        return typed

    def calibration(self) -> "pandas.DataFrame":
        """With ``validate(calibrate=True)``, one row per question: the
        ``question``, the fitted ``respondents``, the ``temperature``
        (``<NA>`` for sampled answers, which no temperature changes), the
        model's weight in its blend with the marginal (``weight_marginal``),
        with the demographic cell (``weight_demographic``) and with the
        imputer (``weight_imputer``), the fitted half's log-loss of each
        (``fitted_log_loss_raw``, ``_temperature``, ``_blend_marginal``,
        ``_blend_demographic``, ``_blend_imputer``) and the ``digest`` of
        what the calibration fits. Empty without ``calibrate``."""
        self._single("calibration")
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
                    "weight_imputer": c.get("weight_imputer"),
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
            "weight_imputer": "Float64",
            "fitted_log_loss_raw": "Float64",
            "fitted_log_loss_temperature": "Float64",
            "fitted_log_loss_blend_marginal": "Float64",
            "fitted_log_loss_blend_demographic": "Float64",
            "fitted_log_loss_blend_imputer": "Float64",
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
        self._single("rectified")
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

    def imputer(self) -> "pandas.DataFrame":
        """One row per scored question and coefficient of the imputer
        baseline: ``question``, ``model`` (``multinomial logit`` or
        ``ordered logit``), ``converged``, ``note`` (why it fell back to the
        fitted half's marginal, when it did), ``equation`` (``option 2``…,
        ``latent`` or ``cutpoints``), ``name`` (``(intercept)``, ``age``,
        ``educ=2``, ``cut 1|2``…) and ``value``, on the data's own scale. A
        question whose fit did not converge has one row, without
        coefficients."""
        self._single("imputer")
        pd = _pandas()
        rows = []
        for f in self.summary.get("imputer") or []:
            base = {"question": f["question"], "model": f["model"], "converged": f["converged"], "note": f.get("note")}
            coefficients = f.get("coefficients") or []
            if not coefficients:
                rows.append({**base, "equation": None, "name": None, "value": None})
            for c in coefficients:
                rows.append({**base, "equation": c["equation"], "name": c["name"], "value": c["value"]})
        dtypes = {
            "question": "string",
            "model": "string",
            "converged": "boolean",
            "note": "string",
            "equation": "string",
            "name": "string",
            "value": "Float64",
        }
        typed: pandas.DataFrame = pd.DataFrame(rows, columns=list(dtypes)).astype(dtypes)
        return typed

    def to_parquet(self, directory: PathLike) -> list[Path]:
        """Writes ``figures.parquet`` and ``answers.parquet`` into
        ``directory``, and ``calibration.parquet`` and ``rectified.parquet``
        when the validation has them (a comparison: ``comparison.parquet``
        and ``ranking.parquet``; each model's own through ``model(label)``).
        Needs pyarrow."""
        frames = {"figures": self.figures(), "answers": self.answers()}
        if self.is_comparison:
            frames["comparison"] = self.comparison()
            frames["ranking"] = self.ranking()
            return _write_parquet(directory, frames, "Validation.to_parquet")
        if self.summary.get("calibration"):
            frames["calibration"] = self.calibration()
        if self.summary.get("rectified"):
            frames["rectified"] = self.rectified()
        return _write_parquet(directory, frames, "Validation.to_parquet")

    def __repr__(self) -> str:
        s = self.summary
        if self.is_comparison:
            return f"Validation({str(self.path)!r}, models={[m['label'] for m in self.models]!r})"
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
    given: "list[str] | tuple[str, ...] | None" = None,
    weights: str | None = None,
    confirm_live: bool = False,
    progress: Progress = True,
    cache: bool = True,
    configs: "Sequence[PathLike] | None" = None,
    pilot: int = 3,
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
    and the model's weight in a blend with the marginal, with the
    demographic baseline and with the imputer, and scores each calibrated model on the held-out
    half as a source of its own (``Validation.calibration()``; the fit is
    written to ``calibration.json``). ``rectify=True`` estimates each
    option's share by PPI++ from the fitted half's people and the model's
    forecasts of the held-out half (``Validation.rectified()``).

    ``given=["PID"]`` shows each persona its respondent's own answers to
    those questions first, as the earlier part of an interview in the
    survey's wording; they are not scored, and the ``imputer`` baseline (a
    multinomial or ordered logit on the traits, fitted on the fitted half)
    takes them as inputs too (``Validation.imputer()``; each question's
    ``versus_imputer`` in the summary says whether the model beats it).
    ``weights="COLUMN"`` weights every figure, baseline and fit by that
    column of your panel (map it ``{"ignore": True}``); not with
    ``rectify``.

    ``cache=False`` neither serves answers from the response cache nor
    keeps them (``sim-cli validate --no-cache``); see ``simengine.run``.
    ``Validation.response_cache`` says what it did. On a live or local
    model, every question of the first respondents (at least ``pilot``
    questions) is asked first, billed and reused, to measure prompt and
    reply lengths: ``Validation.estimate`` is the range built on them
    (``sim-cli validate --pilot``; ``pilot=0`` prices replies at their cap).

    ``configs=[a, b, ...]`` compares models (``sim-cli validate --config a
    --config b``): each answers the same respondents, in a directory of its
    own under ``out``, with the digest it has alone (``digests``). A model
    that fails is reported as failed (``models``) and the others go on.
    ``figures()`` then starts with a ``model`` column and ``answers()``
    with ``label``; ``model(label)`` is one model's validation;
    ``comparison()`` gives every pair's paired difference (and each model's
    against each baseline) with its interval and verdict, and
    ``ranking()`` the models per question and overall, tied where an
    interval covers 0.
    """
    _counts(seed=(seed, 0), sample=(sample, 1), resamples=(resamples, 1), pilot=(pilot, 0))
    if isinstance(configs, (str, bytes, os.PathLike)):
        raise ConfigError(f"validate: configs={configs!r}: give a list of config files, e.g. configs=[{str(configs)!r}, ...]")
    config_list = [str(c) for c in (configs or [])]
    if config_list and config is not None:
        raise ConfigError("validate: give config= for one model or configs= for several, not both")
    if len(config_list) == 1:
        config, config_list = config_list[0], []
    if isinstance(given, str):
        raise PanelError(f"validate: given={given!r}: give a list of question ids, e.g. given=[{given!r}]")
    given_ids = [str(g) for g in (given or [])]
    four = [panel, panel_map, answers, questions]
    if any(p is not None for p in four) and not all(p is not None for p in four):
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
            given=given_ids,
            weights=weights,
            confirm_live=confirm_live,
            progress=callback,
            cache=cache,
            configs=config_list,
            pilot=pilot,
        )
        summary = json.loads(summary_json)
    finally:
        if bar is not None:
            bar.close(None)
    return Validation(directory, summary, answers_path or None)
