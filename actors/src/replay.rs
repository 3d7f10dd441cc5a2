//! Re-running a recorded run: replay (every answer from the trace) and
//! resume (the recorded ticks from the trace, the rest live).

use crate::coordinator::TickReport;
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::run::{default_ports, run, RunResult, RunSpec};
use engine::chat::ChatPort;
use engine::config::{ChatProvider, EmbeddingModel};
use engine::embed::EmbeddingPort;
use engine::persona::profile::label;
use engine::persona::Traits;
use engine::scenario::Scenario;
use engine::trace::{CassetteChat, CassetteEmbedder, Header, ReadTrace, TickFrame};
use engine::turn::Outcome;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The first place a re-run differs from its trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Divergence {
    /// Tick.
    pub tick: u32,
    /// Persona, when the difference is in one persona's state or outcomes.
    pub persona: Option<u32>,
    /// What differs.
    pub what: String,
}

impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.persona {
            Some(p) => write!(f, "tick {}, persona {}: {}", self.tick, label(p), self.what),
            None => write!(f, "tick {}: {}", self.tick, self.what),
        }
    }
}

fn outcome_diff(a: &Outcome, b: &Outcome) -> Vec<&'static str> {
    let mut d = Vec::new();
    if a.stimulus != b.stimulus || a.exposure != b.exposure {
        d.push("stimulus");
    }
    if a.status != b.status {
        d.push("status");
    }
    if a.retrieved != b.retrieved {
        d.push("retrieved memory ids");
    }
    if a.prompt != b.prompt {
        d.push("prompt");
    }
    if a.reaction != b.reaction {
        d.push("reaction");
    }
    if a.reflection != b.reflection {
        d.push("reflection");
    }
    if a.probes != b.probes {
        d.push("probe answers");
    }
    if a.memories != b.memories {
        d.push("new memory ids");
    }
    if a.chat_calls.iter().map(|c| (&c.request, &c.reply)).ne(b.chat_calls.iter().map(|c| (&c.request, &c.reply))) {
        d.push("chat calls");
    }
    if a.spend != b.spend {
        d.push("costs");
    }
    d
}

/// Compares a re-run tick with its recorded frame.
pub fn compare(recorded: &TickFrame, replayed: &TickReport) -> Option<Divergence> {
    let tick = recorded.tick;
    let div = |persona: Option<u32>, what: String| Some(Divergence { tick, persona, what });
    if recorded.outcomes.len() != replayed.outcomes.len() {
        return div(None, format!("{} jobs recorded, {} replayed", recorded.outcomes.len(), replayed.outcomes.len()));
    }
    // Stage by stage, so that the earliest cause is named rather than a
    // later job that a shared embedding invocation dragged along.
    let stages: [fn(&Outcome, &Outcome) -> bool; 3] = [
        |a, b| {
            a.stimulus == b.stimulus && a.exposure == b.exposure && a.retrieved == b.retrieved && a.prompt == b.prompt
        },
        |a, b| {
            a.reaction == b.reaction
                && a.reflection == b.reflection
                && a.probes == b.probes
                && a.chat_calls == b.chat_calls
        },
        |a, b| outcome_diff(a, b).is_empty(),
    ];
    for same in stages {
        if let Some((a, b)) = recorded.outcomes.iter().zip(&replayed.outcomes).find(|(a, b)| !same(a, b)) {
            let d = outcome_diff(a, b);
            return div(Some(a.persona), format!("job {} ({}) differs in: {}", a.position, a.stimulus, d.join(", ")));
        }
    }
    for (p, (a, b)) in recorded.persona_digests.iter().zip(&replayed.persona_digests).enumerate() {
        if a != b {
            let show = |d: &Option<engine::digest::Digest>| d.map_or("none".to_string(), |d| d.hex()[..16].to_string());
            return div(Some(p as u32), format!("state digest differs: recorded {}, replayed {}", show(a), show(b)));
        }
    }
    if recorded.memories != replayed.memories {
        return div(None, "memory events differ".into());
    }
    if recorded.embeddings.len() != replayed.embeddings.len()
        || recorded.embeddings.iter().zip(&replayed.embeddings).any(|(a, b)| a.request != b.request)
    {
        return div(None, "embedding requests differ".into());
    }
    if recorded.digests.digest != replayed.digests.digest {
        return div(None, "tick digest differs".into());
    }
    if recorded.digests.full_digest != replayed.digests.full_digest {
        return div(None, "full digest differs (costs or request grouping)".into());
    }
    None
}

/// The run a header describes. Ports are left unset (embedded defaults).
/// A trace recorded under a configuration this engine hashes differently
/// gets [`engine::Error::RecordedByOlder`].
pub fn spec_from_header(h: &Header) -> Result<RunSpec> {
    let config = h.config("trace")?;
    let scenario = Scenario::from_toml(&h.scenario_source, &format!("trace header scenario ({})", h.scenario_origin))?;
    let traits = Traits::from_toml(&h.traits_source, "trace header trait table")?;
    Ok(RunSpec {
        config,
        scenario,
        traits,
        seed: h.seed,
        personas: h.personas,
        ticks: h.ticks,
        planned_ticks: None,
        budget_nano_usd: h.budget_nano_usd,
        strategy: h.strategy,
        embedder: None,
        chat: None,
        interrupt: None,
        replayed_ticks: 0,
    })
}

/// Cassette counters after a re-run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CassetteCounts {
    /// Answers served from the trace.
    pub hits: u64,
    /// Requests the trace did not hold.
    pub misses: u64,
    /// Calls made to a live provider.
    pub provider_calls: u64,
}

