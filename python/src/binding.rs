//! The functions of `simengine._native`. Each converts its arguments,
//! calls the `runs` library with the GIL released ([`crate::wait`]) and
//! converts the result back; the package's modules (`run.py`,
//! `validation.py`, `field.py` under `python/simengine/`) wrap them in its
//! typed API.

use crate::errors::{self, Inputs};
use crate::wait::{drive, guarded, Latest};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// A panel given by data, as the Python side passes it: the CSV text and
/// the map's TOML text, each with the name its errors use.
type Panel = (String, String, String, String);

/// Runs a panel, or resumes the run in `resume`: `sim-cli run`'s work, by
/// the same library call. Returns the run directory and its summary as
/// JSON. A live (`openai`) chat model runs only with `confirm_live`.
/// `pilot` defaults to `runs::preflight::DEFAULT_PILOT` (written as a
/// literal, which the stubs can check).
#[pyfunction]
#[pyo3(signature = (*, scenario, personas, ticks, seed, config, out, panel, resume, threads, budget_usd, answer_mode, calibration, confirm_live, progress, shard=None, cache=true, pilot=3))]
#[allow(clippy::too_many_arguments)] // The keyword arguments of `simengine.run`, one for one.
fn run(
    py: Python<'_>,
    scenario: String,
    personas: Option<u32>,
    ticks: u32,
    seed: u64,
    config: Option<PathBuf>,
    out: Option<PathBuf>,
    panel: Option<Panel>,
    resume: Option<PathBuf>,
    threads: Option<u32>,
    budget_usd: Option<f64>,
    answer_mode: Option<String>,
    calibration: Option<PathBuf>,
    confirm_live: bool,
    progress: Option<Bound<'_, PyAny>>,
    shard: Option<(u32, u32)>,
    cache: bool,
    pilot: u32,
) -> PyResult<(String, String)> {
    // `run.py` checks the pair; the library checks `I/N` again for any caller.
    if shard.is_some() && resume.is_some() {
        let why = "shard= with resume: a shard's directory resumes when the same shard is run into it again";
        return Err(errors::refused(py, false, why));
    }
    let mode = answer_mode
        .as_deref()
        .map(str::parse::<engine::config::AnswerMode>)
        .transpose()
        .map_err(|e| errors::refused(py, false, &format!("answer_mode {e}")))?;
    if resume.is_some() && (mode.is_some() || calibration.is_some()) {
        let why = "resume continues a run as it was configured: give answer_mode and calibration to a new run only";
        return Err(errors::refused(py, false, why));
    }
    let latest = Arc::new(Latest::default());
    let interrupt = Arc::new(AtomicBool::new(false));
    let inputs = Inputs { scenario: Some(scenario.clone()) };
    let (watched, flag) = (latest.clone(), interrupt.clone());
    let work = move || -> runs::Result<(String, String)> {
        let confirm = live_confirmation(confirm_live);
        let watch =
            runs::Watch { threads, progress: watched, interrupt: runs::Interrupt::Flag(flag), confirm: &confirm };
        let finished = match resume {
            Some(dir) => runs::resume(&dir, runs::TraceHooks::default(), &watch)?,
            None => {
                let mut config = runs::load_config(config.as_deref())?;
                if let Some(mode) = mode {
                    config.raw.answers.mode = mode;
                }
                config.raw.cache.enabled &= cache;
                let start = runs::Start {
                    scenario,
                    personas,
                    panel: panel.map(|(csv, csv_name, map, map_name)| runs::PanelData { csv, csv_name, map, map_name }),
                    ticks,
                    seed,
                    out,
                    budget_usd,
                    calibration,
                    shard: shard.map(|(index, count)| format!("{index}/{count}")),
                    pilot,
                    ..runs::Start::new(config)
                };
                runs::start(start, &watch)?
            }
        };
        finished.completed()?;
        let summary = serde_json::to_string(&finished.summary)
            .map_err(|e| runs::Error::Input(format!("cannot encode the summary: {e}")))?;
        Ok((finished.dir.path().display().to_string(), summary))
    };
    settle(py, drive(py, &latest, progress.as_ref(), &interrupt, work)?, &inputs)
}

