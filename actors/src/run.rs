//! Running a whole simulation: spawn the supervisor, the persona actors and
//! the coordinator, drive the ticks, stop at the budget, tear down.

use crate::coordinator::{CoordinatorArgs, TickReport, TurnCoordinator, TurnMsg};
use crate::error::{Error, Result};
use crate::persona::{PersonaHost, PersonaMsg};
use crate::progress::Progress;
use crate::shared::RunShared;
use crate::supervisor::{PanelSupervisor, SupervisorMsg};
use engine::chat::ChatPort;
use engine::config::{Config, EmbeddingModel};
use engine::embed::{EmbeddingPort, Strategy};
use engine::error::ActorFault;
use engine::persona::profile::draw;
use engine::persona::{PersonaState, Traits};
use engine::scenario::Scenario;
use engine::shard::Shard;
use engine::store::trace::EmbedRecorder;
use engine::summary::{EmbeddingTotals, RunSummary, StopReason, Stopped};
use engine::turn::TickDigests;
use ractor::concurrency::oneshot;
use ractor::concurrency::JoinHandle;
use ractor::{Actor, ActorRef};
use std::sync::Arc;
use std::time::Instant;

/// The most personas one run (or one shard) holds.
pub const MAX_PERSONAS: u32 = 1_000_000;
/// The largest panel, split into shards of at most [`MAX_PERSONAS`] each.
pub const MAX_PANEL: u32 = 100_000_000;
/// The most ticks a run accepts.
pub const MAX_TICKS: u32 = 100_000;

/// Everything that defines a run.
pub struct RunSpec {
    /// Resolved configuration.
    pub config: Config,
    /// Scenario.
    pub scenario: Scenario,
    /// Trait table.
    pub traits: Traits,
    /// Seed.
    pub seed: u64,
    /// Panel size, 1 to [`MAX_PERSONAS`] (to [`MAX_PANEL`] in shards).
    pub personas: u32,
    /// Run only this shard's personas ([`Shard::personas`]), with its
    /// share of the budget; the caller gives the ports their share of the
    /// rate limits ([`Shard::share_rates`]).
    pub shard: Option<Shard>,
    /// Ticks, 1 to [`MAX_TICKS`].
    pub ticks: u32,
    /// The length the run was planned with, when only part of it runs (a
    /// replay of an unfinished trace); decides the session boundary.
    pub planned_ticks: Option<u32>,
    /// Stop at the first tick boundary where recorded spend reaches this.
    pub budget_nano_usd: Option<u64>,
    /// How embedding stages submit texts.
    pub strategy: Strategy,
    /// Embedding port; `None` uses the embedded local embedder (or no
    /// embeddings at all when the config's model is `none`).
    pub embedder: Option<Arc<dyn EmbeddingPort>>,
    /// Chat port; `None` uses the embedded scripted model.
    pub chat: Option<Arc<dyn ChatPort>>,
    /// Set (by a Ctrl-C handler, say) to stop at the next tick boundary;
    /// the run stays resumable.
    pub interrupt: Option<Arc<std::sync::atomic::AtomicBool>>,
    /// The first ticks whose answers come from a trace (a resume re-runs
    /// them): the circuit breaker does not judge them again, so a run it
    /// stopped can be resumed once the cause is fixed.
    pub replayed_ticks: u32,
}

impl RunSpec {
    /// A spec on the embedded defaults.
    pub fn defaults(seed: u64, personas: u32, ticks: u32) -> RunSpec {
        RunSpec {
            config: Config::defaults(),
            scenario: Scenario::builtin("default").expect("the default scenario is built in; this is a bug"),
            traits: Traits::builtin(),
            seed,
            personas,
            shard: None,
            ticks,
            planned_ticks: None,
            budget_nano_usd: None,
            strategy: Strategy::Batched,
            embedder: None,
            chat: None,
            interrupt: None,
            replayed_ticks: 0,
        }
    }
}

/// What a finished run hands back.
pub struct RunResult {
    /// The summary (timings and `out_dir` filled by the caller as needed).
    pub summary: RunSummary,
    /// Final state of every persona whose actor is alive, when asked for.
    pub final_states: Vec<Option<PersonaState>>,
}

