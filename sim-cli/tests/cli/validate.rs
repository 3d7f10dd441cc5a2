//! `sim-cli validate`: the built-in ANES suite on the scripted model
//! (digest, figures recomputed from answers.csv, the page in Chromium),
//! a survey of one's own with SSR and subgroups, and bad input.

use crate::support::{chromium, scratch, sim, stderr};
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_slice(&o.stdout).expect("--json prints one JSON object")
}

/// `answers.csv` of a validation: (respondent, half, question, human, model).
fn rows(dir: &Path) -> Vec<[String; 5]> {
    let mut reader = csv::Reader::from_path(dir.join(runs::dir::ANSWERS)).expect("answers.csv");
    reader
        .records()
        .map(|r| {
            let r = r.expect("a row");
            [0, 1, 2, 3, 4].map(|i| r[i].to_string())
        })
        .collect()
}

#[test]
fn a_scripted_validation_reproduces_its_digest_and_its_figures() {
    let dir = scratch("validate");
    let args = |out: &'static str, seed: &'static str, threads: &'static str| {
        [
            "validate",
            "--sample",
            "120",
            "--resamples",
            "200",
            "--json",
            "--seed",
            seed,
            "--threads",
            threads,
            "--out",
            out,
        ]
    };
    let a = json(&sim(&dir, &args("a", "7", "1")));
    let b = json(&sim(&dir, &args("b", "7", "2")));
    let c = json(&sim(&dir, &args("c", "8", "2")));
    assert_eq!(a["digest"], b["digest"], "same seed, same digest at any thread count");
    assert_ne!(a["digest"], c["digest"], "another seed, another digest");
    assert_eq!(a["digest"].as_str().map(str::len), Some(64));
    assert_eq!((a["respondents"].as_u64(), a["panel"].as_u64()), (Some(120), Some(944)));
    assert_eq!(a["calls"]["asked"], 120 * 3 * 2);
    assert_eq!(a["calls"]["estimated"], true, "the scripted model's tokens are estimated");
    assert_eq!(
        std::fs::read(dir.join("a/summary.json")).ok(),
        std::fs::read(dir.join("b/summary.json")).ok().map(|mut s| {
            // The two differ only in their own directory's name.
            let text =
                String::from_utf8(std::mem::take(&mut s)).expect("utf-8").replace("\"out\": \"b\"", "\"out\": \"a\"");
            text.into_bytes()
        })
    );

    // The figures again, from answers.csv, by a plain computation.
    let rows = rows(&dir.join("a"));
    assert_eq!(rows.len(), 120 * 3);
    for q in a["questions"].as_array().expect("questions") {
        let id = q["id"].as_str().expect("id");
        let held: Vec<(u8, u8)> = rows
            .iter()
            .filter(|r| r[2] == id && r[1] == "held_out" && !r[3].is_empty())
            .map(|r| (r[3].parse().expect("human"), r[4].parse().expect("model")))
            .collect();
        assert_eq!(q["held_out"].as_u64(), Some(held.len() as u64));
        let model = &q["sources"][0];
        assert_eq!(model["name"], "model (direct)");
        let exact = held.iter().filter(|(h, m)| h == m).count() as f64 / held.len() as f64;
        assert!((model["exact_match"]["value"].as_f64().expect("exact") - exact).abs() < 1e-12, "{id}");
        let k = q["options"].as_array().expect("options").len() as u8;
        let cdf =
            |pick: fn(&(u8, u8)) -> u8, x: u8| held.iter().filter(|p| pick(p) <= x).count() as f64 / held.len() as f64;
        let gaps: Vec<f64> = (1..=k).map(|x| (cdf(|p| p.0, x) - cdf(|p| p.1, x)).abs()).collect();
        if q["kind"] == "ordinal" {
            let ks = 1.0 - gaps.iter().fold(0.0f64, |m, g| m.max(*g));
            assert!((model["ks_similarity"]["value"].as_f64().expect("ks") - ks).abs() < 1e-12, "{id}");
            let w: f64 = gaps[..gaps.len() - 1].iter().sum();
            assert!((model["wasserstein"]["value"].as_f64().expect("w") - w).abs() < 1e-12, "{id}");
        }
        for source in q["sources"].as_array().expect("sources") {
            let f = &source["exact_match"];
            let (v, [lo, hi]) =
                (f["value"].as_f64().expect("value"), [0, 1].map(|i| f["interval"][i].as_f64().expect("interval")));
            assert!(lo <= v && v <= hi && lo < hi, "{id} {}: {v} in [{lo}, {hi}]", source["name"]);
        }
        let names: Vec<&str> =
            q["sources"].as_array().expect("sources").iter().filter_map(|s| s["name"].as_str()).collect();
        assert_eq!(names, ["model (direct)", "uniform", "marginal", "demographic", "imputer"]);
        assert!(q["reliability"]["exact_match"]["value"].is_f64());
        assert_eq!(q["bands"].as_array().map(Vec::len), Some(11), "age 4, education 3, income 4");
    }

    let readable = sim(&dir, &["validate", "--sample", "30", "--resamples", "100", "--out", "d"]);
    assert!(readable.status.success(), "{}", stderr(&readable));
    let text = String::from_utf8_lossy(&readable.stdout);
    for needle in [
        "validate anes96: 30 respondents (15 fitted, 15 held out) of 944",
        "selfLR: ordinal, 7 options",
        "reliability",
        "by subgroup",
    ] {
        assert!(text.contains(needle), "{needle:?} in:\n{text}");
    }
    assert!(
        stderr(&readable).contains("30 of 944 respondents x 3 questions x 2 runs = 180 chat calls"),
        "{}",
        stderr(&readable)
    );

    let url = format!("file://{}", dir.join("a/report.html").display());
    let dom = chromium(&dir, &["--dump-dom", &url]);
    let dom = String::from_utf8_lossy(&dom.stdout);
    for id in ["selfLR", "PID", "vote"] {
        assert!(dom.contains(&format!("<section id=\"q-{id}\">")), "section {id} rendered");
    }
    assert_eq!(dom.matches("<svg").count(), 3, "one chart per question");
    assert!(dom.contains("aria-label=\"vote distributions\""));
}

