//! `sim-cli validate --given` and `--weights`: a respondent's known
//! answers in the prompt and the imputer beside the baselines; weighted
//! figures against numpy's (`fixtures/surveys/weighted/reference.json`,
//! made by `make_reference.py` beside it).

use crate::support::{scratch, sim, stderr};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("--json prints one JSON object")
}

fn fixture(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/surveys").join(path)
}

fn ids(summary: &Value) -> Vec<&str> {
    summary["questions"].as_array().expect("questions").iter().filter_map(|q| q["id"].as_str()).collect()
}

fn imputer_columns<'v>(summary: &'v Value, question: &str) -> Vec<&'v str> {
    let fit = summary["imputer"].as_array().expect("imputer").iter().find(|f| f["question"] == question);
    fit.expect("a fit per question")["columns"].as_array().expect("columns").iter().filter_map(Value::as_str).collect()
}

#[test]
fn given_answers_are_not_scored_and_the_imputer_stands_beside_the_baselines() {
    let dir = scratch("validate-given");
    let run = |out: &str, extra: &[&str]| {
        let mut args =
            vec!["validate", "--suite", "anes96", "--sample", "200", "--resamples", "200", "--json", "--out", out];
        args.extend(extra);
        json(&sim(&dir, &args))
    };
    let given = run("given", &["--given", "PID"]);
    assert_eq!(ids(&given), ["selfLR", "vote"], "PID is given, not scored");
    assert_eq!(given["given"], serde_json::json!(["PID"]));
    assert_eq!(given["calls"]["asked"], 200 * 2 * 2, "two questions asked, twice");
    for q in given["questions"].as_array().expect("questions") {
        let names: Vec<&str> =
            q["sources"].as_array().expect("sources").iter().filter_map(|s| s["name"].as_str()).collect();
        assert_eq!(names, ["model (direct)", "uniform", "marginal", "demographic", "imputer"]);
        assert!(q["sources"][4]["log_loss"]["value"].is_f64(), "the imputer forecasts");
        let versus = &q["versus_imputer"];
        assert_eq!(versus["figure"], "exact_match", "sampled answers forecast nothing, so exact match decides");
        assert!(["beats", "loses to", "ties with"].contains(&versus["verdict"].as_str().expect("a verdict")));
    }
    let fits = given["imputer"].as_array().expect("imputer");
    assert_eq!(
        (fits[0]["model"].as_str(), fits[1]["model"].as_str()),
        (Some("ordered logit"), Some("multinomial logit"))
    );
    for f in fits {
        assert!(f["converged"] == true || f["note"].as_str().is_some_and(|n| n.contains("marginal")), "{f}");
    }
    assert!(
        imputer_columns(&given, "selfLR").iter().any(|c| c.starts_with("PID=")),
        "{:?}",
        imputer_columns(&given, "selfLR")
    );
    let asked: std::collections::BTreeSet<String> = csv::Reader::from_path(dir.join("given/answers.csv"))
        .expect("answers.csv")
        .records()
        .map(|r| r.expect("a row")[2].to_string())
        .collect();
    assert_eq!(asked.into_iter().collect::<Vec<_>>(), ["selfLR", "vote"]);
    let text = sim(&dir, &["validate", "--sample", "30", "--resamples", "100", "--given", "PID", "--out", "text"]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains("given: each respondent's own answers to PID shown as the interview so far, not scored"),
        "{text}"
    );
    assert!(text.contains("the imputer (ordered logit on the traits and PID)"), "{text}");

    let plain = run("plain", &[]);
    assert_eq!(ids(&plain), ["selfLR", "PID", "vote"]);
    assert!(plain.get("given").is_none());
    assert!(imputer_columns(&plain, "vote").iter().all(|c| !c.starts_with("PID")), "demographics only without --given");
    assert!(imputer_columns(&plain, "vote").contains(&"age"));

    for (args, needle) in [
        (vec!["--given", "party"], "--given party: the survey has no such question (its questions: selfLR, PID, vote)"),
        (vec!["--given", "selfLR,PID,vote"], "--given names every question of the survey"),
    ] {
        let mut all = vec!["validate", "--sample", "30", "--out", "refused"];
        all.extend(args);
        let o = sim(&dir, &all);
        assert!(!o.status.success() && stderr(&o).contains(needle), "{needle}: {}", stderr(&o));
    }
}

/// A new weight from a panel line's number and its fixture weight.
type Reweigh<'a> = &'a dyn Fn(usize, &str) -> String;

/// The weighted test survey: the fixture panel with its `weight` column
/// replaced by `weight(line, original)` when given.
fn weighted(dir: &Path, name: &str, weight: Option<Reweigh<'_>>) -> Vec<String> {
    let text = std::fs::read_to_string(fixture("weighted/panel.csv")).expect("the fixture");
    let panel = match weight {
        None => text,
        Some(f) => text
            .lines()
            .enumerate()
            .map(|(i, line)| match (i, line.rsplit_once(',')) {
                (0, _) | (_, None) => format!("{line}\n"),
                (_, Some((rest, w))) => format!("{rest},{}\n", f(i, w)),
            })
            .collect(),
    };
    let path = dir.join(format!("{name}.csv"));
    std::fs::write(&path, panel).expect("write the panel");
    [
        "validate",
        "--panel",
        &path.display().to_string(),
        "--panel-map",
        &fixture("weighted/panel-map.toml").display().to_string(),
        "--answers",
        &fixture("anes96/answers.csv").display().to_string(),
        "--questions",
        &fixture("anes96/survey.toml").display().to_string(),
        "--sample",
        "300",
        "--seed",
        "42",
        "--resamples",
        "100",
        "--json",
        "--out",
        name,
    ]
    .map(String::from)
    .to_vec()
}