/// An embedding port (if any) and a chat port.
pub type Ports = (Option<Arc<dyn EmbeddingPort>>, Arc<dyn ChatPort>);

/// The default ports for a config: the inference client over the
/// configured embedding provider (none when the embedding model is `none`)
/// and the configured chat provider (the scripted persona model by
/// default). Fails when a cache file cannot be read or a live provider's
/// key is missing.
pub fn default_ports(cfg: &Config, seed: u64) -> Result<Ports> {
    let chat = providers::build_chat(cfg, seed)?;
    if cfg.raw.embedding.model() == EmbeddingModel::Disabled {
        return Ok((None, chat));
    }
    Ok((Some(Arc::new(providers::build_embedder(cfg, seed)?)), chat))
}

/// Runs a simulation. `on_tick` receives every committed tick in order (to
/// write it out); an error from it stops the run. When `keep_states` is set
/// the final persona states are returned. Every actor the run started is
/// stopped and awaited before it returns, whatever the exit path.
pub async fn run(
    spec: RunSpec,
    progress: Arc<dyn Progress>,
    keep_states: bool,
    mut on_tick: impl FnMut(TickReport) -> Result<()>,
) -> Result<RunResult> {
    check_spec(&spec)?;
    let started = Instant::now();
    let (shared, genesis, mut summary) = set_up(spec)?;
    progress.watch_chat(Arc::clone(&shared.run.chat));
    let mut panel = Panel::spawn(&shared, progress, genesis).await?;
    let coordinator = panel.coordinator().expect("Panel::spawn starts the coordinator or fails; this is a bug");
    let outcome = drive(coordinator, &mut summary, &shared, &mut on_tick).await;
    let mut final_states = Vec::new();
    if let (Ok(()), true, Some(coordinator)) = (&outcome, keep_states, panel.coordinator()) {
        for p in shared.run.range.clone() {
            let (tx, rx) = oneshot();
            if coordinator.cast(TurnMsg::Snapshot { persona: p, reply: tx.into() }).is_err() {
                break;
            }
            final_states.push(rx.await.ok().flatten());
        }
    }
    panel.shutdown().await;
    outcome?;
    if let Some(port) = &shared.run.embedder {
        port.finish()?;
        summary.embedding.truncated_texts = port.truncated_texts();
    }
    summary.chat.endpoints = shared.run.chat.endpoints();
    summary.chat.response_cache =
        shared.run.chat.cache_report().map(|c| c.with_bill(summary.cost.provider_total_nano_usd));
    summary.timings_ms.total = started.elapsed().as_secs_f64() * 1000.0;
    Ok(RunResult { summary, final_states })
}

fn check_spec(spec: &RunSpec) -> Result<()> {
    let held = spec.shard.map_or(spec.personas, |s| s.personas(spec.personas).len() as u32);
    if spec.personas == 0 || spec.personas > MAX_PANEL || held > MAX_PERSONAS {
        let cause = match spec.shard {
            None => format!(
                "must be between 1 and {MAX_PERSONAS} (a larger panel, up to {MAX_PANEL}, runs in shards of at most {MAX_PERSONAS}), got {}",
                spec.personas
            ),
            Some(s) => format!(
                "a panel of {} in {} shards has {held} personas in a shard; a panel has at most {MAX_PANEL}, a shard at most {MAX_PERSONAS}",
                spec.personas, s.count
            ),
        };
        return Err(Error::from(ActorFault::invalid("personas", cause)));
    }
    if let Some(panel) = &spec.config.raw.panel {
        if panel.rows.len() != spec.personas as usize {
            return Err(Error::from(ActorFault::invalid(
                "personas",
                format!(
                    "the panel from {} has {} rows, one per persona, but the run asks for {} personas",
                    panel.source,
                    panel.rows.len(),
                    spec.personas
                ),
            )));
        }
    }
    if let Some(s) = spec.shard.filter(|s| s.count > spec.personas) {
        return Err(Error::from(ActorFault::invalid(
            "shard",
            format!("{} shards for {} personas: every shard needs at least one persona", s.count, spec.personas),
        )));
    }
    if spec.ticks == 0 || spec.ticks > MAX_TICKS {
        return Err(Error::from(ActorFault::invalid(
            "ticks",
            format!("must be between 1 and {MAX_TICKS}, got {}", spec.ticks),
        )));
    }
    Ok(())
}