const PANEL: &str = "id,age,region,note\n";
const MAP: &str = r#"
[panel.columns]
id = "id"
age = { trait = "age" }
region = { trait = "region", labels = { "1" = "the North", "2" = "the South" } }
note = { ignore = true }
"#;
const QUESTIONS: &str = r#"
[[question]]
id = "coffee"
text = "How much do you like coffee?"
kind = "ordinal"
options = ["Not at all", "A little", "Somewhat", "A lot", "More than anything"]

[[question]]
id = "pet"
text = "Which pet would you choose?"
kind = "nominal"
options = ["A dog", "A cat", "A fish"]
anchors = ["I would choose a dog.", "I would choose a cat.", "I would choose a fish."]
"#;
const SUBGROUPS: &str = r#"
[[subgroup]]
name = "age"
column = "age"
bands = [{ label = "under 40", min = 0, max = 39 }, { label = "40 and over", min = 40, max = 120 }]

[[subgroup]]
name = "region"
column = "region"
bands = [{ label = "North", min = 1, max = 1 }, { label = "South", min = 2, max = 2 }]
"#;

/// `--calibrate --rectify`: the calibrated models are sources of their own
/// with their weights, every source forecasts or says why not, uniform's
/// log-loss is ln k, the marginal's is the fitted half's smoothed
/// distribution scored on the held-out half (recomputed here from
/// answers.csv), and calibration.json is written.
#[test]
fn calibration_and_rectified_shares_are_scored_on_held_out_people() {
    let dir = scratch("validate-calibrate");
    let args = ["validate", "--sample", "200", "--seed", "11", "--resamples", "100", "--calibrate", "--rectify"];
    let v = json(&sim(&dir, &[&args[..], &["--json", "--out", "v"]].concat()));
    let rows = rows(&dir.join("v"));
    let file: Value =
        serde_json::from_slice(&std::fs::read(dir.join("v").join(runs::dir::CALIBRATION)).expect("calibration.json"))
            .expect("JSON");
    assert_eq!((file["answer_mode"].as_str(), file["source"].as_str()), (Some("sample"), Some("model (direct)")));
    for (q, c) in v["questions"].as_array().expect("questions").iter().zip(file["questions"].as_array().expect("qs")) {
        let id = q["id"].as_str().expect("id");
        assert_eq!((c["question"].as_str(), c["digest"].as_str().map(str::len)), (Some(id), Some(64)));
        assert!(c["temperature"].is_null(), "{id}: sampled answers have no temperature");
        let sources = q["sources"].as_array().expect("sources");
        let by = |name: &str| sources.iter().find(|s| s["name"] == name).unwrap_or_else(|| panic!("{id}: {name}"));
        let value = |s: &Value, f: &str| s[f]["value"].as_f64();
        let k = q["options"].as_array().expect("options").len();
        assert!((value(by("uniform"), "log_loss").expect("uniform") - (k as f64).ln()).abs() < 1e-12, "{id}");
        assert!(value(by("model (direct)"), "log_loss").is_none() && by("model (direct)")["forecast_note"].is_string());
        // The marginal's log-loss, recomputed from answers.csv.
        let answers = |half: &str| -> Vec<usize> {
            rows.iter()
                .filter(|r| r[2] == id && r[1] == half && !r[3].is_empty())
                .map(|r| r[3].parse().expect("h"))
                .collect()
        };
        let (fitted, held) = (answers("fitted"), answers("held_out"));
        let share = |h: usize| {
            (fitted.iter().filter(|&&x| x == h).count() as f64 + 0.5) / (fitted.len() as f64 + 0.5 * k as f64)
        };
        let want = held.iter().map(|&h| -share(h).ln()).sum::<f64>() / held.len() as f64;
        assert!((value(by("marginal"), "log_loss").expect("marginal") - want).abs() < 1e-12, "{id}");
        for name in ["blend with marginal", "blend with demographic", "blend with imputer"] {
            let blend = by(&format!("model (direct) calibrated: {name}"));
            let w = blend["model_weight"].as_f64().expect("a weight");
            assert!((0.0..=1.0).contains(&w), "{id}: {w}");
            let (ll, base) = (value(blend, "log_loss").expect("a blend forecasts"), want);
            assert!(ll <= base + 0.02 || !name.ends_with("marginal"), "{id}: {ll} against the marginal's {base}");
            assert!(blend["brier"]["interval"].is_array() && blend["log_loss"]["interval"].is_array());
            if q["kind"] == "ordinal" && !name.ends_with("imputer") {
                let spread = value(blend, "spread_ratio").expect("ordinal");
                assert!((0.8..=1.25).contains(&spread), "{id} {name}: spread ratio {spread}");
            }
        }
        let r = v["rectified"].as_array().expect("rectified").iter().find(|r| r["question"] == id).expect("each");
        let options = r["options"].as_array().expect("options");
        assert_eq!(options.len(), k);
        let total: f64 = options.iter().map(|o| o["people_only"]["value"].as_f64().expect("v")).sum();
        assert!((total - 1.0).abs() < 1e-9, "the people-only shares add up");
        for o in options {
            let e = &o["rectified"];
            let (v, [lo, hi]) =
                (e["value"].as_f64().expect("v"), [0, 1].map(|i| e["interval"][i].as_f64().expect("i")));
            assert!(lo <= v && v <= hi && (0.0..=1.0).contains(&e["lambda"].as_f64().expect("lambda")), "{id}");
        }
    }
    let text = String::from_utf8_lossy(&sim(&dir, &[&args[..], &["--out", "t"]].concat()).stdout).into_owned();
    assert!(text.contains("the model carries") && text.contains("rectified (PPI++, 100 labelled, 100 unlabelled)"));
}

