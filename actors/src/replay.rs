//! Re-running a recorded run: replay (every answer from the trace) and
//! resume (the recorded ticks from the trace, the rest live).

use crate::coordinator::TickReport;
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::run::{default_ports, run, RunResult, RunSpec};
use engine::chat::ChatPort;
use engine::config::{ChatProvider, EmbeddingModel};
use engine::embed::EmbeddingPort;
use engine::error::ActorFault;
use engine::persona::profile::label;
use engine::persona::Traits;
use engine::scenario::Scenario;
use engine::store::trace::{CassetteChat, CassetteEmbedder, Header, ReadTrace, Split, TickFrame};
use engine::turn::Outcome;
use std::sync::atomic::Ordering;
use std::sync::Arc;

mod merged;
pub use merged::shard_view;

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

/// What two ticks are compared on: a recorded frame or a re-run's report.
pub struct TickView<'a> {
    /// Tick number.
    pub tick: u32,
    /// One outcome per job, in job order.
    pub outcomes: &'a [Outcome],
    /// Per-persona state digests.
    pub persona_digests: &'a [Option<engine::digest::Digest>],
    /// Memories created.
    pub memories: &'a [engine::store::trace::MemoryEvent],
    /// Embedding invocations.
    pub embeddings: &'a [engine::store::trace::EmbedExchange],
    /// The tick's digests.
    pub digests: &'a engine::turn::TickDigests,
}

impl<'a> From<&'a TickFrame> for TickView<'a> {
    fn from(t: &'a TickFrame) -> Self {
        TickView {
            tick: t.tick,
            outcomes: &t.outcomes,
            persona_digests: &t.persona_digests,
            memories: &t.memories,
            embeddings: &t.embeddings,
            digests: &t.digests,
        }
    }
}

impl<'a> From<&'a TickReport> for TickView<'a> {
    fn from(t: &'a TickReport) -> Self {
        TickView {
            tick: t.tick,
            outcomes: &t.outcomes,
            persona_digests: &t.persona_digests,
            memories: &t.memories,
            embeddings: &t.embeddings,
            digests: &t.digests,
        }
    }
}

/// Compares a re-run tick with its recorded frame.
pub fn compare(recorded: &TickFrame, replayed: &TickReport) -> Option<Divergence> {
    compare_ticks(recorded.into(), replayed.into(), ("recorded", "replayed"))
}

/// The first difference between two ticks, `names` saying what each is
/// ("recorded" and "replayed", say), earliest stage first.
pub fn compare_ticks(a: TickView<'_>, b: TickView<'_>, names: (&str, &str)) -> Option<Divergence> {
    let tick = a.tick;
    let div = |persona: Option<u32>, what: String| Some(Divergence { tick, persona, what });
    let (an, bn) = names;
    if a.outcomes.len() != b.outcomes.len() {
        return div(None, format!("{} jobs {an}, {} {bn}", a.outcomes.len(), b.outcomes.len()));
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
                && a.chat_calls
                    .iter()
                    .map(|c| (&c.request, &c.reply))
                    .eq(b.chat_calls.iter().map(|c| (&c.request, &c.reply)))
        },
        // Equal values need no hashing (a replay's outcomes are equal to
        // their frame's); unequal ones are the same when the digests see
        // no difference (a chat attempt's latency, say).
        |a, b| a == b || a.digests_as(b),
    ];
    for same in stages {
        if let Some((x, y)) = a.outcomes.iter().zip(b.outcomes).find(|(x, y)| !same(x, y)) {
            let d: Vec<&str> = x.differences(y).iter().map(|f| f.name()).collect();
            let d = if d.is_empty() { "a value the digests do not cover".to_string() } else { d.join(", ") };
            return div(Some(x.persona), format!("job {} ({}) differs in: {d}", x.position, x.stimulus));
        }
    }
    for (p, (x, y)) in a.persona_digests.iter().zip(b.persona_digests).enumerate() {
        if x != y {
            let show = |d: &Option<engine::digest::Digest>| d.map_or("none".to_string(), |d| d.hex()[..16].to_string());
            return div(Some(p as u32), format!("state digest differs: {an} {}, {bn} {}", show(x), show(y)));
        }
    }
    if a.memories != b.memories {
        return div(None, "memory events differ".into());
    }
    if a.embeddings.len() != b.embeddings.len()
        || a.embeddings.iter().zip(b.embeddings).any(|(x, y)| x.request != y.request)
    {
        return div(None, "embedding requests differ".into());
    }
    if a.digests.digest != b.digests.digest {
        return div(None, "tick digest differs".into());
    }
    if a.digests.full_digest != b.digests.full_digest {
        return div(None, "full digest differs (costs or request grouping)".into());
    }
    None
}

