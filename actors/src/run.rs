//! Running a whole simulation: spawn the supervisor, the persona actors and
//! the coordinator, drive the ticks, stop at the budget, tear down.

use crate::coordinator::{CoordinatorArgs, TickReport, TurnCoordinator, TurnMsg};
use crate::error::{Error, Result};
use crate::persona::PersonaActor;
use crate::progress::Progress;
use crate::shared::RunShared;
use crate::supervisor::PanelSupervisor;
use engine::chat::{ChatPort, ScriptedPersonaModel};
use engine::config::Config;
use engine::embed::{EmbeddingPort, Strategy};
use engine::persona::{generate, PersonaState, Traits};
use engine::report::{EmbeddingTotals, RunSummary, Stopped};
use engine::scenario::Scenario;
use engine::trace::EmbedRecorder;
use engine::turn::TickDigests;
use futures::StreamExt;
use ractor::concurrency::oneshot;
use ractor::{Actor, ActorRef};
use std::sync::Arc;
use std::time::Instant;

/// The largest panel a run accepts.
pub const MAX_PERSONAS: u32 = 1_000_000;
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
    /// Panel size, 1 to [`MAX_PERSONAS`].
    pub personas: u32,
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
            ticks,
            planned_ticks: None,
            budget_nano_usd: None,
            strategy: Strategy::Batched,
            embedder: None,
            chat: None,
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

/// The model an embedding port name stands for.
pub const NO_EMBEDDINGS: &str = "none";

/// An embedding port (if any) and a chat port.
pub type Ports = (Option<Arc<dyn EmbeddingPort>>, Arc<dyn ChatPort>);

/// The default ports for a config: the inference client over the
/// configured embedding provider (none when the embedding model is `none`)
/// and the scripted persona model. Fails when a cache file cannot be read.
pub fn default_ports(cfg: &Config, seed: u64) -> Result<Ports> {
    let chat =
        Arc::new(ScriptedPersonaModel { seed, malformed_rate: cfg.raw.chat.malformed_rate, price: cfg.chat_price });
    let e = &cfg.raw.embedding;
    if e.model == NO_EMBEDDINGS {
        return Ok((None, chat));
    }
    Ok((Some(Arc::new(providers::build_embedder(cfg, seed)?)), chat))
}