/// `--answer-mode probabilities` on the scripted model: its probabilities
/// are the uniform distribution it samples from, asked once, the same at
/// any thread count, written to answers.csv and scored as forecasts; a
/// provider that cannot give them is refused by name before any call.
#[test]
fn probabilities_mode_scores_each_personas_distribution() {
    let dir = scratch("validate-probabilities");
    let args = |out: &'static str, threads: &'static str| {
        ["validate", "--sample", "20", "--resamples", "100", "--answer-mode", "probabilities", "--calibrate"]
            .into_iter()
            .chain(["--json", "--threads", threads, "--out", out])
            .collect::<Vec<_>>()
    };
    let a = json(&sim(&dir, &args("a", "1")));
    let b = json(&sim(&dir, &args("b", "2")));
    assert_eq!(a["digest"], b["digest"], "the same digest at 1 and 2 threads");
    assert_eq!((a["answer_mode"].as_str(), a["method"].as_str()), (Some("probabilities"), Some("probabilities")));
    assert_eq!(a["calls"]["asked"], 20 * 3, "asked once");
    let masses = a["option_mass"].as_array().expect("option_mass");
    assert_eq!(masses.len(), 3);
    assert!(
        masses.iter().all(|m| m["mean"].as_f64() == Some(1.0)),
        "the scripted model answers nothing else: {masses:?}"
    );
    assert!(a["notes"].as_array().is_some_and(|n| n.iter().any(|n| n.as_str().is_some_and(|n| n.contains("once")))));
    for q in a["questions"].as_array().expect("questions") {
        let k = q["options"].as_array().expect("options").len() as f64;
        let model = &q["sources"][0];
        assert_eq!(model["name"], "model (probabilities)");
        let ll = model["log_loss"]["value"].as_f64().expect("a forecast");
        assert!((ll - k.ln()).abs() < 1e-12, "uniform probabilities score ln k: {ll}");
        assert!(q.get("reliability").is_none(), "no second run");
    }
    let temperatures: Vec<&Value> =
        a["calibration"]["questions"].as_array().expect("q").iter().map(|c| &c["temperature"]).collect();
    assert!(temperatures.iter().all(|t| t.as_f64() == Some(1.0)), "no temperature changes uniform: {temperatures:?}");
    let mut reader = csv::Reader::from_path(dir.join("a").join(runs::dir::ANSWERS)).expect("answers.csv");
    let at = reader.headers().expect("header").iter().position(|h| h == "model_probabilities").expect("the column");
    for row in reader.records() {
        let row = row.expect("a row");
        let shares: Vec<f64> = row[at].split(';').map(|p| p.parse().expect("a share")).collect();
        assert!(shares.len() >= 2 && (shares.iter().sum::<f64>() - 1.0).abs() < 1e-5, "{shares:?}");
    }
    // Permuted options: asked twice, each run in its own orders, so the
    // second run is the order sensitivity.
    let p = json(&sim(&dir, &[&args("p", "2")[..], &["--option-order", "permuted"]].concat()));
    assert_eq!(p["calls"]["asked"], 20 * 3 * 2);
    assert!(p["questions"][0]["reliability"]["exact_match"]["value"].is_f64());
    assert_ne!(p["digest"], a["digest"], "other prompts, another digest");
    // A server speaking the real protocol on loopback whose replies carry
    // no logprobs: a named setting error, before the panel is asked.
    let stop = Arc::new(AtomicBool::new(false));
    let (url, _, server) = crate::trace::openai_server(stop.clone(), 0);
    std::fs::write(
        dir.join("live.toml"),
        format!(
            "[chat]\nprovider = \"openai\"\nmodel = \"m\"\n[chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n"
        ),
    )
    .expect("config");
    let o = sim(
        &dir,
        &[
            "validate",
            "--config",
            "live.toml",
            "--sample",
            "10",
            "--answer-mode",
            "probabilities",
            "--yes",
            "--out",
            "l",
        ],
    );
    stop.store(true, Ordering::Relaxed);
    server.join().expect("server");
    let err = stderr(&o);
    assert!(o.status.code() == Some(1) && err.contains("no logprobs") && err.contains("\"sample\""), "{err}");
    assert!(!dir.join("l").exists(), "nothing kept: nothing was asked");
}