/// The first difference between two recorded runs of one configuration
/// (the trace `a` and the trace `b`, called `names` in the message), tick
/// by tick: `None` when every committed tick and the end agree. Reads both
/// traces a tick at a time.
pub fn first_divergence(a: &std::path::Path, b: &std::path::Path, names: (&str, &str)) -> Result<Option<Divergence>> {
    use engine::store::trace::file::open_records;
    use engine::store::trace::Record;
    let (mut ra, mut rb) = (open_records(a)?, open_records(b)?);
    let mut last = 0;
    loop {
        match (ra.next_record()?, rb.next_record()?) {
            (None, None) => return Ok(None),
            (Some(Record::Header(x)), Some(Record::Header(y))) => {
                let same = (x.config_hash, x.seed, x.personas, x.ticks, &x.scenario_hash)
                    == (y.config_hash, y.seed, y.personas, y.ticks, &y.scenario_hash);
                if !same {
                    let what = "the headers differ: not runs of one configuration, seed and panel".into();
                    return Ok(Some(Divergence { tick: 0, persona: None, what }));
                }
            }
            (Some(Record::Split(x)), Some(Record::Split(y))) if x == y => {}
            (Some(Record::Tick(x)), Some(Record::Tick(y))) => {
                last = x.tick;
                if let Some(d) = compare_ticks((&*x).into(), (&*y).into(), names) {
                    return Ok(Some(d));
                }
            }
            (Some(Record::End(x)), Some(Record::End(y))) => {
                if x != y {
                    return Ok(Some(Divergence {
                        tick: last,
                        persona: None,
                        what: "the runs ended differently".into(),
                    }));
                }
            }
            (x, y) => {
                let name = |r: &Option<Record>| match r {
                    None => "nothing more".to_string(),
                    Some(Record::Tick(t)) => format!("tick {}", t.tick),
                    Some(Record::End(_)) => "the end of the run".to_string(),
                    Some(_) => "another record".to_string(),
                };
                let what = format!(
                    "after tick {last}, the {} run has {}, the {} run {}",
                    names.0,
                    name(&x),
                    names.1,
                    name(&y)
                );
                return Ok(Some(Divergence { tick: last + 1, persona: None, what }));
            }
        }
    }
}

/// The run a header describes. Ports are left unset (embedded defaults).
/// A trace recorded under a configuration this engine hashes differently
/// gets [`engine::Error::RecordedByOlder`]. The local models' kernel
/// levels the header records are put back to `auto`: a model built from
/// the spec (a resume, `memory` commands) computes at this machine's
/// level, which gives the same bits (the header keeps the recorded one
/// for `inspect`).
pub fn spec_from_header(h: &Header) -> Result<RunSpec> {
    let mut config = h.config("trace")?;
    config.raw.chat.gguf.kernel = engine::config::KernelLevel::Auto;
    config.raw.embedding.minilm.kernel = engine::config::KernelLevel::Auto;
    let scenario = Scenario::from_toml(&h.scenario_source, &format!("trace header scenario ({})", h.scenario_origin))?;
    let traits = Traits::from_toml(&h.traits_source, "trace header trait table")?;
    Ok(RunSpec {
        config,
        scenario,
        traits,
        seed: h.seed,
        personas: h.personas,
        shard: None,
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
    rerun_with(trace, How { live, ..How::default() }, progress, on_tick).await
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
    rerun_with(trace, How { live: true, wal: Some(wal), interrupt, keep_states: false }, progress, on_tick).await
}

/// Replays a trace and returns the final persona states with it (for
/// commands that show state, such as `sim-cli memory`).
pub async fn replay_states(trace: &ReadTrace, progress: Arc<dyn Progress>) -> Result<Rerun> {
    rerun_with(trace, How { keep_states: true, ..How::default() }, progress, |_, _| Ok(())).await
}

/// How a trace is re-run.
#[derive(Default)]
pub(crate) struct How<'a> {
    /// Ticks after the recorded ones run on live ports (resume).
    live: bool,
    /// The run's chat write-ahead log, when resuming a live chat run.
    wal: Option<&'a std::path::Path>,
    /// Stops the run at the next tick boundary when set.
    interrupt: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// Return the final persona states.
    keep_states: bool,
}

/// Re-runs `trace` as `how` says. A merged trace is re-run shard by shard
/// (replay only; `on_tick` then sees nothing, as no tick of the merged run
/// is re-run whole).
async fn rerun_with(
    trace: &ReadTrace,
    how: How<'_>,
    progress: Arc<dyn Progress>,
    on_tick: impl FnMut(TickReport, Option<&TickFrame>) -> Result<()>,
) -> Result<Rerun> {
    match (&trace.split, how.live) {
        (Some(Split::Merged { shards }), false) => {
            merged::rerun_merged(trace, *shards, how.keep_states, progress).await
        }
        (Some(Split::Merged { .. }), true) => Err(Error::from(ActorFault::invalid(
            "run",
            "a merged run cannot be resumed: resume its shards, then merge them again",
        ))),
        _ => rerun_one(trace, how, progress, on_tick).await,
    }
}

/// [`rerun_with`] for the trace of a whole panel or of one shard.
pub(crate) async fn rerun_one(
    trace: &ReadTrace,
    how: How<'_>,
    progress: Arc<dyn Progress>,
    mut on_tick: impl FnMut(TickReport, Option<&TickFrame>) -> Result<()>,
) -> Result<Rerun> {
    let How { live, wal, interrupt, keep_states } = how;
    let mut spec = spec_from_header(&trace.header)?;
    if let Some(Split::Shard(s)) = &trace.split {
        spec.shard = Some(*s);
    }
    // Live ports exist only when resuming; replay never builds one. A
    // shard's get its share of the rate limits.
    let (live_embedder, live_chat) = match live {
        true => {
            let config = spec.shard.map_or_else(|| spec.config.clone(), |s| s.share_rates(&spec.config));
            let (e, c) = default_ports(&config, spec.seed)?;
            (e, Some(c))
        }
        false => (None, None),
    };
    let mut paid = Vec::new();
    let live_chat = match (live_chat, wal) {
        (Some(c), Some(path)) if spec.config.raw.chat.provider != ChatProvider::Scripted => {
            paid = engine::store::trace::wal::read_wal(path)?.0;
            Some(Arc::new(engine::store::trace::wal::WalChat::open(path, c)?) as Arc<dyn ChatPort>)
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