/// An operation's result as Python sees it: its error as the package's
/// exception (a run stopped by Ctrl-C is `simengine.Interrupted`); an
/// operation that finished although Ctrl-C came meanwhile (too late to
/// stop at a tick boundary) raises the `KeyboardInterrupt` once it has.
fn settle<T>(py: Python<'_>, done: crate::wait::Outcome<runs::Result<T>>, inputs: &Inputs) -> PyResult<T> {
    match (done.result, done.interrupted) {
        (Err(e), _) => Err(errors::to_py(py, &e, inputs)),
        (Ok(_), Some(keyboard)) => Err(keyboard),
        (Ok(value), None) => Ok(value),
    }
}

/// The go-ahead for a billed model: refused, before any call, unless the
/// caller passed `confirm_live`. A run on a live or local model then makes
/// its estimate (the connection check and the pilot), kept in its summary.
fn live_confirmation(
    confirm_live: bool,
) -> impl Fn(&engine::config::Config, &dyn Fn() -> runs::Result<runs::preflight::Estimate>) -> runs::Result<()> {
    use engine::config::ChatProvider;
    move |cfg, estimate| match cfg.raw.chat.provider {
        ChatProvider::Openai if !confirm_live => Err(runs::Error::NotConfirmed(
            "the config names a live chat model (provider \"openai\"), which is billed: pass confirm_live=True \
             to run it; nothing was run"
                .into(),
        )),
        ChatProvider::Scripted => Ok(()),
        ChatProvider::Modelled | ChatProvider::Openai | ChatProvider::Gguf => estimate().map(|_| ()),
    }
}

/// Scores a panel against real people's answers (`sim-cli validate`): a
/// built-in `suite`, or the user's four inputs as `texts` (panel, panel
/// map, answers, questions: each a text and the name its errors use).
/// Returns the validation's directory, its summary
/// as JSON and the path of its answers file.
#[pyfunction]
#[pyo3(signature = (*, suite, texts, subgroups, config, seed, sample, out, resamples, answer_mode, option_order, calibrate, rectify, given, weights, confirm_live, progress, cache=true, configs=Vec::new(), pilot=3))]
#[allow(clippy::too_many_arguments)] // The keyword arguments of `simengine.validate`, one for one.
fn validate(
    py: Python<'_>,
    suite: String,
    texts: Option<[(String, String); 4]>,
    subgroups: Option<PathBuf>,
    config: Option<PathBuf>,
    seed: u64,
    sample: Option<u32>,
    out: Option<PathBuf>,
    resamples: u32,
    answer_mode: Option<String>,
    option_order: Option<String>,
    calibrate: bool,
    rectify: bool,
    given: Vec<String>,
    weights: Option<String>,
    confirm_live: bool,
    progress: Option<Bound<'_, PyAny>>,
    cache: bool,
    configs: Vec<PathBuf>,
    pilot: u32,
) -> PyResult<(String, String, String)> {
    let mode = answer_mode
        .as_deref()
        .map(str::parse::<engine::config::AnswerMode>)
        .transpose()
        .map_err(|e| errors::refused(py, false, &format!("answer_mode {e}")))?;
    let order = option_order
        .as_deref()
        .map(str::parse::<engine::config::AnswerOrder>)
        .transpose()
        .map_err(|e| errors::refused(py, false, &format!("option_order {e}")))?;
    let latest = Arc::new(Latest::default());
    let interrupt = Arc::new(AtomicBool::new(false));
    let (watched, flag) = (latest.clone(), interrupt.clone());
    let work = move || -> runs::Result<(String, String, String)> {
        let confirm = live_confirmation(confirm_live);
        let watch =
            runs::Watch { threads: None, progress: watched, interrupt: runs::Interrupt::Flag(flag), confirm: &confirm };
        let suite = match texts {
            Some([panel, panel_map, answers, questions]) => {
                runs::validate::SuiteSource::Texts { panel, panel_map, answers, questions }
            }
            None => runs::validate::SuiteSource::Builtin(suite),
        };
        let configure = |path: Option<&std::path::Path>| -> runs::Result<engine::config::Config> {
            let mut config = runs::load_config_for(path, runs::Models::Chat)?;
            if let Some(mode) = mode {
                config.raw.answers.mode = mode;
            }
            if let Some(order) = order {
                config.raw.answers.order = order;
            }
            config.raw.cache.enabled &= cache;
            Ok(config)
        };
        // One entry in `configs` is one model: its config.
        let one = config.or_else(|| configs.first().filter(|_| configs.len() == 1).cloned());
        let config = configure(one.as_deref())?;
        let args = runs::Validate {
            config,
            suite,
            subgroups,
            seed,
            sample,
            out,
            resamples,
            calibrate,
            rectify,
            given,
            weights,
            pilot,
        };
        if configs.len() > 1 {
            let mut models = Vec::new();
            for path in &configs {
                models.push((path.display().to_string(), configure(Some(path))?));
            }
            let done = runs::compare(runs::Compare { models, args }, &watch)?;
            let summary = serde_json::to_string(&done)
                .map_err(|e| runs::Error::Input(format!("cannot encode the comparison: {e}")))?;
            return Ok((done.out, summary, String::new()));
        }
        let done = runs::validate(args, &watch)?;
        let summary = serde_json::to_string(&done.summary)
            .map_err(|e| runs::Error::Input(format!("cannot encode the summary: {e}")))?;
        let answers = done.dir.join(runs::dir::ANSWERS);
        Ok((done.dir.display().to_string(), summary, answers.display().to_string()))
    };
    settle(py, drive(py, &latest, progress.as_ref(), &interrupt, work)?, &Inputs::default())
}