fn figures(dir: &Path, args: &[String], weights: bool) -> Value {
    let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
    if weights {
        args.extend(["--weights", "weight"]);
    }
    let summary = json(&sim(dir, &args));
    assert_eq!(summary["weights"].as_str(), weights.then_some("weight"));
    summary
}

#[test]
fn weighted_figures_are_numpys_and_ones_or_doubled_weights_change_nothing() {
    let dir = scratch("validate-weights");
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("weighted/reference.json")).expect("reference"))
            .expect("json");
    let summary = figures(&dir, &weighted(&dir, "w", None), true);
    let close = |got: &Value, want: &Value, tolerance: f64, what: &str| {
        let (g, w) = (got.as_f64().unwrap_or(f64::NAN), want.as_f64().expect("a number"));
        assert!((g - w).abs() <= tolerance, "{what}: {g} against numpy's {w}");
    };
    for q in summary["questions"].as_array().expect("questions") {
        let id = q["id"].as_str().expect("id");
        let want = &reference["questions"][id];
        let model = &q["sources"][0];
        let marginal =
            q["sources"].as_array().expect("sources").iter().find(|s| s["name"] == "marginal").expect("marginal");
        for (i, share) in want["human_pmf"].as_array().expect("shares").iter().enumerate() {
            close(&q["human_pmf"][i], share, 1e-12, &format!("{id}: the people's weighted share of option {}", i + 1));
            close(&model["pmf"][i], &want["model_pmf"][i], 1e-12, &format!("{id}: the model's weighted share"));
        }
        close(&model["exact_match"]["value"], &want["exact_match"], 1e-9, &format!("{id}: exact match"));
        close(&marginal["log_loss"]["value"], &want["marginal_log_loss"], 1e-9, &format!("{id}: marginal log-loss"));
        close(&marginal["brier"]["value"], &want["marginal_brier"], 1e-9, &format!("{id}: marginal Brier"));
        close(&marginal["own_probability"]["value"], &want["marginal_own_probability"], 1e-9, id);
        if q["kind"] == "ordinal" {
            for f in ["ks_similarity", "wasserstein", "within_one"] {
                close(&model[f]["value"], &want[f], 1e-9, &format!("{id}: {f}"));
            }
            close(&q["human_mean_sd"][0], &want["human_mean_sd"][0], 1e-9, &format!("{id}: mean"));
            close(&q["human_mean_sd"][1], &want["human_mean_sd"][1], 1e-9, &format!("{id}: sd"));
        } else {
            close(&model["total_variation"]["value"], &want["total_variation"], 1e-9, &format!("{id}: TV"));
        }
    }

    let unweighted = figures(&dir, &weighted(&dir, "u", None), false);
    let ones = figures(&dir, &weighted(&dir, "ones", Some(&|_, _| "1".into())), true);
    let doubled = figures(
        &dir,
        &weighted(&dir, "doubled", Some(&|_, w| format!("{}", 2.0 * w.parse::<f64>().expect("a weight")))),
        true,
    );
    assert_eq!(ones["questions"], unweighted["questions"], "all-ones weights are exactly the unweighted figures");
    assert_eq!(ones["imputer"], unweighted["imputer"]);
    assert_eq!(doubled["questions"], summary["questions"], "doubling every weight changes nothing");
    assert_ne!(summary["questions"], unweighted["questions"], "unequal weights move the figures");
    let shares = |s: &Value| s["questions"][0]["human_pmf"].clone();
    assert_ne!(shares(&summary), shares(&unweighted));

    for (name, cell, cause) in [
        ("missing", "", "the weight is missing"),
        ("negative", "-1", "the weight -1 is negative"),
        ("infinite", "inf", "the weight \"inf\" is not finite"),
        ("text", "heavy", "the weight \"heavy\" is not a number"),
    ] {
        let bad = move |i: usize, w: &str| if i == 3 { cell.to_string() } else { w.to_string() };
        let args = weighted(&dir, name, Some(&bad));
        let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
        args.extend(["--weights", "weight"]);
        let o = sim(&dir, &args);
        let want = format!("{name}.csv: row r3, column weight: {cause}");
        assert!(!o.status.success() && stderr(&o).contains(&want), "{want}: {}", stderr(&o));
    }
    let zeros = weighted(&dir, "zeros", Some(&|_, _| "0".into()));
    let mut args: Vec<&str> = zeros.iter().map(String::as_str).collect();
    args.extend(["--weights", "weight"]);
    let o = sim(&dir, &args);
    assert!(stderr(&o).contains("--weights weight: every weight of the respondents asked is 0"), "{}", stderr(&o));
    let mut args: Vec<&str> = zeros.iter().map(String::as_str).collect();
    args.extend(["--weights", "age"]);
    let o = sim(&dir, &args);
    assert!(stderr(&o).contains("--weights age: the panel map makes it a trait"), "{}", stderr(&o));
    let mut args: Vec<&str> = zeros.iter().map(String::as_str).collect();
    args.extend(["--weights", "weight", "--rectify"]);
    let o = sim(&dir, &args);
    assert!(stderr(&o).contains("--weights with --rectify"), "{}", stderr(&o));
}