/// The result of a re-run.
pub struct Rerun {
    /// The run's result (its summary covers every tick, recorded or not).
    pub result: RunResult,
    /// Ticks that matched their recorded frame.
    pub ticks_matched: u32,
    /// The first divergence, if any (the re-run stopped there).
    pub divergence: Option<Divergence>,
    /// Cassette counters.
    pub cassette: CassetteCounts,
    /// The first request the cassette did not hold.
    pub first_miss: Option<String>,
}

/// Re-runs a trace. Recorded ticks are answered from the trace and compared
/// with their frames; a divergence stops the re-run. With `live`, the ticks
/// after the recorded ones run on the embedded default ports (resume);
/// without, the re-run ends at the last recorded tick and a miss is never
/// answered (replay). `on_tick` sees every tick with its recorded frame,
/// if it has one.
pub async fn rerun(
    trace: &ReadTrace,
    live: bool,
    progress: Arc<dyn Progress>,
    on_tick: impl FnMut(TickReport, Option<&TickFrame>) -> Result<()>,
) -> Result<Rerun> {
    rerun_with(trace, live, None, None, false, progress, on_tick).await
}

/// Resumes a run from its trace: the committed ticks are re-run from the
/// trace, then the rest live. With a live chat provider, `wal` is the run's
/// chat write-ahead log: answers paid for in a tick that never committed
/// are served from it, and every new answer is appended to it.
pub async fn resume(
    trace: &ReadTrace,
    wal: &std::path::Path,
    interrupt: Option<Arc<std::sync::atomic::AtomicBool>>,
    progress: Arc<dyn Progress>,
    on_tick: impl FnMut(TickReport, Option<&TickFrame>) -> Result<()>,
) -> Result<Rerun> {
    rerun_with(trace, true, Some(wal), interrupt, false, progress, on_tick).await
}

/// Replays a trace and returns the final persona states with it (for
/// commands that show state, such as `sim-cli memory`).
pub async fn replay_states(trace: &ReadTrace, progress: Arc<dyn Progress>) -> Result<Rerun> {
    rerun_with(trace, false, None, None, true, progress, |_, _| Ok(())).await
}

async fn rerun_with(
    trace: &ReadTrace,
    live: bool,
    wal: Option<&std::path::Path>,
    interrupt: Option<Arc<std::sync::atomic::AtomicBool>>,
    keep_states: bool,
    progress: Arc<dyn Progress>,
    mut on_tick: impl FnMut(TickReport, Option<&TickFrame>) -> Result<()>,
) -> Result<Rerun> {
    let mut spec = spec_from_header(&trace.header)?;
    // Live ports exist only when resuming; replay never builds one.
    let (live_embedder, live_chat) = match live {
        true => {
            let (e, c) = default_ports(&spec.config, spec.seed)?;
            (e, Some(c))
        }
        false => (None, None),
    };
    let mut paid = Vec::new();
    let live_chat = match (live_chat, wal) {
        (Some(c), Some(path)) if spec.config.raw.chat.provider != ChatProvider::Scripted => {
            paid = engine::trace::wal::read_wal(path)?.0;
            Some(Arc::new(engine::trace::wal::WalChat::open(path, c)?) as Arc<dyn ChatPort>)
        }
        (c, _) => c,
    };
    let chat = Arc::new(CassetteChat::new(&trace.ticks, live_chat).with_wal(paid));
    let embedder = Arc::new(CassetteEmbedder::new(&trace.ticks, live_embedder));
    if !live && trace.end.is_none() {
        spec.planned_ticks = Some(spec.ticks);
        spec.ticks = (trace.ticks.len() as u32).max(1);
    }
    spec.chat = Some(chat.clone() as Arc<dyn ChatPort>);
    spec.interrupt = interrupt;
    spec.replayed_ticks = trace.ticks.len() as u32;
    if let EmbeddingModel::Named(_) = spec.config.raw.embedding.model() {
        spec.embedder = Some(embedder.clone() as Arc<dyn EmbeddingPort>);
    }
    let mut matched = 0u32;
    let mut divergence = None;
    let outcome = run(spec, progress, keep_states, |report| {
        let frame = trace.ticks.get(report.tick as usize - 1);
        if let Some(frame) = frame {
            if let Some(d) = compare(frame, &report) {
                divergence = Some(d);
                return Err(Error::Diverged(report.tick));
            }
            matched += 1;
        } else if !live {
            divergence =
                Some(Divergence { tick: report.tick, persona: None, what: "the trace has no such tick".into() });
            return Err(Error::Diverged(report.tick));
        }
        on_tick(report, frame)
    })
    .await;
    let cassette = CassetteCounts {
        hits: chat.stats.hits.load(Ordering::Relaxed) + embedder.stats.hits.load(Ordering::Relaxed),
        misses: chat.stats.misses.load(Ordering::Relaxed) + embedder.stats.misses.load(Ordering::Relaxed),
        provider_calls: chat.stats.live_calls.load(Ordering::Relaxed)
            + embedder.stats.live_calls.load(Ordering::Relaxed),
    };
    let first_miss = chat.stats.first_miss().or_else(|| embedder.stats.first_miss());
    let result = match (outcome, &divergence) {
        (Ok(r), _) => r,
        (Err(Error::Observer { .. }), Some(_)) => RunResult { summary: Default::default(), final_states: Vec::new() },
        (Err(e), _) => return Err(e),
    };
    if divergence.is_none() && trace.end.is_some() && result.summary.ticks_completed as usize != trace.ticks.len() {
        divergence = Some(Divergence {
            tick: result.summary.ticks_completed,
            persona: None,
            what: format!(
                "the re-run committed {} ticks, the trace {}",
                result.summary.ticks_completed,
                trace.ticks.len()
            ),
        });
    }
    Ok(Rerun { result, ticks_matched: matched, divergence, cassette, first_miss })
}
