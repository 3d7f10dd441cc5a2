use crate::support::{scratch, sim, stderr};

fn fails_with(args: &[&str], needles: &[&str]) {
    let dir = scratch(&format!("bad-{}", args.join("-").replace(['/', ' ', '.'], "_")));
    std::fs::write(dir.join("bad-scenario.toml"), "name = \"x\"\nstimuli = [\n  { id = \"a\", kind = \"ad\" \n")
        .expect("write");
    std::fs::write(dir.join("bad-config.toml"), "[retrieval]\nk = 5\n\n[chat]\nconcurency = 8\n").expect("write");
    std::fs::write(dir.join("bad-value.toml"), "[embedding]\ndim = 0\n").expect("write");
    std::fs::write(dir.join("a-file"), "x").expect("write");
    let scenario = |show: &str, probe_tick: u32| {
        format!(
            "name = \"s\"\n[[stimuli]]\nid = \"a\"\nkind = \"ad\"\ntitle = \"A\"\ncategory = \"coffee\"\ntext = \"An ad.\"\n[[ticks]]\n[[ticks.show]]\n\
             stimuli = [\"a\"]\n{show}\n[[probes]]\ntick = {probe_tick}\nid = \"q\"\nquestion = \"Why?\"\n"
        )
    };
    std::fs::write(dir.join("late-probe.toml"), scenario("", 99)).expect("write");
    std::fs::write(dir.join("astrology.toml"), scenario("audience = \"interest:astrology\"", 1)).expect("write");
    let out = sim(&dir, args);
    assert!(!out.status.success(), "{args:?} should fail");
    let err = stderr(&out);
    for n in needles {
        assert!(err.contains(n), "{args:?}: stderr lacks {n:?}:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.stdout.is_empty(), "nothing on stdout for a failed run");
}

#[test]
fn unknown_flag() {
    fails_with(&["run", "--personaz", "3"], &["--personaz"]);
}

#[test]
fn zero_personas_and_ticks() {
    fails_with(&["run", "--personas", "0"], &["--personas", "0"]);
    fails_with(&["run", "--ticks", "0"], &["--ticks", "0"]);
}

#[test]
fn missing_and_malformed_scenario() {
    fails_with(&["run", "--scenario", "nope.toml"], &["nope.toml", "not a built-in"]);
    fails_with(&["run", "--scenario", "bad-scenario.toml"], &["bad-scenario.toml", "line"]);
}

/// Input that would be silently ignored: a probe after the run's last tick,
/// an interest no persona has.
#[test]
fn scenarios_that_would_do_nothing() {
    fails_with(
        &["run", "--ticks", "2", "--scenario", "late-probe.toml"],
        &["late-probe.toml", "probes[0].tick", "tick 99 never comes"],
    );
    fails_with(
        &["run", "--scenario", "astrology.toml"],
        &["astrology.toml", "ticks[0].show[0].audience", "astrology", "known: "],
    );
}

/// Live chat is never implied: each inconsistent or incomplete chat
/// configuration is refused with the field and the fix.
#[test]
fn chat_configuration_that_would_mislead() {
    let cases: [(&str, &[&str]); 4] = [
        ("[chat]\nmodel = \"gpt-4o\"\n", &["chat.model", "not a scripted model", "provider = \"openai\""]),
        ("[chat]\nprovider = \"openai\"\n[chat.http]\nbase_url = \"http://127.0.0.1:9/v1\"\n", &["chat.model", "is a scripted model"]),
        ("[chat]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\n", &["chat.http.base_url"]),
        (
            "[chat]\nprovider = \"openai\"\nmodel = \"gpt-4o-mini\"\n[chat.http]\nbase_url = \"http://127.0.0.1:9/v1\"\napi_key_env = \"SIM_TEST_NO_SUCH_KEY\"\n",
            &["SIM_TEST_NO_SUCH_KEY", "not set"],
        ),
    ];
    for (i, (toml, needles)) in cases.iter().enumerate() {
        let dir = scratch(&format!("bad-chat-{i}"));
        std::fs::write(dir.join("chat.toml"), toml).expect("write");
        let out = sim(&dir, &["run", "--personas", "2", "--ticks", "1", "--config", "chat.toml"]);
        assert!(!out.status.success(), "case {i} must fail");
        for n in *needles {
            assert!(stderr(&out).contains(n), "case {i}: stderr lacks {n:?}: {}", stderr(&out));
        }
        assert!(!dir.join("runs").exists(), "case {i}: nothing written on bad input");
    }
}

#[test]
fn missing_and_malformed_config() {
    fails_with(&["run", "--config", "absent.toml"], &["absent.toml"]);
    fails_with(&["run", "--config", "bad-config.toml"], &["bad-config.toml", "line 5", "concurency"]);
    fails_with(&["run", "--config", "bad-value.toml"], &["bad-value.toml", "embedding.dim"]);
}

#[test]
fn unwritable_or_existing_out() {
    fails_with(&["run", "--out", "a-file/run"], &["a-file/run"]);
    fails_with(&["run", "--out", "a-file"], &["a-file", "not empty"]);
}

#[test]
fn existing_run_is_never_overwritten() {
    let dir = scratch("no-overwrite");
    assert!(sim(&dir, &["run", "--personas", "3", "--ticks", "1", "--out", "r"]).status.success());
    let before = std::fs::read(dir.join("r/summary.json")).expect("summary");
    let again = sim(&dir, &["run", "--personas", "4", "--ticks", "1", "--out", "r"]);
    assert!(!again.status.success());
    assert!(stderr(&again).contains("never overwritten"));
    assert_eq!(std::fs::read(dir.join("r/summary.json")).expect("summary"), before);
}

#[test]
fn bad_budget() {
    fails_with(&["run", "--budget-usd", "-1"], &["--budget-usd"]);
}

#[test]
fn a_run_into_a_recorded_run_suggests_resume_and_default_folders_never_collide() {
    let dir = scratch("resume-hint");
    let first = sim(&dir, &["run", "--personas", "3", "--ticks", "1", "--out", "r", "--json"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let again = sim(&dir, &["run", "--personas", "3", "--ticks", "1", "--out", "r"]);
    let err = stderr(&again);
    assert!(!again.status.success() && err.contains("sim-cli run --resume r"), "{err}");
    #[cfg(feature = "agents")]
    for _ in 0..2 {
        let e = sim(&dir, &["experiment", "--topics", "1", "--reps", "1", "--lambda", "0.1", "--json"]);
        assert!(e.status.success(), "{}", stderr(&e));
        let f = sim(&dir, &["field", "simulate", "--ops", "10", "--json"]);
        assert!(f.status.success(), "{}", stderr(&f));
    }
    #[cfg(feature = "agents")]
    assert!(dir.join("runs/experiment-s42-2").is_dir() && dir.join("runs/field-s42-2").is_dir());
}

/// A command that only embeds never reads the chat model's file: with the
/// GGUF file absent, `embed text`, `embed check` and `intent score` work,
/// and `run` refuses the config naming the file.
#[test]
fn commands_that_only_embed_do_not_need_the_chat_models_file() {
    let dir = scratch("embed-without-gguf");
    let config = "[chat]\nprovider = \"gguf\"\nmodel = \"m\"\n[chat.gguf]\nmodel_file = \"absent.gguf\"\n";
    std::fs::write(dir.join("local.toml"), config).expect("write");
    for args in [
        &["embed", "text", "--config", "local.toml", "a mug", "a cup"][..],
        &["embed", "check", "--config", "local.toml"],
        &["intent", "score", "--config", "local.toml", "I would buy it today."],
    ] {
        let o = sim(&dir, args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    }
    let o = sim(&dir, &["run", "--config", "local.toml", "--personas", "2", "--ticks", "1", "--out", "r"]);
    assert!(!o.status.success() && stderr(&o).contains("absent.gguf"), "{}", stderr(&o));
    // The slim build runs no local model: it says so, naming the file and the feature.
    let slim = !cfg!(feature = "local-models");
    assert_eq!(stderr(&o).contains("the `local-models` feature"), slim, "{}", stderr(&o));
    assert!(!dir.join("r").exists(), "nothing is written for a config whose model is missing");
}

/// `validate` loads an embedder only for SSR: with the MiniLM directory
/// absent, a direct validation runs, and an SSR one is refused naming it.
#[test]
fn validate_needs_the_embedder_only_for_ssr() {
    let dir = scratch("validate-without-minilm");
    let embedder = "[embedding]\nprovider = \"minilm\"\n[embedding.minilm]\nmodel_dir = \"absent-minilm\"\n";
    std::fs::write(dir.join("direct.toml"), embedder).expect("write");
    std::fs::write(dir.join("ssr.toml"), format!("{embedder}[intent]\nmethod = \"ssr\"\n")).expect("write");
    let validate = |config: &str, out: &str| {
        sim(&dir, &["validate", "--config", config, "--sample", "10", "--resamples", "100", "--out", out, "--json"])
    };
    let direct = validate("direct.toml", "d");
    assert!(direct.status.success(), "{}", stderr(&direct));
    let ssr = validate("ssr.toml", "s");
    assert!(!ssr.status.success() && stderr(&ssr).contains("absent-minilm"), "{}", stderr(&ssr));
    assert!(!dir.join("s").exists(), "nothing is written for a config whose embedder is missing");
}