/// The summary of the run in `dir`, as JSON: what `sim-cli run --json`
/// printed when it ended.
#[pyfunction]
fn summary_json(py: Python<'_>, dir: PathBuf) -> PyResult<String> {
    guarded(py, || {
        let (run_dir, _) = runs::RunDir::open(&dir)?;
        let path = run_dir.summary();
        std::fs::read_to_string(&path)
            .map_err(|source| runs::Error::Io { what: format!("cannot read the summary {}", path.display()), source })
    })?
    .map_err(|e| errors::to_py(py, &e, &Inputs::default()))
}

/// A dict of one list per named field of `rows`, in order.
macro_rules! columns {
    ($py:expr, $rows:expr; $($field:ident),* $(,)?) => {{
        let columns = PyDict::new($py);
        $(columns.set_item(stringify!($field), PyList::new($py, $rows.iter().map(|r| r.$field.clone()))?)?;)*
        columns
    }};
}

/// An f32 figure through its shortest decimal, so that 0.7 is 0.7 (as the
/// CSV export writes it), not 0.699999988 widened.
fn decimal(v: Option<f32>) -> Option<f64> {
    v.map(|x| x.to_string().parse::<f64>().unwrap_or(f64::from(x)))
}

/// One list per column of the run's outcomes (one row per job), from its
/// trace: `runs::export::Row`'s fields, typed (`None` where a cell is
/// empty), lists staying lists.
#[pyfunction]
fn outcome_columns<'py>(py: Python<'py>, dir: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let rows = guarded(py, || runs::export::rows(&dir, &runs::export::Filter::default()))?
        .map_err(|e| errors::to_py(py, &e, &Inputs::default()))?;
    let columns = columns!(py, rows;
        tick,
        position,
        persona,
        name,
        age,
        age_band,
        city,
        occupation,
        income,
        interests,
        price_sensitivity,
        stimulus,
        exposure,
        status,
        failed_stage,
        reason,
        intent,
        sentiment,
        importance,
        ssr_expected,
        chat_nano_usd,
        embedding_nano_usd,
        total_nano_usd,
        input_tokens,
        output_tokens,
        reaction,
        respondent,
    );
    columns.set_item("sentiment", PyList::new(py, rows.iter().map(|r| decimal(r.sentiment)))?)?;
    columns.set_item("price_sensitivity", PyList::new(py, rows.iter().map(|r| decimal(r.price_sensitivity)))?)?;
    Ok(columns)
}

/// One list per column of the memory of the run in `dir` (one row per
/// version of a memory record: `runs::memory::Row`'s fields), with the
/// warnings of its operation log (lines skipped, with why). The trace is
/// re-run with no model call to rebuild the personas' states.
#[pyfunction]
#[pyo3(signature = (dir, persona=None, history=false))]
fn memory_columns<'py>(
    py: Python<'py>,
    dir: PathBuf,
    persona: Option<String>,
    history: bool,
) -> PyResult<(Bound<'py, PyDict>, Vec<String>)> {
    let latest = Latest::default();
    let interrupt = Arc::new(AtomicBool::new(false));
    let work = move || {
        let memory = runs::memory::load(&dir, |_| Arc::new(actors::progress::Silent))?;
        let rows = runs::memory::rows(&memory, &runs::memory::Select { persona, history })?;
        Ok((rows, memory.warnings().map(str::to_string).collect::<Vec<_>>()))
    };
    let (rows, warnings) = settle(py, drive(py, &latest, None, &interrupt, work)?, &Inputs::default())?;
    let columns = columns!(py, rows;
        persona,
        record,
        version,
        current,
        tier,
        from_tier,
        energy,
        peak_energy,
        access_count,
        decay_rate,
        kind,
        text,
        importance,
        tick,
        sources,
        created_hour,
        last_accessed_hour,
        valid_from_hour,
        valid_to_hour,
        previous,
        is_test,
    );
    columns.set_item("sentiment", PyList::new(py, rows.iter().map(|r| decimal(r.sentiment)))?)?;
    Ok((columns, warnings))
}