/// What a run shares with its actors, and what only the driver reads.
struct Setup {
    run: Arc<RunShared>,
    ticks_asked: u32,
    budget: Option<u64>,
    interrupt: Option<Arc<std::sync::atomic::AtomicBool>>,
    replayed_ticks: u32,
}

/// What the summary's notes say of `[answers]`: the mode the closed
/// questions were answered in, and each probe calibrated.
fn answer_notes(cfg: &engine::config::Config, notes: &mut Vec<String>) {
    let mode = cfg.raw.answers.mode;
    if mode != engine::config::AnswerMode::Sample {
        let what = match mode {
            engine::config::AnswerMode::Verbalized => "the shares of people like it that it gave for each option",
            engine::config::AnswerMode::Sample | engine::config::AnswerMode::Probabilities => {
                "the model's probabilities over the options"
            }
        };
        notes.push(format!(
            "answers in mode \"{}\": each persona's purchase intent and probe answers are {what} (in the trace); \
             `mixture` is the panel's distribution, the histogram counts each persona's rounded mean, and probes \
             generated no reason",
            mode.as_str()
        ));
    }
    for c in &cfg.raw.answers.calibrated {
        notes.push(format!(
            "probe {} calibrated as question {} of a validation: temperature {:.3}, the model's weight {:.3} in its \
             blend with the people's marginal (the model's own distribution stays in the trace)",
            c.probe, c.question, c.temperature, c.weight
        ));
    }
}

/// The ports (default ones only for what the caller did not supply: a
/// replay never constructs a live provider, nor reads its key), the shared
/// inputs, the genesis digests and the empty summary.
fn set_up(spec: RunSpec) -> Result<(Setup, TickDigests, RunSummary)> {
    let cfg = &spec.config;
    let (embedder, chat) = match (spec.embedder, spec.chat) {
        (Some(e), Some(c)) => (Some(e), c),
        (e, c) => {
            let shared_rates = spec.shard.map(|s| s.share_rates(cfg));
            let cfg = shared_rates.as_ref().unwrap_or(cfg);
            let (default_embedder, default_chat) = default_ports(cfg, spec.seed)?;
            (e.or(default_embedder), c.unwrap_or(default_chat))
        }
    };
    let mut genesis = TickDigests::genesis(cfg, &spec.scenario.source_hash, spec.seed, spec.personas);
    let range = spec.shard.map_or(0..spec.personas, |s| s.personas(spec.personas));
    if let Some(s) = spec.shard {
        genesis = s.genesis(genesis);
    }
    let mut summary = RunSummary {
        digest: genesis.digest,
        full_digest: genesis.full_digest,
        seed: spec.seed,
        scenario: spec.scenario.name.clone(),
        personas: range.len() as u32,
        shard: spec.shard,
        ticks: spec.ticks,
        embedding: EmbeddingTotals { strategy: spec.strategy, ..Default::default() },
        ..Default::default()
    };
    for p in spec.scenario.probes.iter().filter(|p| !p.options.is_empty()) {
        summary.probes.insert(p.id.clone(), engine::summary::Distribution::with_points(p.points()));
    }
    summary.cost.price_label = cfg.raw.prices.label.clone();
    summary.cost.embedding_price_label = cfg.embedding_price_label.as_str().into();
    summary.cost.chat_price_label = cfg.chat_price_label.as_str().into();
    summary.cost.chat_cached_input_price = cfg.raw.prices.cached_input_description(&cfg.raw.chat.model);
    summary.cost.allocations_are_estimates = true;
    summary.intent_method = cfg.raw.intent.method;
    let consolidation = &cfg.raw.consolidation;
    summary.consolidation.dry_run = consolidation.dry_run;
    summary.consolidation.automatic = consolidation.enabled && !consolidation.dry_run;
    let ran = |kernel: engine::config::KernelLevel| match kernel {
        engine::config::KernelLevel::Auto => providers::auto_kernel_level().map(str::to_string),
        recorded @ (engine::config::KernelLevel::Avx2 | engine::config::KernelLevel::Portable) => {
            Some(recorded.name().to_string())
        }
    };
    if cfg.raw.chat.provider == engine::config::ChatProvider::Gguf {
        summary.gguf_kernel = ran(cfg.raw.chat.gguf.kernel);
    }
    if cfg.raw.embedding.provider == engine::config::Provider::Minilm {
        summary.minilm_kernel = ran(cfg.raw.embedding.minilm.kernel);
    }
    let semantic =
        matches!(cfg.raw.embedding.provider, engine::config::Provider::Minilm | engine::config::Provider::Openai);
    if semantic && !cfg.raw.intent.ssr() {
        summary.notes.push(format!(
            "{} is a neural embedder: set [intent] method = \"both\" to measure purchase intent by semantic similarity rating (SSR) beside the direct rating",
            cfg.raw.embedding.model
        ));
    }
    answer_notes(cfg, &mut summary.notes);
    let recorder = embedder.map(|e| Arc::new(EmbedRecorder::new(e)));
    let session_end_tick = match spec.config.raw.consolidation.session_end_tick {
        0 => spec.planned_ticks.unwrap_or(spec.ticks),
        t => t,
    };
    let run = Arc::new(RunShared {
        config: spec.config,
        scenario: spec.scenario,
        traits: spec.traits,
        seed: spec.seed,
        personas: spec.personas,
        range,
        session_end_tick,
        embedder: recorder.clone().map(|r| r as Arc<dyn EmbeddingPort>),
        recorder,
        chat,
        strategy: spec.strategy,
    });
    let setup = Setup {
        run,
        ticks_asked: spec.ticks,
        budget: match spec.shard {
            Some(s) => spec.budget_nano_usd.map(|b| s.share(b)),
            None => spec.budget_nano_usd,
        },
        interrupt: spec.interrupt.clone(),
        replayed_ticks: spec.replayed_ticks,
    };
    Ok((setup, genesis, summary))
}