/// A server speaking the real protocol on loopback whose 20 top
/// alternatives leave the options out: each weighing is asked again with
/// the options' tokens (from its `/tokenize`) raised by `logit_bias`, and
/// the model's own distribution over them is recovered; the summary gives
/// their mass before and after. A server that refuses `logit_bias` is a
/// named error pointing to `verbalized`, and nothing is kept.
#[test]
fn options_left_out_of_the_top_alternatives_are_weighed_again_raised() {
    use crate::trace::{hidden_logit, openai_logprobs_server, Logprobs};
    let dir = scratch("validate-raised");
    let stop = Arc::new(AtomicBool::new(false));
    let (url, seen, server) = openai_logprobs_server(stop.clone(), Logprobs::Hidden { honours_bias: true });
    let (refusing, _, refuser) = openai_logprobs_server(stop.clone(), Logprobs::Hidden { honours_bias: false });
    for (file, url) in [("live.toml", &url), ("refuses.toml", &refusing)] {
        let toml = format!(
            "[chat]\nprovider = \"openai\"\nmodel = \"m\"\n[chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n"
        );
        std::fs::write(dir.join(file), toml).expect("config");
    }
    let args = |config: &'static str, out: &'static str| {
        ["validate", "--config", config, "--sample", "10", "--answer-mode", "probabilities", "--yes", "--json"]
            .into_iter()
            .chain(["--out", out])
            .collect::<Vec<_>>()
    };
    let a = json(&sim(&dir, &args("live.toml", "a")));
    let refused = sim(&dir, &args("refuses.toml", "r"));
    stop.store(true, Ordering::Relaxed);
    server.join().expect("server");
    refuser.join().expect("server");
    let masses = a["option_mass"].as_array().expect("option_mass");
    assert_eq!(masses.len(), 3, "{masses:?}");
    for m in masses {
        let raised = &m["raised"];
        assert_eq!((m["mean"].as_f64(), raised["respondents"].as_u64()), (Some(0.0), Some(10)), "{m}");
        assert_eq!(raised["mean_before"].as_f64(), Some(0.0), "{m}");
        assert!(raised["min_after"].as_f64().is_some_and(|x| x > 1.0 - 1e-12), "{m}");
    }
    let page = std::fs::read_to_string(dir.join("a").join(runs::dir::REPORT)).expect("the page");
    assert!(
        page.contains("were weighed again with their tokens raised by logit_bias: their mass went from 0.000 to 1.000")
    );
    let mut reader = csv::Reader::from_path(dir.join("a").join(runs::dir::ANSWERS)).expect("answers.csv");
    let at = reader.headers().expect("header").iter().position(|h| h == "model_probabilities").expect("the column");
    for row in reader.records() {
        let row = row.expect("a row");
        let shares: Vec<f64> = row[at].split(';').map(|p| p.parse().expect("a share")).collect();
        let own: Vec<f64> = (1..=shares.len()).map(|o| hidden_logit(o).exp()).collect();
        let total: f64 = own.iter().sum();
        for (got, want) in shares.iter().zip(&own) {
            assert!((got - want / total).abs() < 1e-6, "the model's own distribution: {shares:?}");
        }
    }
    let seen = seen.lock();
    let tokenized = seen.iter().filter(|l| l.starts_with("TOKENIZE")).count();
    // Each label ("1" to "7", " 1" to " 7") once: the first weighing, the
    // pilot and the panel share one chat client.
    assert_eq!(tokenized, 2 * 7, "{seen:#?}");
    let err = stderr(&refused);
    assert!(
        refused.status.code() == Some(1) && err.contains("refuses logit_bias") && err.contains("\"verbalized\""),
        "{err}"
    );
    assert!(!dir.join("r").exists(), "nothing kept: nothing was asked");
}

/// The response cache across runs: a validation and a run asked again
/// into new directories are served from it, with no call to the server
/// and the same digests, their summaries giving the bill against the
/// ledger; `--no-cache` asks the server again.
#[test]
fn a_second_command_is_served_from_the_response_cache() {
    use crate::trace::{openai_logprobs_server, Logprobs};
    let dir = scratch("response-cache");
    let stop = Arc::new(AtomicBool::new(false));
    let (url, seen, server) = openai_logprobs_server(stop.clone(), Logprobs::Hidden { honours_bias: true });
    let toml = format!(
        "[chat]\nprovider = \"openai\"\nmodel = \"m\"\n[chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n\
         [cache]\ndir = \"kept\"\n"
    );
    std::fs::write(dir.join("live.toml"), toml).expect("config");
    let bodies = || seen.lock().iter().filter(|l| l.starts_with("BODY ")).count();
    let ask = |out: &str, extra: &[&str]| {
        let args = ["validate", "--config", "live.toml", "--sample", "10", "--answer-mode", "probabilities"];
        sim(&dir, &[&args[..], &["--yes", "--json", "--out", out], extra].concat())
    };
    let validate = |out: &str, extra: &[&str]| json(&ask(out, extra));
    let a = validate("a", &[]);
    let asked = bodies();
    let b = validate("b", &[]);
    let served = bodies();
    let c = validate("c", &["--no-cache"]);
    let again = bodies();
    // One entry altered: ignored with a warning, and asked again.
    let entry = std::fs::read_dir(dir.join("kept"))
        .expect("the cache")
        .flat_map(|d| std::fs::read_dir(d.expect("a directory").path()).expect("entries"))
        .map(|e| e.expect("an entry").path())
        .next()
        .expect("an entry");
    let mut bytes = std::fs::read(&entry).expect("read");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x20;
    std::fs::write(&entry, bytes).expect("alter");
    let o = ask("d", &[]);
    let (d, warned) = (json(&o), stderr(&o));
    let name = entry.file_name().expect("a name").to_string_lossy().into_owned();
    assert!(warned.contains("response cache: ignoring") && warned.contains(&name), "{warned}");
    let cd = &d["calls"]["response_cache"];
    assert_eq!(
        (cd["ignored"].as_u64(), cd["provider_calls"].as_u64(), &d["digest"]),
        (Some(1), Some(1), &a["digest"]),
        "{cd}"
    );
    let run = |out: &str| {
        let o = sim(
            &dir,
            &["run", "--config", "live.toml", "--personas", "3", "--ticks", "1", "--yes", "--json", "--out", out],
        );
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_slice::<Value>(&o.stdout).expect("json")
    };
    let (r1, r2) = (run("r1"), run("r2"));
    let ran = bodies();
    stop.store(true, Ordering::Relaxed);
    server.join().expect("server");
    let (ca, cb) = (&a["calls"]["response_cache"], &b["calls"]["response_cache"]);
    // 30 weighings (10 respondents, 3 questions), each asked again raised,
    // and the connection check each command makes live, outside the cache.
    assert!(asked == 2 * 30 + 1 && ca["cache_hits"] == 0 && ca["provider_calls"].as_u64() == Some(30), "{ca}");
    assert_eq!(served, asked + 1, "the second validation made no call but its connection check");
    assert_eq!((cb["cache_hits"].as_u64(), cb["provider_calls"].as_u64()), (Some(30), Some(0)), "{cb}");
    assert_eq!(b["digest"], a["digest"], "the same digest");
    assert_eq!(b["questions"], a["questions"], "the same figures");
    assert_eq!((cb["billed_usd"].as_f64(), &cb["would_have_billed_usd"]), (Some(0.0), &a["calls"]["cost_usd"]), "{cb}");
    assert!(c["calls"].get("response_cache").is_none() && again > served, "--no-cache asks the server");
    assert_eq!(c["digest"], a["digest"]);
    let (k1, k2) = (&r1["chat"]["response_cache"], &r2["chat"]["response_cache"]);
    assert!(k1["provider_calls"].as_u64().is_some_and(|n| n > 0) && k1["cache_hits"] == 0, "{k1}");
    assert_eq!((k2["provider_calls"].as_u64(), &k2["cache_hits"]), (Some(0), &k1["provider_calls"]), "{k2}");
    assert!(ran > again, "the first run asked the server");
    assert_eq!((&r2["digest"], &r2["full_digest"]), (&r1["digest"], &r1["full_digest"]));
    assert_eq!(r2["cost"]["provider_total_nano_usd"], r1["cost"]["provider_total_nano_usd"], "the ledger as bought");
}