/// Replays the run in `dir` from its trace with no model call (`sim-cli
/// replay`). Returns what it found.
#[pyfunction]
fn replay<'py>(py: Python<'py>, dir: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let latest = Latest::default();
    let interrupt = Arc::new(AtomicBool::new(false));
    let flag = interrupt.clone();
    let work =
        move || runs::replay(&dir, &runs::Watch { interrupt: runs::Interrupt::Flag(flag), ..runs::Watch::quiet() });
    let replayed = settle(py, drive(py, &latest, None, &interrupt, work)?, &Inputs::default())?;
    let d = PyDict::new(py);
    d.set_item("trace", replayed.trace.display().to_string())?;
    d.set_item("ticks_recorded", replayed.ticks_recorded)?;
    d.set_item("ticks_planned", replayed.ticks_planned)?;
    d.set_item("ticks_matched", replayed.ticks_matched)?;
    d.set_item("complete", replayed.complete)?;
    d.set_item("divergence", replayed.divergence.as_ref().map(ToString::to_string))?;
    d.set_item("provider_calls", replayed.provider_calls)?;
    Ok(d)
}

/// Writes the HTML report of the run in `dir` (`sim-cli report`) to
/// `out` (default: beside the trace); returns the page's path.
#[pyfunction]
#[pyo3(signature = (dir, out=None))]
fn report(py: Python<'_>, dir: PathBuf, out: Option<PathBuf>) -> PyResult<String> {
    guarded(py, || runs::report(&dir, out.as_deref(), &[], &actors::progress::Silent))?
        .map(|r| r.html.display().to_string())
        .map_err(|e| errors::to_py(py, &e, &Inputs::default()))
}

/// Merges the shard runs in `shards` into the run `out` (`sim-cli
/// merge`); returns its directory and summary as JSON.
#[pyfunction]
fn merge(py: Python<'_>, shards: Vec<PathBuf>, out: PathBuf) -> PyResult<(String, String)> {
    guarded(py, || {
        let merged = runs::merge(&shards, &out, &actors::progress::Silent)?;
        let summary = serde_json::to_string(&merged.summary)
            .map_err(|e| runs::Error::Input(format!("cannot encode the summary: {e}")))?;
        Ok((merged.dir.path().display().to_string(), summary))
    })?
    .map_err(|e| errors::to_py(py, &e, &Inputs::default()))
}

/// The TOML of a panel map whose `[panel.columns]` table is `columns`
/// (JSON text of the Python dict).
#[pyfunction]
fn panel_map_toml(py: Python<'_>, columns: &str) -> PyResult<String> {
    let refuse = |cause: String| errors::refused(py, true, &format!("panel_map: {cause}"));
    let value: toml::Value = serde_json::from_str(columns).map_err(|e| refuse(e.to_string()))?;
    let mut panel = toml::Table::new();
    panel.insert("columns".into(), value);
    let mut root = toml::Table::new();
    root.insert("panel".into(), toml::Value::Table(panel));
    toml::to_string(&root).map_err(|e| refuse(e.to_string()))
}

/// `simengine._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(summary_json, m)?)?;
    m.add_function(wrap_pyfunction!(outcome_columns, m)?)?;
    m.add_function(wrap_pyfunction!(memory_columns, m)?)?;
    m.add_function(wrap_pyfunction!(replay, m)?)?;
    m.add_function(wrap_pyfunction!(report, m)?)?;
    m.add_function(wrap_pyfunction!(merge, m)?)?;
    m.add_function(wrap_pyfunction!(validate, m)?)?;
    m.add_function(wrap_pyfunction!(panel_map_toml, m)?)?;
    m.add("ENGINE_VERSION", env!("CARGO_PKG_VERSION"))?;
    #[cfg(feature = "agents")]
    crate::agents::add(m)?;
    m.add("HAS_AGENTS", cfg!(feature = "agents"))?;
    Ok(())
}