/// Every actor of a run: the supervisor, the persona hosts under it and
/// the coordinator. [`Panel::shutdown`] stops them and awaits their tasks;
/// if the panel is dropped without it (an early return, a cancelled run),
/// `Drop` still stops every actor, so none outlives its run.
struct Panel {
    supervisor: Option<(ActorRef<SupervisorMsg>, JoinHandle<()>)>,
    hosts: Vec<(ActorRef<PersonaMsg>, JoinHandle<()>)>,
    coordinator: Option<(ActorRef<TurnMsg>, JoinHandle<()>)>,
}

/// Persona hosts per core: enough batches in flight to keep every worker
/// thread busy while one waits.
const HOSTS_PER_CORE: usize = 4;

impl Panel {
    /// Starts the supervisor, the persona hosts and the coordinator, which
    /// holds every persona's starting state. A failed spawn stops whatever
    /// started.
    async fn spawn(shared: &Setup, progress: Arc<dyn Progress>, genesis: TickDigests) -> Result<Panel> {
        let shared = &shared.run;
        let supervisor = Actor::spawn(None, PanelSupervisor, ())
            .await
            .map_err(|e| Error::from(ActorFault::spawn("supervisor", e)))?;
        let mut panel = Panel { supervisor: Some(supervisor), hosts: Vec::new(), coordinator: None };
        let range = shared.range.clone();
        let mut interests = Vec::with_capacity(range.len());
        let mut personas = Vec::with_capacity(range.len());
        for id in range.clone() {
            if (id - range.start).is_multiple_of(65_536) {
                progress.stage(0, "drawing personas", u64::from(id - range.start), range.len() as u64);
            }
            let profile = draw(&shared.config, &shared.traits, shared.seed, id)
                .expect("check_spec matched the panel's rows to the personas; this is a bug");
            interests.push(profile.interests.clone());
            personas.push(Box::new(PersonaState::new(profile)));
        }
        let window = shared.config.raw.run.max_active_personas as usize;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let hosts = (cores * HOSTS_PER_CORE).min(window).min(personas.len()).max(1);
        let cell = panel.supervisor.as_ref().map(|(s, _)| s.get_cell()).expect("the supervisor was just set");
        for h in 0..hosts {
            let host = PersonaHost { shared: Arc::clone(shared) };
            match Actor::spawn_linked(None, host, (), cell.clone()).await {
                Ok(actor) => panel.hosts.push(actor),
                Err(e) => {
                    panel.shutdown().await;
                    return Err(Error::from(ActorFault::spawn(format!("persona host {h}"), e)));
                }
            }
        }
        let hosts = panel.hosts.iter().map(|(a, _)| a.clone()).collect();
        let args = CoordinatorArgs { first: range.start, personas, hosts, window, interests, genesis };
        match Actor::spawn(None, TurnCoordinator { shared: Arc::clone(shared), progress }, args).await {
            Ok(c) => panel.coordinator = Some(c),
            Err(e) => {
                panel.shutdown().await;
                return Err(Error::from(ActorFault::spawn("coordinator", e)));
            }
        }
        Ok(panel)
    }