/// Several models in one job: each answers the same respondents in its own
/// directory, with the digest it has alone; the comparison pairs them
/// (log-loss differences equal to the gap of their own figures, as every
/// respondent was answered by both) and ranks them; a model whose server
/// is down is reported as failed, and the others go on.
#[test]
fn several_models_are_compared_on_the_same_respondents() {
    use crate::trace::{openai_logprobs_server, Logprobs};
    let dir = scratch("compare-models");
    let stop = Arc::new(AtomicBool::new(false));
    let (url, _, server) = openai_logprobs_server(stop.clone(), Logprobs::Hidden { honours_bias: true });
    let live = |url: &str| {
        format!("[chat]\nprovider = \"openai\"\nmodel = \"m\"\n[chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n")
    };
    std::fs::write(dir.join("scripted.toml"), "").expect("config");
    std::fs::write(dir.join("live.toml"), live(&url)).expect("config");
    std::fs::write(dir.join("down.toml"), live("http://127.0.0.1:9/v1")).expect("config");
    let common = ["validate", "--sample", "20", "--answer-mode", "probabilities", "--resamples", "200", "--yes"];
    let configs = ["--config", "scripted.toml", "--config", "live.toml", "--config", "down.toml"];
    let both = json(&sim(&dir, &[&common[..], &configs, &["--json", "--out", "c"]].concat()));
    let alone = json(&sim(&dir, &[&common[..], &["--config", "scripted.toml", "--json", "--out", "a"]].concat()));
    let text =
        String::from_utf8_lossy(&sim(&dir, &[&common[..], &configs, &["--out", "t"]].concat()).stdout).into_owned();
    stop.store(true, Ordering::Relaxed);
    server.join().expect("server");
    let models = both["models"].as_array().expect("models");
    let labels: Vec<&str> = models.iter().map(|m| m["label"].as_str().expect("a label")).collect();
    assert_eq!(labels, ["1-scripted-persona-v1", "2-m", "3-m"]);
    assert_eq!(models[0]["summary"]["digest"], alone["digest"], "a model's digest whatever else is in the job");
    assert!(models[2]["error"].as_str().is_some_and(|e| e.contains("127.0.0.1:9")), "{}", models[2]);
    assert!(models[2].get("summary").is_none());
    assert!(dir.join("c/1-scripted-persona-v1/answers.csv").exists() && dir.join("c/comparison.json").exists());
    let c = &both["comparison"];
    for (q, question) in c["questions"].as_array().expect("questions").iter().enumerate() {
        let own = |m: usize| {
            models[m]["summary"]["questions"][q]["sources"][0]["log_loss"]["value"].as_f64().expect("a figure")
        };
        let pair = &question["pairs"][0];
        assert_eq!(
            (pair["a"].as_str(), pair["b"].as_str(), pair["figure"].as_str()),
            (Some("1-scripted-persona-v1"), Some("2-m"), Some("log_loss"))
        );
        let gap = pair["difference"]["value"].as_f64().expect("a difference");
        assert!((gap - (own(0) - own(1))).abs() < 1e-12, "{gap} against {} - {}", own(0), own(1));
        let interval = pair["difference"]["interval"].as_array().expect("an interval");
        assert!(interval[0].as_f64() <= Some(gap) && Some(gap) <= interval[1].as_f64(), "{pair}");
        let baselines: Vec<&str> =
            question["pairs"].as_array().expect("pairs").iter().skip(1).map(|p| p["b"].as_str().expect("b")).collect();
        assert!(
            ["uniform", "marginal", "demographic", "imputer"].iter().all(|b| baselines.contains(b)),
            "{baselines:?}"
        );
        assert_eq!(question["ranking"].as_array().map(Vec::len), Some(2), "the finished models");
    }
    assert_eq!(c["ranking"].as_array().map(Vec::len), Some(2));
    assert!(
        text.contains("3 models compared, 2 finished")
            && text.contains("3-m (down.toml, m): FAILED")
            && text.contains("Overall"),
        "{text}"
    );
}

