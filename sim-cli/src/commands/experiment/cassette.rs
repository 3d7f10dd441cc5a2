//! A live experiment's cassette (`cassette.bin` in its directory): the
//! setup, every chat and embedding answer, and each mission's measured
//! latency. `sim-cli experiment --replay DIR` runs the same missions from
//! it with no model call.

use super::{AgentModel, EmbedderSummary, ExperimentArgs, Plan};
use ::experiment::cassette::{
    mission_key, Cassette, Entry, Recorder, RecordingChat, RecordingEmbedder, ReplayChat, ReplayEmbedder, CASSETTE_FILE,
};
use ::experiment::summary::RunRecord;
use ::experiment::Topic;
use agents::experiment::LatencySource;
use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;

/// What a cassette's header holds: enough to run the experiment again.
#[derive(Debug, Serialize, Deserialize)]
struct Recorded {
    /// Each topic as a topic file.
    topics: Vec<String>,
    reps: u32,
    seed: u64,
    lambdas: Vec<f64>,
    auto: bool,
    dim: usize,
    embed_model: String,
    embedder: EmbedderSummary,
    model: String,
    model_live: bool,
    judge: String,
    judge_live: bool,
    prices: (String, String),
}

/// Starts recording a live plan: every answer of its agents, its judge
/// and its embedder goes to `cassette.bin` as it arrives.
pub fn record(mut plan: Plan) -> Result<Plan> {
    let topics = plan.topics.iter().map(toml::to_string).collect::<std::result::Result<Vec<_>, _>>()?;
    let setup = Recorded {
        topics,
        reps: plan.reps,
        seed: plan.seed,
        lambdas: plan.swept.clone(),
        auto: plan.auto,
        dim: plan.dim,
        embed_model: plan.embed_model.clone(),
        embedder: plan.embedder_summary.clone(),
        model: plan.model.name.clone(),
        model_live: plan.model.live,
        judge: plan.judge.name.clone(),
        judge_live: plan.judge.live,
        prices: plan.prices.clone(),
    };
    let recorder = Recorder::create(&plan.out.join(CASSETTE_FILE), &serde_json::to_string(&setup)?)?;
    let wrap = |chat: &Option<Arc<dyn engine::chat::ChatPort>>| {
        chat.as_ref().map(|c| {
            Arc::new(RecordingChat { inner: c.clone(), recorder: recorder.clone() }) as Arc<dyn engine::chat::ChatPort>
        })
    };
    plan.model.chat = wrap(&plan.model.chat);
    plan.judge.chat = wrap(&plan.judge.chat);
    plan.embedder = Arc::new(RecordingEmbedder { inner: plan.embedder.clone(), recorder: recorder.clone() });
    plan.recorder = Some(recorder);
    Ok(plan)
}

/// Appends each mission's measured latency (live agents) and reports the
/// first write error of the recording.
pub fn record_latencies(recorder: &Recorder, records: &[RunRecord], measured: bool) -> Result<()> {
    if measured {
        for r in records {
            let mission = mission_key(&r.topic, r.rep, r.condition.name(), r.lambda);
            recorder.append(&Entry::Latency { mission, measured_ms: r.latency_ms });
        }
    }
    recorder.finish().context("the experiment's cassette could not be written")
}

/// The plan of `--replay DIR`: the recorded setup, answered from the
/// cassette. A judge named by `--judge-config` re-scores live (that is a
/// call the user asked for); anything else the cassette lacks is an error.
pub fn replay_plan(a: &ExperimentArgs, dir: &Path) -> Result<Plan> {
    let path = if dir.is_file() { dir.to_path_buf() } else { dir.join(CASSETTE_FILE) };
    if !path.exists() {
        bail!("--replay {}: no {CASSETTE_FILE} (only a live experiment records one)", dir.display());
    }
    let cassette = Cassette::read(&path).with_context(|| format!("--replay {}", dir.display()))?;
    let r: Recorded = serde_json::from_str(&cassette.setup_json)
        .with_context(|| format!("{}: the header's setup does not read", path.display()))?;
    let topics = r
        .topics
        .iter()
        .enumerate()
        .map(|(i, t)| Topic::from_toml(t, &format!("{} topic {}", path.display(), i + 1)))
        .collect::<engine::Result<Vec<_>>>()?;
    let served = |fallback| Some(Arc::new(ReplayChat { cassette: cassette.clone(), fallback }) as _);
    let model = AgentModel { chat: if r.model_live { served(None) } else { None }, name: r.model, live: r.model_live };
    let judge = match &a.judge_config {
        Some(p) => {
            let live = super::agent_model(&crate::prelude::load_config(Some(p))?, p, r.seed)?;
            AgentModel { chat: served(live.chat), name: live.name, live: live.live }
        }
        None => AgentModel { chat: if r.judge_live { served(None) } else { None }, name: r.judge, live: r.judge_live },
    };
    let latency = match r.model_live {
        true => LatencySource::Recorded(Arc::new(cassette.latencies.clone())),
        false => LatencySource::Modelled,
    };
    let out = a.out.clone().unwrap_or_else(|| runs::dir::fresh(&format!("runs/experiment-replay-s{}", r.seed)));
    if let Some(b) = &a.blind_export {
        super::empty_or_new(b, "--blind-export")?;
    }
    Ok(Plan {
        topics,
        reps: r.reps,
        seed: r.seed,
        swept: r.lambdas,
        auto: r.auto,
        model,
        judge,
        embedder: Arc::new(ReplayEmbedder { cassette: cassette.clone() }),
        embedder_summary: r.embedder,
        embed_model: r.embed_model,
        dim: r.dim,
        prices: r.prices,
        latency,
        recorder: None,
        replaying: Some((path, cassette)),
        out,
    })
}