    fn coordinator(&self) -> Option<&ActorRef<TurnMsg>> {
        self.coordinator.as_ref().map(|(c, _)| c)
    }

    /// Stops the coordinator, then the hosts, then the supervisor, and
    /// waits for each task to end.
    async fn shutdown(&mut self) {
        if let Some((c, h)) = self.coordinator.take() {
            c.stop(None);
            let _ = h.await;
        }
        let hosts = std::mem::take(&mut self.hosts);
        for (p, _) in &hosts {
            p.stop(None);
        }
        for (_, h) in hosts {
            let _ = h.await;
        }
        if let Some((s, h)) = self.supervisor.take() {
            s.stop(None);
            let _ = h.await;
        }
    }
}

impl Drop for Panel {
    fn drop(&mut self) {
        if let Some((c, _)) = &self.coordinator {
            c.stop(None);
        }
        for (p, _) in &self.hosts {
            p.stop(None);
        }
        if let Some((s, _)) = &self.supervisor {
            s.stop(None);
        }
    }
}

async fn drive(
    coordinator: &ActorRef<TurnMsg>,
    summary: &mut RunSummary,
    shared: &Setup,
    on_tick: &mut impl FnMut(TickReport) -> Result<()>,
) -> Result<()> {
    let (ticks, budget) = (shared.ticks_asked, shared.budget);
    for tick in 1..=ticks {
        let (tx, rx) = oneshot();
        coordinator
            .cast(TurnMsg::RunTick { tick, reply: tx.into() })
            .map_err(|e| Error::Coordinator { tick, cause: e.to_string() })?;
        let report = rx.await.map_err(|_| Error::Coordinator { tick, cause: "it stopped without replying".into() })?;
        summary.add_tick(
            &report.outcomes,
            (&report.retrieval.0, &report.retrieval.1),
            (&report.memory.0, &report.memory.1),
        );
        summary.add_consolidation(&report.consolidation);
        summary.digest = report.digests.digest;
        summary.full_digest = report.digests.full_digest;
        summary.timings_ms.preparation += report.timings.preparation;
        summary.timings_ms.chat += report.timings.chat;
        summary.timings_ms.memory_finalisation += report.timings.memory_finalisation;
        let tripped = if tick > shared.replayed_ticks { engine::summary::breaker(&report.outcomes) } else { None };
        on_tick(report).map_err(|e| {
            // A failed trace write names its own tick (the writer runs
            // one tick behind the loop).
            if matches!(e, Error::TraceWrite { .. }) {
                e
            } else {
                Error::Observer { tick, source: Box::new(e) }
            }
        })?;
        let spent = summary.cost.provider_total_nano_usd;
        let stop = |reason, detail: String| Stopped {
            reason,
            detail,
            after_tick: tick,
            spent_nano_usd: spent,
            budget_nano_usd: budget.unwrap_or(0),
        };
        if let (Some(detail), true) = (tripped, tick < ticks) {
            tracing::warn!(tick, "{detail}; stopping at the tick boundary");
            summary.stopped = Some(stop(StopReason::PermanentErrors, detail));
            break;
        }
        if shared.interrupt.as_ref().is_some_and(|i| i.load(std::sync::atomic::Ordering::Relaxed)) && tick < ticks {
            summary.stopped = Some(stop(StopReason::Interrupted, "interrupted".into()));
            break;
        }
        if let Some(b) = budget {
            let spent = summary.cost.provider_total_nano_usd;
            if spent >= b && tick < ticks {
                tracing::info!(tick, spent, budget = b, "budget reached; stopping at the tick boundary");
                summary.stopped = Some(stop(StopReason::Budget, "budget reached".into()));
                break;
            }
        }
    }
    Ok(())
}