/// `verbalized` mode against a server speaking the real protocol on
/// loopback: each persona is asked, under a schema of exactly k shares,
/// for the shares of people like it; broken JSON and a list of the wrong
/// length are retried by the guardrails, and the forecasts are the shares
/// normalised. The scripted model gives its own distribution (uniform
/// here), so its log-loss is ln k.
#[test]
fn verbalized_shares_are_asked_under_a_schema_and_malformed_replies_retried() {
    let dir = scratch("validate-verbalized");
    let stop = Arc::new(AtomicBool::new(false));
    let (url, seen, server) = crate::trace::openai_server(stop.clone(), 0);
    std::fs::write(
        dir.join("live.toml"),
        format!(
            "[chat]\nprovider = \"openai\"\nmodel = \"m\"\nmax_guardrail_retries = 3\n[chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n\
             [answers]\nmode = \"verbalized\"\n"
        ),
    )
    .expect("config");
    let v = json(&sim(&dir, &["validate", "--config", "live.toml", "--sample", "10", "--yes", "--json", "--out", "l"]));
    stop.store(true, Ordering::Relaxed);
    server.join().expect("server");
    assert_eq!((v["answer_mode"].as_str(), v["method"].as_str()), (Some("verbalized"), Some("verbalized")));
    let bodies: Vec<String> = seen.lock().iter().filter_map(|l| l.strip_prefix("BODY ").map(String::from)).collect();
    let shares: Vec<Value> = bodies
        .iter()
        .map(|b| serde_json::from_str::<Value>(b).expect("a body"))
        .filter(|b| b["response_format"]["json_schema"]["name"] == "option_shares")
        .collect();
    let calls = |k: &str| v["calls"][k].as_u64().unwrap_or_else(|| panic!("calls.{k}: {v}"));
    assert_eq!(shares.len() as u64, calls("calls"), "every attempt asked for shares");
    assert!(calls("calls") > calls("asked"), "malformed replies were retried: {v}");
    assert_eq!(calls("failed"), 0, "every retry ended in a valid reply");
    for b in &shares {
        let schema = &b["response_format"]["json_schema"]["schema"]["properties"]["shares"];
        assert_eq!(schema["minItems"], schema["maxItems"], "exactly one share per option");
        assert!(b["messages"][0]["content"].as_str().is_some_and(|p| p.contains("SHARES: <")), "{b}");
    }
    for q in v["questions"].as_array().expect("questions") {
        let model = &q["sources"][0];
        assert_eq!(model["name"], "model (verbalized)");
        assert!(model["log_loss"]["value"].is_f64(), "a forecast: {model}");
    }
    let mut reader = csv::Reader::from_path(dir.join("l").join(runs::dir::ANSWERS)).expect("answers.csv");
    let at = reader.headers().expect("header").iter().position(|h| h == "model_probabilities").expect("the column");
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("a row")).collect();
    assert!(!rows.is_empty());
    for row in &rows {
        let p: Vec<f64> = row[at].split(';').map(|p| p.parse().expect("a share")).collect();
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-5, "normalised: {p:?}");
    }
    // The scripted model's shares are the distribution it draws from.
    let s = json(&sim(&dir, &["validate", "--sample", "10", "--answer-mode", "verbalized", "--json", "--out", "s"]));
    for q in s["questions"].as_array().expect("questions") {
        let k = q["options"].as_array().expect("options").len() as f64;
        let ll = q["sources"][0]["log_loss"]["value"].as_f64().expect("a forecast");
        assert!((ll - k.ln()).abs() < 1e-6, "uniform shares score ln k: {ll}");
    }
}

fn own_survey(dir: &Path) {
    let mut panel = String::from(PANEL);
    let mut answers = String::from("id,coffee,pet\n");
    for i in 0..40u32 {
        panel.push_str(&format!("p{i},{},{},x\n", 20 + (i * 7) % 60, 1 + i % 2));
        let pet = if i % 5 == 0 { String::new() } else { (1 + i % 3).to_string() };
        answers.push_str(&format!("p{i},{},{pet}\n", 1 + (i * 3) % 5));
    }
    for (name, text) in [
        ("people.csv", panel.as_str()),
        ("map.toml", MAP),
        ("answers.csv", &answers),
        ("survey.toml", QUESTIONS),
        ("groups.toml", SUBGROUPS),
    ] {
        std::fs::write(dir.join(name), text).expect("write");
    }
    std::fs::write(dir.join("ssr.toml"), "[intent]\nmethod = \"ssr\"\n").expect("write");
}

#[test]
fn a_survey_of_ones_own_with_ssr_and_subgroups() {
    let dir = scratch("validate-own");
    own_survey(&dir);
    let own = [
        "validate",
        "--panel",
        "people.csv",
        "--panel-map",
        "map.toml",
        "--answers",
        "answers.csv",
        "--questions",
        "survey.toml",
    ];
    let mut args = own.to_vec();
    args.extend(["--subgroups", "groups.toml", "--config", "ssr.toml", "--resamples", "100", "--json", "--out", "own"]);
    let s = json(&sim(&dir, &args));
    assert_eq!(
        (s["suite"].as_str(), s["method"].as_str(), s["respondents"].as_u64()),
        (Some("survey"), Some("direct+ssr"), Some(40))
    );
    let pet = &s["questions"][1];
    assert!(pet["held_out"].as_u64().expect("n") < 20, "a respondent without an answer is left out");
    let names: Vec<&str> =
        pet["sources"].as_array().expect("sources").iter().filter_map(|x| x["name"].as_str()).collect();
    assert_eq!(names, ["model (direct)", "model (SSR)", "uniform", "marginal", "demographic", "imputer"]);
    assert!(pet["sources"][0]["total_variation"]["value"].is_f64() && pet["sources"][0].get("ks_similarity").is_none());
    let bands: Vec<&str> = pet["bands"].as_array().expect("bands").iter().filter_map(|b| b["band"].as_str()).collect();
    assert_eq!(bands, ["under 40", "40 and over", "North", "South"], "--subgroups replaced the survey's own");
    let header = std::fs::read_to_string(dir.join("own").join(runs::dir::ANSWERS)).expect("answers.csv");
    assert!(header.starts_with("respondent,half,question,human,model,model_rerun,model_ssr,model_ssr_expected,"));
    // The scripted model names its option in its reason; SSR over the
    // labels reads it back far more often than chance (one in five).
    let mut reader = csv::Reader::from_path(dir.join("own").join(runs::dir::ANSWERS)).expect("answers.csv");
    let coffee: Vec<(String, String)> = reader
        .records()
        .map(|r| r.expect("row"))
        .filter(|r| &r[2] == "coffee")
        .map(|r| (r[4].to_string(), r[6].to_string()))
        .collect();
    let same = coffee.iter().filter(|(direct, ssr)| direct == ssr).count();
    assert!(same * 2 > coffee.len(), "SSR agrees with the direct answer for {same} of {}", coffee.len());
}

