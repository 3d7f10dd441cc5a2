"""The Python package against the library it wraps: the API, its tables, its
exceptions, its digests beside sim-cli's, and Ctrl-C with a resume.

sim-cli is never on the PATH here: the package calls the library. The one
test that compares with the CLI runs the binary named by SIM_CLI (the
test suite's build of it), and fails if it is not set.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import simengine

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "fixtures"

PANEL_MAP = {"id": "id", "age": {"trait": "age"}, "educ": {"trait": "education"}}


def people(n: int = 6) -> pd.DataFrame:
    return pd.DataFrame({"id": [f"r{i}" for i in range(n)], "age": [30 + i for i in range(n)], "educ": ["college"] * n})


def test_a_run_gives_its_outcomes_as_a_typed_frame(tmp_path: Path) -> None:
    r = simengine.run(personas=50, ticks=3, out=tmp_path / "r", progress=False)
    frame = r.outcomes()
    assert frame.shape == (150, 27)
    assert list(frame.columns[:4]) == ["tick", "position", "persona", "name"]
    assert str(frame["intent"].dtype) == "Int64" and str(frame["tick"].dtype) == "int64"
    assert frame["intent"].between(1, 5).all()
    assert isinstance(frame["interests"].iloc[0], list)
    assert set(frame["status"]) == {"ok"}
    assert sorted(frame["tick"].unique()) == [1, 2, 3]
    # Every cost is allocated, and the allocations add up to the provider's spend exactly.
    costs = r.costs()
    assert int(costs["total_nano_usd"].sum()) == r.summary["cost"]["provider_total_nano_usd"]
    assert costs["total_usd"].sum() == pytest.approx(r.summary["cost"]["provider_total_usd"])
    intents = r.intents()
    assert list(intents.columns) == ["tick", "persona", "stimulus", "intent", "ssr_expected"]
    assert intents["ssr_expected"].isna().all(), "the default intent method is direct: no SSR"
    assert r.digest == r.summary["digest"] and len(r.digest) == 64


def test_the_same_inputs_give_the_clis_digest(tmp_path: Path) -> None:
    cli = os.environ.get("SIM_CLI")
    assert cli, "SIM_CLI must name a sim-cli binary (bash .ci/test sets it)"
    r = simengine.run(personas=20, ticks=2, seed=5, out=tmp_path / "py", progress=False)
    out = subprocess.run(
        [cli, "run", "--personas", "20", "--ticks", "2", "--seed", "5", "--out", str(tmp_path / "cli"), "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    summary = json.loads(out.stdout)
    assert (r.digest, r.full_digest) == (summary["digest"], summary["full_digest"])
    # And a run the CLI wrote opens from Python with the same tables.
    opened = simengine.open(tmp_path / "cli")
    assert opened.digest == r.digest
    assert opened.outcomes().drop(columns=[]).equals(r.outcomes())


def test_answer_mode_and_calibration_give_the_clis_digest(tmp_path: Path) -> None:
    cli = os.environ.get("SIM_CLI")
    assert cli, "SIM_CLI must name a sim-cli binary (bash .ci/test sets it)"

    def cli_run(out: str, *extra: str) -> dict[str, Any]:
        args = [cli, "run", "--personas", "8", "--ticks", "2", "--seed", "3", "--out", str(tmp_path / out), "--json"]
        done = subprocess.run([*args, *extra], check=True, capture_output=True, text=True)
        return dict(json.loads(done.stdout))

    r = simengine.run(personas=8, ticks=2, seed=3, answer_mode="probabilities", out=tmp_path / "py", progress=False)
    assert r.digest == cli_run("cli", "--answer-mode", "probabilities")["digest"]
    assert r.digest != simengine.run(personas=8, ticks=2, seed=3, out=tmp_path / "sampled", progress=False).digest
    # A calibration fitted by validate, applied to a probe that asks its first question.
    v = simengine.validate(sample=40, resamples=100, answer_mode="probabilities", calibrate=True, out=tmp_path / "v", progress=False)
    survey = (FIXTURES / "surveys" / "anes96" / "survey.toml").read_text()
    text = next(line for line in survey.splitlines() if line.startswith("text = ")).removeprefix("text = ")
    options = json.dumps(v.summary["questions"][0]["options"])
    scenario = tmp_path / "scen.toml"
    probe = f'\n[[probes]]\ntick = 1\nid = "views"\nquestion = {text}\noptions = {options}\n'
    scenario.write_text((FIXTURES / "scenarios" / "default.toml").read_text() + probe)
    calibration = v.path / "calibration.json"
    c = simengine.run(
        personas=8, ticks=2, seed=3, scenario=str(scenario), answer_mode="probabilities", calibration=calibration,
        out=tmp_path / "cal-py", progress=False,
    )
    from_cli = cli_run("cal-cli", "--scenario", str(scenario), "--answer-mode", "probabilities", "--calibration", str(calibration))
    assert c.digest == from_cli["digest"]
    assert "probe views calibrated as question" in json.dumps(c.summary["notes"])
    with pytest.raises(simengine.ConfigError, match="this run answers in mode"):
        simengine.run(personas=8, ticks=1, scenario=str(scenario), calibration=calibration, out=tmp_path / "x", progress=False)
    with pytest.raises(simengine.ConfigError, match="answer_mode"):
        simengine.run(personas=8, ticks=1, answer_mode="logits", out=tmp_path / "y", progress=False)
    with pytest.raises(simengine.ConfigError, match="resume"):
        simengine.run(out=tmp_path / "py", resume=True, answer_mode="probabilities", progress=False)


def test_a_shard_is_the_clis_shard_byte_for_byte(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = os.environ.get("SIM_CLI")
    assert cli, "SIM_CLI must name a sim-cli binary (bash .ci/test sets it)"
    monkeypatch.chdir(tmp_path)
    r = simengine.run(personas=12, ticks=2, seed=7, shard=(1, 4), progress=False)
    # The CLI's default directory for the shard, and its files to the byte.
    assert Path(r.path).resolve() == (tmp_path / "runs" / "default-s7-12x2" / "shard-0001-of-0004").resolve()
    args = ["run", "--personas", "12", "--ticks", "2", "--seed", "7", "--shard", "1/4", "--out", "cli", "--json"]
    summary = json.loads(subprocess.run([cli, *args], check=True, capture_output=True, text=True).stdout)
    assert r.digest == summary["digest"] and r.summary["personas"] == 3
    for name in ["trace.bin", "outcomes.jsonl", "config.toml"]:
        assert (Path(r.path) / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    # The same call again finds the shard finished; the shards merge.
    assert simengine.run(personas=12, ticks=2, seed=7, shard=(1, 4), progress=False).digest == r.digest
    for bad in [(4, 4), (-1, 4), (0, 0), (1,), "1/4"]:
        with pytest.raises(simengine.ConfigError, match="shard="):
            simengine.run(personas=12, ticks=1, shard=bad, progress=False)  # type: ignore[arg-type]


def test_a_panel_frame_becomes_personas_row_by_row(tmp_path: Path) -> None:
    frame = people()
    r = simengine.run(panel=frame, panel_map=PANEL_MAP, ticks=1, out=tmp_path / "r", progress=False)
    out = r.outcomes()
    assert sorted(out["respondent"].unique()) == sorted(frame["id"])
    ages = dict(zip(out["respondent"], out["age"]))
    assert all(ages[row.id] == row.age for row in frame.itertuples())
    # The same panel from files gives the same run.
    frame.to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "map.toml").write_text('[panel.columns]\nid = "id"\nage = { trait = "age" }\neduc = { trait = "education" }\n')
    again = simengine.run(
        panel=tmp_path / "people.csv", panel_map=tmp_path / "map.toml", ticks=1, out=tmp_path / "f", progress=False
    )
    assert again.digest == r.digest


def test_a_bad_panel_frame_names_the_row_and_the_column(tmp_path: Path) -> None:
    frame = people()
    frame["age"] = frame["age"].astype(object)
    frame.loc[2, "age"] = "forty"
    with pytest.raises(simengine.PanelError) as bad_age:
        simengine.run(panel=frame, panel_map=PANEL_MAP, ticks=1, out=tmp_path / "a", progress=False)
    assert (bad_age.value.row, bad_age.value.column) == ("r2", "age"), str(bad_age.value)
    assert "forty" in str(bad_age.value) or "age" in str(bad_age.value)
    duplicate = people()
    duplicate.loc[4, "id"] = "r1"
    with pytest.raises(simengine.PanelError) as twice:
        simengine.run(panel=duplicate, panel_map=PANEL_MAP, ticks=1, out=tmp_path / "b", progress=False)
    assert twice.value.row == "r1" and twice.value.column == "id", str(twice.value)
    with pytest.raises(simengine.PanelError) as unknown:
        simengine.run(panel=people(), panel_map={**PANEL_MAP, "shoe_size": {"trait": "shoe size"}}, ticks=1,
                      out=tmp_path / "c", progress=False)
    assert unknown.value.column == "shoe_size", str(unknown.value)
    assert isinstance(unknown.value, simengine.SimEngineError)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists(), "nothing is written on bad input"
    # An integer column with a gap is float in pandas; it still reads as whole numbers.
    gappy = people()
    gappy["age"] = gappy["age"].astype(float)
    gappy.loc[1, "age"] = float("nan")
    r = simengine.run(panel=gappy, panel_map=PANEL_MAP, ticks=1, out=tmp_path / "d", progress=False)
    assert dict(zip(r.outcomes()["respondent"], r.outcomes()["age"]))["r2"] == 32
    with pytest.raises(simengine.ConfigError, match="personas"):
        simengine.run(personas=-3, out=tmp_path / "e", progress=False)


def test_bad_inputs_raise_the_packages_exceptions(tmp_path: Path) -> None:
    bad = tmp_path / "bad-scenario.toml"
    bad.write_text("name = [")
    with pytest.raises(simengine.ScenarioError, match="bad-scenario.toml"):
        simengine.run(scenario=str(bad), out=tmp_path / "s", progress=False)
    with pytest.raises(simengine.ScenarioError):
        simengine.run(scenario="no-such-scenario", out=tmp_path / "n", progress=False)
    config = tmp_path / "config.toml"
    config.write_text("[chat]\nprovider = \"telepathy\"\n")
    with pytest.raises(simengine.ConfigError, match="config.toml"):
        simengine.run(config=config, out=tmp_path / "c", progress=False)
    live = tmp_path / "live.toml"
    live.write_text(
        '[chat]\nprovider = "openai"\nmodel = "m"\n[chat.http]\nbase_url = "http://127.0.0.1:9/v1"\napi_key_env = ""\n'
    )
    with pytest.raises(simengine.BudgetError, match="confirm_live"):
        simengine.run(config=live, out=tmp_path / "l", progress=False)
    keyed = tmp_path / "keyed.toml"
    keyed.write_text(
        '[chat]\nprovider = "openai"\nmodel = "m"\n[chat.http]\nbase_url = "http://127.0.0.1:9/v1"\n'
        'api_key_env = "SIMENGINE_TEST_NO_SUCH_KEY"\n'
    )
    with pytest.raises(simengine.ConfigError, match="SIMENGINE_TEST_NO_SUCH_KEY"):
        simengine.run(config=keyed, out=tmp_path / "k", progress=False, confirm_live=True)
    with pytest.raises(simengine.SimEngineError, match="nowhere"):
        simengine.open(tmp_path / "nowhere")


def test_replay_report_and_merge(tmp_path: Path) -> None:
    whole = simengine.run(personas=12, ticks=2, out=tmp_path / "whole", progress=False)
    replayed = simengine.replay(whole.path)
    assert replayed["ticks_matched"] == 2 and replayed["divergence"] is None and replayed["provider_calls"] == 0
    page = simengine.report(whole.path)
    assert page.exists() and page.read_text().lstrip().lower().startswith("<!doctype html")
    cli = os.environ["SIM_CLI"]
    shards = []
    for i in range(2):
        d = tmp_path / f"shard{i}"
        subprocess.run([cli, "run", "--personas", "12", "--ticks", "2", "--shard", f"{i}/2", "--out", str(d)],
                       check=True, capture_output=True)
        shards.append(d)
    merged = simengine.merge(shards, out=tmp_path / "merged")
    assert merged.digest == whole.digest
    assert "<table>" in whole._repr_html_() and whole.digest in whole._repr_html_()


def test_progress_reaches_a_callable_on_this_thread(tmp_path: Path) -> None:
    import threading

    seen: list[tuple[int, str, int, int, bool]] = []
    main = threading.current_thread()
    simengine.run(personas=200, ticks=2, out=tmp_path / "r",
                  progress=lambda t, s, d, n: seen.append((t, s, d, n, threading.current_thread() is main)))
    assert seen, "no progress reached the callable"
    assert all(on_main for *_, on_main in seen)
    assert {t for t, *_ in seen} <= {1, 2}


def test_parquet_round_trip(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    r = simengine.run(personas=10, ticks=1, out=tmp_path / "r", progress=False)
    written = r.to_parquet(tmp_path / "pq")
    assert [p.name for p in written] == ["outcomes.parquet", "intents.parquet", "costs.parquet", "memories.parquet"]
    back = pd.read_parquet(tmp_path / "pq" / "outcomes.parquet")
    assert back.shape == r.outcomes().shape and list(back["persona"]) == list(r.outcomes()["persona"])


def test_memories_are_the_memory_commands_state(tmp_path: Path) -> None:
    cli = os.environ.get("SIM_CLI")
    assert cli, "SIM_CLI must name a sim-cli binary (bash .ci/test sets it)"
    r = simengine.run(personas=5, ticks=3, out=tmp_path / "r", progress=False)
    before = r.memories()
    # Every memory a run makes starts in the working tier: one observation
    # per job, and the reflections of the personas that reflected.
    assert (before["kind"] == "observation").sum() == 15 and set(before["kind"]) <= {"observation", "reflection"}
    assert set(before["tier"]) == {"working"} and before["current"].all()
    assert before["text"].notna().all() and isinstance(before["sources"].iloc[0], list)
    assert str(before["energy"].dtype) == "float64" and str(before["importance"].dtype) == "Int64"
    # A consolidation pass by the CLI (logged in the run's memory-ops.jsonl)
    # is what the package sees next: the same tiers as `memory status`.
    subprocess.run([cli, "memory", "consolidate", str(r.path), "--hours", "0"], check=True, capture_output=True)
    status = json.loads(
        subprocess.run([cli, "memory", "status", str(r.path), "--json"], check=True, capture_output=True, text=True).stdout
    )
    after = r.memories(history=True)
    counted = after[after["current"] | (after["tier"] == "archived")]
    assert counted["tier"].value_counts().to_dict() == {k: v for k, v in status["tiers"].items() if v}
    assert status["tiers"]["shortTerm"] > 0, "the pass promoted nothing: the comparison shows nothing"
    one = r.memories(persona="p-00002", history=True)
    assert set(one["persona"]) == {"p-00002"} and len(one) == len(after[after["persona"] == "p-00002"])
    promoted = one[one["tier"] == "shortTerm"].iloc[0]
    closed = one[one["version"] == promoted["previous"]].iloc[0]
    assert (closed["tier"], closed["from_tier"], closed["current"]) == ("archived", "working", False)
    assert closed["text"] == promoted["text"]
    with pytest.raises(simengine.SimEngineError, match="p-00004"):
        r.memories(persona=9)


@pytest.mark.skipif(not simengine.HAS_AGENTS, reason="a build without the agents' workload (see the test below)")
def test_field_simulate_is_the_clis_field_simulation(tmp_path: Path) -> None:
    cli = os.environ.get("SIM_CLI")
    assert cli, "SIM_CLI must name a sim-cli binary (bash .ci/test sets it)"
    args = ["--phases", "6", "--agents", "4", "--seed", "7"]
    out = subprocess.run(
        [cli, "field", "simulate", *args, "--out", str(tmp_path / "cli"), "--json"], check=True, capture_output=True, text=True
    )
    theirs = json.loads(out.stdout)
    ours = simengine.field_simulate(phases=6, agents=4, seed=7, out=tmp_path / "py", progress=False)
    assert ours["digest"] == theirs["digest"] and len(ours["digest"]) == 64
    assert ours["operations"] == theirs["operations"] and ours["operations"]["ok"] > 0
    assert ours["telemetry"]["patterns"] == theirs["patterns"] > 0
    written = sorted(p.name for p in (tmp_path / "py").iterdir())
    assert written == sorted(p.name for p in (tmp_path / "cli").iterdir())
    assert json.loads((tmp_path / "py" / "telemetry.json").read_text()) == ours["telemetry"]
    # Another seed, another field.
    assert simengine.field_simulate(phases=6, agents=4, seed=8, progress=False)["digest"] != ours["digest"]
    with pytest.raises(simengine.ConfigError, match="lambda"):
        simengine.field_simulate(phases=2, lambda_=-1.0, progress=False)
    with pytest.raises(simengine.ConfigError, match="not empty"):
        simengine.field_simulate(phases=2, out=tmp_path / "py", progress=False)


@pytest.mark.skipif(simengine.HAS_AGENTS, reason="a build with the agents' workload (see the test above)")
def test_a_build_without_the_agents_workload_says_how_to_get_it() -> None:
    with pytest.raises(simengine.SimEngineError, match='MATURIN_PEP517_ARGS="--features agents" pip install'):
        simengine.field_simulate(phases=2, progress=False)


CHILD = textwrap.dedent(
    """
    import sys, simengine
    said = []
    def progress(tick, stage, done, total):
        if tick >= 2 and not said:
            said.append(True)
            print("tick-2", flush=True)
    try:
        simengine.run(personas=3000, ticks=6, out=sys.argv[1], progress=progress)
    except simengine.Interrupted as e:
        print("interrupted", e.run_dir, e.after_tick, flush=True)
        sys.exit(3)
    print("finished", flush=True)
    """
)


def test_ctrl_c_stops_at_a_tick_boundary_and_resumes_to_the_same_digest(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("tick-2"):
            child.send_signal(signal.SIGINT)
            break
    rest = child.stdout.read()
    assert child.wait(timeout=600) == 3, rest
    said = [line.split() for line in rest.splitlines() if line.startswith("interrupted")]
    assert len(said) == 1, rest
    _, directory, after_tick = said[0]
    assert Path(directory) == run_dir and 1 <= int(after_tick) < 6, rest
    resumed = simengine.run(out=run_dir, resume=True, progress=False)
    whole = simengine.run(personas=3000, ticks=6, out=tmp_path / "whole", progress=False)
    assert resumed.digest == whole.digest


def test_validate_given_answers_weights_and_the_imputer_as_the_cli_does(tmp_path: Path) -> None:
    v = simengine.validate(suite="anes96", sample=200, resamples=100, given=["PID"], out=tmp_path / "g", progress=False)
    cli = os.environ["SIM_CLI"]
    out = subprocess.run(
        [cli, "validate", "--sample", "200", "--resamples", "100", "--given", "PID", "--out", str(tmp_path / "c"), "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert json.loads(out.stdout)["digest"] == v.digest
    assert v.summary["given"] == ["PID"]
    figures = v.figures()
    assert set(figures["question"]) == {"selfLR", "vote"}
    imputer = figures.query("source == 'imputer' and figure == 'log_loss'")
    assert len(imputer) == 2 and imputer["value"].notna().all()
    table = v.imputer()
    assert set(table["question"]) == {"selfLR", "vote"}
    assert set(table["model"]) == {"ordered logit", "multinomial logit"}
    assert table["name"].dropna().str.startswith("PID=").any()
    with pytest.raises(simengine.PanelError, match="list of question ids"):
        simengine.validate(given="PID", out=tmp_path / "s", progress=False)  # type: ignore[arg-type]
    weighted = FIXTURES / "surveys" / "weighted"
    anes = FIXTURES / "surveys" / "anes96"
    def weighted_validation(out: str, rectify: bool = False) -> simengine.Validation:
        return simengine.validate(
            panel=weighted / "panel.csv",
            panel_map=weighted / "panel-map.toml",
            answers=anes / "answers.csv",
            questions=anes / "survey.toml",
            sample=300,
            resamples=100,
            weights="weight",
            rectify=rectify,
            out=tmp_path / out,
            progress=False,
        )

    w = weighted_validation("w")
    reference = json.loads((weighted / "reference.json").read_text())
    for q in w.summary["questions"]:
        assert q["human_pmf"] == pytest.approx(reference["questions"][q["id"]]["human_pmf"], abs=1e-12)
    with pytest.raises(simengine.SimEngineError, match="--weights with --rectify"):
        weighted_validation("r", rectify=True)


def test_validate_scores_a_panel_against_people_as_the_cli_does(tmp_path: Path) -> None:
    v = simengine.validate(suite="anes96", sample=40, resamples=100, out=tmp_path / "v", progress=False)
    figures = v.figures()
    assert list(figures.columns) == ["question", "kind", "source", "figure", "value", "low", "high", "answered", "missing"]
    assert set(figures["question"]) == {q["id"] for q in v.summary["questions"]}
    assert len(set(figures["source"])) >= 2, "the model beside at least one baseline"
    missing = figures[figures["value"].isna()]
    # Only the sampled model's forecast figures are empty: one answer per respondent forecasts nothing.
    assert set(missing["source"]) == {"model (direct)"}
    assert set(missing["figure"]) == {"log_loss", "brier", "own_probability"}
    assert bool(figures["value"].dropna().map(math.isfinite).all())
    answers = v.answers()
    assert len(answers) == 40 * len(v.summary["questions"])
    assert set(answers["half"]) == {"fitted", "held_out"}
    assert str(answers["human"].dtype) == "Int64"
    cli = os.environ["SIM_CLI"]
    out = subprocess.run(
        [cli, "validate", "--suite", "anes96", "--sample", "40", "--resamples", "100", "--out", str(tmp_path / "c"), "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert json.loads(out.stdout)["digest"] == v.digest
    # The same people as DataFrames give the same validation.
    suite = FIXTURES / "surveys" / "anes96"
    frames = simengine.validate(
        panel=pd.read_csv(suite / "panel.csv", dtype=str, keep_default_na=False),
        panel_map=suite / "panel-map.toml",
        answers=pd.read_csv(suite / "answers.csv", dtype=str, keep_default_na=False),
        questions=suite / "survey.toml",
        sample=40,
        resamples=100,
        out=tmp_path / "frames",
        progress=False,
    )
    assert frames.figures()["value"].round(12).tolist() == figures["value"].round(12).tolist()
    with pytest.raises(simengine.PanelError, match="all four"):
        simengine.validate(panel=tmp_path / "p.csv", out=tmp_path / "x", progress=False)
    # Calibrated on the fitted half, rectified shares, as tables.
    calibrated = simengine.validate(
        suite="anes96", sample=60, resamples=100, calibrate=True, rectify=True, out=tmp_path / "cal", progress=False
    )
    fits = calibrated.calibration()
    assert list(fits["question"]) == [q["id"] for q in calibrated.summary["questions"]]
    assert fits["weight_marginal"].between(0, 1).all() and fits["temperature"].isna().all()
    assert fits["weight_imputer"].between(0, 1).all()
    shares = calibrated.rectified()
    assert shares.groupby("question")["people_only"].sum().round(9).eq(1).all()
    assert (shares["rectified_low"] <= shares["rectified"]).all() and (shares["rectified"] <= shares["rectified_high"]).all()
    assert (tmp_path / "cal" / "calibration.json").exists()
    assert calibrated.figures()["source"].str.contains("calibrated").any()
    assert v.calibration().empty and v.rectified().empty
    weighed = simengine.validate(suite="anes96", sample=20, resamples=100, answer_mode="probabilities", out=tmp_path / "p", progress=False)
    assert weighed.summary["answer_mode"] == "probabilities"
    forecast = weighed.figures().query("figure == 'log_loss' and source == 'model (probabilities)'")
    assert len(forecast) == 3 and forecast["value"].notna().all()
    permuted = simengine.validate(
        suite="anes96", sample=20, resamples=100, answer_mode="probabilities", option_order="permuted", out=tmp_path / "o", progress=False
    )
    assert permuted.summary["calls"]["asked"] == 2 * weighed.summary["calls"]["asked"], "two orders, two runs"
    with pytest.raises(simengine.ConfigError, match="answer_mode"):
        simengine.validate(suite="anes96", sample=20, answer_mode="logits", out=tmp_path / "q", progress=False)
    with pytest.raises(simengine.SimEngineError, match="no-such-suite"):
        simengine.validate(suite="no-such-suite", out=tmp_path / "y", progress=False)


def test_a_second_validation_is_served_from_the_response_cache(tmp_path: Path) -> None:
    """A server speaking the OpenAI protocol on loopback, weighing every
    option: asked again, the validation is served from the cache with no
    call and the same digest; ``cache=False`` asks the server again."""
    import http.server
    import threading

    calls: list[str] = []

    class Server(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the handler's protocol
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            calls.append(self.path)
            top = [{"token": str(o), "logprob": -0.3 * o} for o in range(1, 8)]
            reply = {
                "model": "m",
                "choices": [{"message": {"role": "assistant", "content": "1"}, "logprobs": {"content": [{"token": "1", "logprob": -0.3, "top_logprobs": top}]}}],
                "usage": {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": 1},
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    config = tmp_path / "live.toml"
    config.write_text(
        f'[chat]\nprovider = "openai"\nmodel = "m"\n[chat.http]\nbase_url = "http://127.0.0.1:{server.server_port}/v1"\n'
        f'api_key_env = ""\n[cache]\ndir = "kept"\n'
    )
    try:

        def ask(out: str, cache: bool = True) -> simengine.Validation:
            return simengine.validate(
                config=config, sample=10, resamples=50, answer_mode="probabilities", confirm_live=True,
                progress=False, out=tmp_path / out, cache=cache,
            )

        first = ask("a")
        bought = len(calls) - 1  # the connection check is made live, outside the cache
        # The estimate rests on a pilot of the first respondent's three
        # questions, which the validation reused (30 weighings bought once).
        estimate = first.estimate
        assert estimate is not None and estimate["pilot"]["jobs"] == 3 and bought == 30
        used = first.summary["calls"]["input_tokens"] + first.summary["calls"]["output_tokens"]
        assert estimate["low_tokens"] <= used <= estimate["high_tokens"], (used, estimate)
        second = ask("b")
        assert len(calls) == bought + 2, "no call but the second connection check"
        assert second.digest == first.digest
        assert first.response_cache is not None and second.response_cache is not None
        assert (first.response_cache["cache_hits"], first.response_cache["provider_calls"]) == (0, bought)
        assert (second.response_cache["cache_hits"], second.response_cache["provider_calls"]) == (bought, 0)
        assert (tmp_path / "kept").is_dir(), "the directory is relative to the config's"
        third = ask("c", cache=False)
        assert third.response_cache is None and len(calls) == 2 * bought + 3 and third.digest == first.digest
    finally:
        server.shutdown()


def test_models_compared_in_one_validation_as_the_cli_does(tmp_path: Path) -> None:
    one, two = tmp_path / "one.toml", tmp_path / "two.toml"
    one.write_text("")
    two.write_text("[chat]\nmalformed_rate = 0.0\n")
    v = simengine.validate(configs=[one, two], sample=20, resamples=100, out=tmp_path / "c", progress=False)
    assert v.is_comparison and [m["label"] for m in v.models] == ["1-scripted-persona-v1", "2-scripted-persona-v1"]
    alone = simengine.validate(config=one, sample=20, resamples=100, out=tmp_path / "a", progress=False)
    assert v.digests["1-scripted-persona-v1"] == alone.digest, "a model's digest whatever else is in the job"
    figures = v.figures()
    assert list(figures.columns)[:2] == ["model", "question"] and set(figures["model"]) == set(v.digests)
    assert set(v.answers()["label"]) == set(v.digests)
    pairs = v.comparison()
    assert set(pairs["question"]) == {"selfLR", "PID", "vote", "overall"}
    assert set(pairs["verdict"]) <= {"a better", "b better", "tied"}
    assert set(v.ranking()["rank"].dropna()) <= {1, 2}
    with pytest.raises(simengine.ConfigError, match="digests"):
        _ = v.digest
    with pytest.raises(simengine.ConfigError, match="model"):
        v.imputer()
    assert v.model("1-scripted-persona-v1").digest == alone.digest
    assert len(v.model("2-scripted-persona-v1").imputer()) > 0
    cli = os.environ["SIM_CLI"]
    out = subprocess.run(
        [cli, "validate", "--config", str(one), "--config", str(two), "--sample", "20", "--resamples", "100", "--out", str(tmp_path / "cli"), "--json"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert json.loads(out.stdout)["comparison"] == v.summary["comparison"]