/// Runs a simulation. `on_tick` receives every committed tick in order (to
/// write it out); an error from it stops the run. When `keep_states` is set
/// the final persona states are returned.
pub async fn run(
    spec: RunSpec,
    progress: Arc<dyn Progress>,
    keep_states: bool,
    mut on_tick: impl FnMut(TickReport) -> std::result::Result<(), String>,
) -> Result<RunResult> {
    if spec.personas == 0 || spec.personas > MAX_PERSONAS {
        return Err(Error::InvalidInput {
            what: "personas",
            cause: format!("must be between 1 and {MAX_PERSONAS}, got {}", spec.personas),
        });
    }
    if spec.ticks == 0 || spec.ticks > MAX_TICKS {
        return Err(Error::InvalidInput {
            what: "ticks",
            cause: format!("must be between 1 and {MAX_TICKS}, got {}", spec.ticks),
        });
    }
    let started = Instant::now();
    let cfg = &spec.config;
    // Default ports are built only for what the caller did not supply: a
    // replay never constructs a live provider (nor reads its key).
    let (embedder, chat) = match (spec.embedder, spec.chat) {
        (Some(e), Some(c)) => (Some(e), c),
        (e, c) => {
            let (default_embedder, default_chat) = default_ports(cfg, spec.seed)?;
            (e.or(default_embedder), c.unwrap_or(default_chat))
        }
    };
    let genesis = TickDigests::genesis(cfg, &spec.scenario.source_hash, spec.seed, spec.personas);
    let mut summary = RunSummary {
        digest: genesis.digest,
        full_digest: genesis.full_digest,
        seed: spec.seed,
        scenario: spec.scenario.name.clone(),
        personas: spec.personas,
        ticks: spec.ticks,
        embedding: EmbeddingTotals { strategy: spec.strategy, ..Default::default() },
        ..Default::default()
    };
    summary.cost.price_label = cfg.raw.prices.label.clone();
    summary.cost.allocations_are_estimates = true;
    let recorder = embedder.map(|e| Arc::new(EmbedRecorder::new(e)));
    let session_end_tick = match spec.config.raw.consolidation.session_end_tick {
        0 => spec.planned_ticks.unwrap_or(spec.ticks),
        t => t,
    };
    let shared = Arc::new(RunShared {
        config: spec.config,
        scenario: spec.scenario,
        traits: spec.traits,
        seed: spec.seed,
        personas: spec.personas,
        session_end_tick,
        embedder: recorder.clone().map(|r| r as Arc<dyn EmbeddingPort>),
        recorder,
        chat,
        strategy: spec.strategy,
    });

    let (supervisor, _) = Actor::spawn(None, PanelSupervisor, ())
        .await
        .map_err(|e| Error::Spawn { actor: "supervisor".into(), cause: e.to_string() })?;
    // Persona actors start concurrently (a sequential spawn waits for each
    // actor's start-up in turn); `buffered` keeps them in persona order.
    let mut interests = Vec::with_capacity(spec.personas as usize);
    let mut starting = Vec::with_capacity(spec.personas as usize);
    for id in 0..spec.personas {
        let profile = generate(&shared.traits, shared.seed, id);
        interests.push(profile.interests.clone());
        starting.push((id, profile));
    }
    let cell = supervisor.get_cell();
    let mut spawned = futures::stream::iter(starting.into_iter().map(|(id, profile)| {
        let actor = PersonaActor { shared: Arc::clone(&shared) };
        let cell = cell.clone();
        async move { (id, Actor::spawn_linked(None, actor, profile, cell).await) }
    }))
    .buffered(256);
    let mut personas = Vec::with_capacity(spec.personas as usize);
    while let Some((id, started)) = spawned.next().await {
        if id % 4096 == 0 {
            progress.stage(0, "starting personas", u64::from(id), u64::from(spec.personas));
        }
        let (actor, _) =
            started.map_err(|e| Error::Spawn { actor: engine::persona::profile::label(id), cause: e.to_string() })?;
        personas.push(actor);
    }
    drop(spawned);
    let coordinator_args = CoordinatorArgs { personas, interests, genesis };
    let (coordinator, _) =
        Actor::spawn(None, TurnCoordinator { shared: Arc::clone(&shared), progress }, coordinator_args)
            .await
            .map_err(|e| Error::Spawn { actor: "coordinator".into(), cause: e.to_string() })?;

    let outcome = drive(&coordinator, &mut summary, spec.ticks, spec.budget_nano_usd, &mut on_tick).await;
    let mut final_states = Vec::new();
    if outcome.is_ok() && keep_states {
        for p in 0..shared.personas {
            let (tx, rx) = oneshot();
            if coordinator.cast(TurnMsg::Snapshot { persona: p, reply: tx.into() }).is_err() {
                break;
            }
            final_states.push(rx.await.ok().flatten());
        }
    }
    coordinator.stop(None);
    supervisor.stop_children(None);
    supervisor.stop(None);
    outcome?;
    if let Some(port) = &shared.embedder {
        port.finish()?;
    }
    summary.timings_ms.total = started.elapsed().as_secs_f64() * 1000.0;
    Ok(RunResult { summary, final_states })
}

async fn drive(
    coordinator: &ActorRef<TurnMsg>,
    summary: &mut RunSummary,
    ticks: u32,
    budget: Option<u64>,
    on_tick: &mut impl FnMut(TickReport) -> std::result::Result<(), String>,
) -> Result<()> {
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
        on_tick(report).map_err(|cause| Error::Observer { tick, cause })?;
        if let Some(b) = budget {
            let spent = summary.cost.provider_total_nano_usd;
            if spent >= b && tick < ticks {
                tracing::info!(tick, spent, budget = b, "budget reached; stopping at the tick boundary");
                summary.stopped = Some(Stopped {
                    reason: "budget".into(),
                    after_tick: tick,
                    spent_nano_usd: spent,
                    budget_nano_usd: b,
                });
                break;
            }
        }
    }
    Ok(())
}