#[test]
fn bad_panels_and_arguments_are_named() {
    let dir = scratch("validate-bad");
    own_survey(&dir);
    let own = |panel: &str| {
        sim(
            &dir,
            &[
                "validate",
                "--panel",
                panel,
                "--panel-map",
                "map.toml",
                "--answers",
                "answers.csv",
                "--questions",
                "survey.toml",
            ],
        )
    };
    std::fs::write(dir.join("bad.csv"), "id,age,region,note\np0,30,1,x\np1,abc,2,x\n").expect("write");
    let o = own("bad.csv");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("bad.csv: row p1, column age: \"abc\" is not a whole number from 0 to 120"),
        "{}",
        stderr(&o)
    );
    std::fs::write(dir.join("extra.csv"), "id,age,region,note,income\np0,30,1,x,5\n").expect("write");
    assert!(stderr(&own("extra.csv")).contains("extra.csv: income: column not in the panel map"));
    let o = sim(&dir, &["validate", "--panel", "people.csv"]);
    assert_eq!(o.status.code(), Some(2), "the other three files are required: {}", stderr(&o));
    let o = sim(&dir, &["validate", "--suite", "gss"]);
    assert!(o.status.code() == Some(1) && stderr(&o).contains("--suite gss: no such suite (built in: anes96)"));
    let o = sim(&dir, &["validate", "--sample", "2000"]);
    assert!(o.status.code() == Some(1) && stderr(&o).contains("--sample 2000: the panel has only 944 respondents"));
    std::fs::write(dir.join("answers-bad.csv"), "id,coffee,pet\np0,6,1\n").expect("write");
    let o = sim(
        &dir,
        &[
            "validate",
            "--panel",
            "people.csv",
            "--panel-map",
            "map.toml",
            "--answers",
            "answers-bad.csv",
            "--questions",
            "survey.toml",
        ],
    );
    assert!(
        stderr(&o).contains("answers-bad.csv: row p0, column coffee: \"6\" is not an option number from 1 to 5"),
        "{}",
        stderr(&o)
    );
}

/// A live model (the loopback server speaks the OpenAI protocol): the cost
/// is stated first, each question goes out with the survey schema, and
/// the replies are scored as the scripted model's are.
#[test]
fn a_live_model_gets_the_survey_schema_and_the_cost_first() {
    let dir = scratch("validate-live");
    let stop = Arc::new(AtomicBool::new(false));
    let (url, seen, server) = crate::trace::openai_server(stop.clone(), 0);
    let config = format!("[chat]\nprovider = \"openai\"\nmodel = \"loopback-model\"\n[chat.http]\nbase_url = \"{url}\"\napi_key_env = \"\"\n");
    std::fs::write(dir.join("live.toml"), config).expect("write");
    let args = [
        "validate",
        "--sample",
        "10",
        "--resamples",
        "100",
        "--config",
        "live.toml",
        "--yes",
        "--json",
        "--out",
        "live",
    ];
    let o = sim(&dir, &args);
    let s = json(&o);
    assert!(stderr(&o).contains("about 60 chat calls to loopback-model"), "{}", stderr(&o));
    assert_eq!((s["calls"]["asked"].as_u64(), s["calls"]["failed"].as_u64()), (Some(60), Some(0)));
    assert_eq!(s["calls"]["estimated"], false);
    let survey_bodies = || -> Vec<String> {
        seen.lock().iter().filter(|l| l.starts_with("BODY") && l.contains("\"survey_answer\"")).cloned().collect()
    };
    let survey = survey_bodies();
    assert_eq!(survey.len(), 60, "every question with the survey schema (and one connection check besides)");
    assert!(survey.iter().all(|b| b.contains("Options:\\n1. ")), "the options are in the prompt");
    // Each question's schema allows its own options: 7 for selfLR and PID,
    // 2 for vote.
    let maximum = |b: &String| {
        let body: serde_json::Value = serde_json::from_str(b.trim_start_matches("BODY").trim()).expect("a JSON body");
        body["response_format"]["json_schema"]["schema"]["properties"]["answer"]["maximum"].as_u64()
    };
    let counts = [7, 2].map(|k| survey.iter().filter(|b| maximum(b) == Some(k)).count());
    assert_eq!(counts, [40, 20], "{}", survey[0]);

    // An interrupted validation (here: its summary removed) continues with
    // the same command, buying no answer twice, to the same digest.
    std::fs::remove_file(dir.join("live/summary.json")).expect("remove");
    let again = sim(&dir, &args);
    assert!(stderr(&again).contains("continuing the unfinished validation"), "{}", stderr(&again));
    assert_eq!(json(&again)["digest"], s["digest"]);
    assert_eq!(survey_bodies().len(), 60, "every answer came from the runs' logs");
    let finished = sim(&dir, &args);
    assert!(stderr(&finished).contains("already exists and is not empty"), "a finished validation is left alone");
    std::fs::remove_file(dir.join("live/summary.json")).expect("remove");
    let mut other = args.to_vec();
    other.extend(["--seed", "8"]);
    let refused = sim(&dir, &other);
    let err = stderr(&refused);
    assert!(err.contains("holds an unfinished validation of other inputs (anes96 seed 42, 10 respondents"), "{err}");
    stop.store(true, Ordering::Relaxed);
    let _ = server.join();
    let rows = rows(&dir.join("live"));
    assert!(rows.iter().all(|r| r[4] == "1" || r[4] == "2"), "the server's answers are recorded");
}

/// `run --calibration`: a `validate --calibrate` file applied to a probe
/// that asks one of its questions. The scripted model's probabilities are
/// uniform, so the fit gives the model no weight and each persona's
/// calibrated distribution is the people's marginal from the file; the run
/// replays with no call. A file that does not fit is refused by name.
#[test]
fn a_calibration_file_applies_to_the_probes_that_ask_its_questions() {
    let dir = scratch("calibration-run");
    let fixture = |path: &str| std::fs::read_to_string(format!("{}/../fixtures/{path}", env!("CARGO_MANIFEST_DIR")));
    let survey = fixture("surveys/anes96/survey.toml").expect("survey.toml");
    let questions: toml::Value = toml::from_str(&survey).expect("toml");
    let q = &questions["question"][0];
    let mut scenario = fixture("scenarios/default.toml").expect("scenario");
    scenario.push_str(&format!(
        "\n[[probes]]\ntick = 1\nid = \"views\"\nquestion = {}\noptions = {}\n",
        q["text"], q["options"]
    ));
    std::fs::write(dir.join("scen.toml"), scenario).expect("scenario");
    let v = json(&sim(
        &dir,
        &["validate", "--sample", "40", "--answer-mode", "probabilities", "--calibrate", "--json", "--out", "v"],
    ));
    assert!(v["calibration"].is_object());
    let file: Value =
        serde_json::from_slice(&std::fs::read(dir.join("v/calibration.json")).expect("file")).expect("json");
    let fitted = &file["questions"][0];
    let marginal: Vec<f64> = serde_json::from_value(fitted["marginal"].clone()).expect("the marginal is kept");
    assert_eq!(fitted["weight_marginal"].as_f64(), Some(0.0), "uniform forecasts carry no weight");
    // Beside the imputer's out-of-fold forecasts (folds of 16 fitted
    // respondents, which a logit overfits), even uniform forecasts earn
    // some weight: the blend is fitted, not assumed.
    let beside_imputer = fitted["weight_imputer"].as_f64().expect("the blend with the imputer is fitted too");
    assert!((0.0..=1.0).contains(&beside_imputer), "{beside_imputer}");
    let run = |out: &str, extra: &[&str]| {
        let mut args =
            vec!["run", "--personas", "8", "--ticks", "1", "--scenario", "scen.toml", "--json", "--out", out];
        args.extend_from_slice(extra);
        sim(&dir, &args)
    };
    let r = json(&run("r", &["--answer-mode", "probabilities", "--calibration", "v/calibration.json"]));
    let mixture: Vec<f64> = serde_json::from_value(r["probes"]["views"]["mixture"].clone()).expect("a mixture");
    assert!(mixture.iter().zip(&marginal).all(|(a, b)| (a - b).abs() < 1e-12), "{mixture:?} vs {marginal:?}");
    assert!(r["notes"].to_string().contains("probe views calibrated as question selfLR"), "{r}");
    let replay = json(&sim(&dir, &["replay", "r", "--json"]));
    assert_eq!((replay["provider_calls"].as_u64(), &replay["digest"]), (Some(0), &r["digest"]));
    let refused = |o: std::process::Output, needle: &str| {
        let err = stderr(&o);
        assert!(
            o.status.code() == Some(1) && err.contains("--calibration v/calibration.json") && err.contains(needle),
            "{err}"
        );
    };
    refused(run("a", &["--calibration", "v/calibration.json"]), "this run answers in mode \"sample\"");
    std::fs::write(dir.join("hot.toml"), "[chat]\ntemperature = 1.3\n").expect("config");
    let other = ["--answer-mode", "probabilities", "--config", "hot.toml", "--calibration", "v/calibration.json"];
    refused(run("b", &other), "another configuration");
    let default =
        ["run", "--ticks", "1", "--answer-mode", "probabilities", "--calibration", "v/calibration.json", "--out", "c"];
    refused(sim(&dir, &default), "no probe of scenario default");
    std::fs::write(dir.join("bad.json"), "{\"format\": 1}").expect("file");
    let o = sim(&dir, &["run", "--answer-mode", "probabilities", "--calibration", "bad.json", "--out", "d"]);
    assert!(o.status.code() == Some(1) && stderr(&o).contains("not a calibration.json"), "{}", stderr(&o));
    // Fitted on respondents shown their party identification first: a
    // run's probes are asked without it.
    let given = ["validate", "--sample", "40", "--answer-mode", "probabilities", "--calibrate", "--given", "PID"];
    json(&sim(&dir, &[&given[..], &["--json", "--out", "g"]].concat()));
    let o = run("e", &["--answer-mode", "probabilities", "--calibration", "g/calibration.json"]);
    assert!(o.status.code() == Some(1) && stderr(&o).contains("own answers to PID first"), "{}", stderr(&o));
    for out in ["a", "b", "c", "d", "e"] {
        assert!(!dir.join(out).exists(), "nothing written for a refused run");
    }
}

/// `[answers] reasons = true`: in probabilities mode every question is
/// asked once more in sample mode for its reason, which SSR rates; without
/// it SSR is skipped. A run refuses the setting by name.
#[test]
fn reasons_generated_apart_let_ssr_rate_a_probabilities_validation() {
    let dir = scratch("validate-reasons");
    std::fs::write(
        dir.join("r.toml"),
        "[intent]\nmethod = \"ssr\"\n[answers]\nmode = \"probabilities\"\nreasons = true\n",
    )
    .expect("config");
    std::fs::write(dir.join("n.toml"), "[intent]\nmethod = \"ssr\"\n[answers]\nmode = \"probabilities\"\n")
        .expect("config");
    let with = json(&sim(&dir, &["validate", "--config", "r.toml", "--sample", "12", "--json", "--out", "r"]));
    let without = json(&sim(&dir, &["validate", "--config", "n.toml", "--sample", "12", "--json", "--out", "n"]));
    let names = |v: &Value| -> Vec<String> {
        v["questions"][0]["sources"]
            .as_array()
            .expect("sources")
            .iter()
            .map(|s| s["name"].as_str().expect("name").to_string())
            .collect()
    };
    assert!(names(&with).contains(&"model (SSR)".to_string()), "{:?}", names(&with));
    assert!(!names(&without).contains(&"model (SSR)".to_string()), "{:?}", names(&without));
    assert_eq!(with["calls"]["asked"], 12 * 3 * 2, "the probabilities, then the reasons");
    assert_eq!(without["calls"]["asked"], 12 * 3);
    assert!(without["notes"].to_string().contains("SSR was skipped"), "{without}");
    assert!(with["notes"].to_string().contains("reasons generated separately"), "{with}");
    let o = sim(&dir, &["run", "--config", "r.toml", "--out", "run"]);
    assert!(o.status.code() == Some(1) && stderr(&o).contains("reasons = true"), "{}", stderr(&o));
}
