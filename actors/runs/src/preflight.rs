//! Before a live run: one probe request that checks the endpoint, the key,
//! the model and `response_format` before any persona is charged; a pilot
//! of the run's first jobs, whose answers the run then reuses; and from
//! them an estimate of the whole run, as a range with its assumptions.

use crate::error::{Error, Result};
use actors::progress::Progress;
use engine::chat::{ChatPort, ChatPurpose, ChatRequest};
use engine::clock::Clock;
use engine::config::{AnswerMode, ChatMode, ChatProvider, Config};
use engine::cost::{estimate_tokens, Spend};
pub use engine::estimate::Estimate;
use engine::estimate::{Calls, Observed, PilotReport, Span};
use engine::persona::profile::Profile;
use engine::persona::{PersonaState, Traits};
use engine::scenario::Scenario;
use engine::store::trace::cassette::CassetteChat;
use engine::turn::{converse, prepare, ChatCallRecord, TickContext};
use std::cell::{Cell, RefCell};
use std::ops::Range;
use std::sync::Arc;

/// The marker of the probe request's prompt (tests tell it from real calls).
pub const PROBE_MARKER: &str = "[connection check]";

/// The pilot's default size: jobs of the run's first tick.
pub const DEFAULT_PILOT: u32 = 3;

/// Jobs per tick whose prompts are built to measure the prompts' length.
const SAMPLED_PER_TICK: usize = 32;

/// What a run is, for its estimate.
pub struct Plan<'a> {
    /// The configuration.
    pub cfg: &'a Config,
    /// The scenario.
    pub scenario: &'a Scenario,
    /// The personas' traits.
    pub traits: &'a Traits,
    /// The seed.
    pub seed: u64,
    /// The personas this run holds (a shard's range).
    pub personas: Range<u32>,
    /// Ticks.
    pub ticks: u32,
}

impl<'a> Plan<'a> {
    /// The plan of a run.
    pub fn new(
        cfg: &'a Config,
        scenario: &'a Scenario,
        traits: &'a Traits,
        seed: u64,
        personas: Range<u32>,
        ticks: u32,
    ) -> Self {
        Plan { cfg, scenario, traits, seed, personas, ticks }
    }
}

/// The pilot's answers and what they measured.
#[derive(Debug, Default)]
pub struct Pilot {
    /// Every call the piloted jobs made, in job order.
    calls: Vec<ChatCallRecord>,
    /// Per piloted job.
    jobs: Vec<PilotJob>,
}

/// One piloted job.
#[derive(Debug)]
struct PilotJob {
    /// Its reaction's first request.
    reaction: engine::digest::Digest,
    /// Its prompt's tokens as the engine estimates them (bytes / 4).
    local_prompt: u64,
    /// Its calls: `Pilot::calls[calls]`.
    calls: Range<usize>,
    /// The reaction's importance, and the memory it leaves (local tokens).
    reacted: Option<(u8, u64)>,
}

impl Pilot {
    /// Converses the first `jobs` jobs of tick 1 as the run will (through
    /// `chat`, billed like any call).
    pub async fn run(plan: &Plan<'_>, profiles: &[Profile], jobs: u32, chat: &dyn ChatPort) -> Pilot {
        let Plan { cfg, scenario, seed, .. } = *plan;
        let first = plan.personas.start;
        let list = scenario.jobs_of(seed, 1, plan.personas.clone(), |p| &profiles[(p - first) as usize].interests);
        let now = Clock::with_hours_per_tick(cfg.raw.run.hours_per_tick).at(1);
        let ctx = TickContext { cfg, scenario, tick: 1, now };
        let prepared: Vec<_> = list
            .iter()
            .take(jobs as usize)
            .filter_map(|job| {
                let state = PersonaState::new(profiles[(job.persona - first) as usize].clone());
                prepare(&state, job, None, &ctx).ok()
            })
            .collect();
        let conversations =
            futures::future::join_all(prepared.iter().map(|p| converse(chat, p, cfg, scenario, 1))).await;
        let mut pilot = Pilot::default();
        for (prepared, conversation) in prepared.iter().zip(conversations) {
            let start = pilot.calls.len();
            pilot.calls.extend(conversation.calls);
            let reacted = conversation.result.ok().map(|c| {
                let stimulus = &scenario.stimuli[prepared.job.stimulus as usize];
                let memory = engine::turn::stage::observation_description(1, stimulus, &c.reaction.text);
                // A recalled memory's line: `- [tick 1] (sentiment 0.20) ` and the description.
                (c.reaction.importance, estimate_tokens(&memory) + 7)
            });
            pilot.jobs.push(PilotJob {
                reaction: prepared.reaction.digest(),
                local_prompt: prepared.prompt_tokens,
                calls: start..pilot.calls.len(),
                reacted,
            });
        }
        pilot
    }

    /// Jobs, calls and what they were billed.
    pub fn report(&self) -> PilotReport {
        let mut spend = Spend::default();
        for c in &self.calls {
            spend.add(&c.spend);
        }
        PilotReport { jobs: self.jobs.len() as u32, calls: self.calls.len() as u64, spend }
    }

    /// `live` with the pilot's answers served first: the run asks the same
    /// requests and pays for none of them twice (a failed call is asked
    /// again).
    pub fn serve(&self, live: Arc<dyn ChatPort>) -> Arc<dyn ChatPort> {
        if self.calls.is_empty() {
            return live;
        }
        Arc::new(CassetteChat::new(&[], Some(live)).with_calls(&self.calls, false))
    }
}

/// What the pilot measured, or the ceilings that stand for it without one.
struct Measured {
    /// Reaction-purpose calls per job (retries and intent weighings included).
    per_job: Span,
    /// Their prompt tokens at tick 1.
    prompt: Span,
    /// Their reply tokens.
    reply: Span,
    /// Probe calls' reply tokens, when the pilot asked probes.
    probe_reply: Option<Span>,
    /// Server tokens per engine-estimated token of a prompt.
    ratio: f64,
    /// The piloted prompts' mean, engine-estimated.
    local_prompt: f64,
    /// A recalled memory's tokens (engine-estimated).
    memory: Span,
    /// A reaction's importance, and its standard deviation.
    importance: Span,
    importance_sd: f64,
    /// The share of prompt tokens a prompt cache served.
    cached: Span,
    /// Sentences for the assumptions.
    said: Vec<String>,
}

fn measured(cfg: &Config, pilot: Option<&Pilot>) -> Measured {
    let cap = cfg.raw.chat.max_output_tokens as f64;
    let Some(pilot) = pilot.filter(|p| p.jobs.iter().any(|j| j.reacted.is_some())) else {
        let why = match pilot {
            Some(p) => format!("the pilot's {} jobs gave no reaction (failed or unparsed)", p.jobs.len()),
            None => "no pilot".into(),
        };
        return Measured {
            per_job: Span::exact(1.0),
            prompt: Span::exact(0.0),
            reply: Span::new(1.0, cap, cap),
            probe_reply: None,
            ratio: 1.0,
            local_prompt: 0.0,
            memory: Span::new(0.0, cap, cap),
            importance: Span::new(1.0, 10.0, 10.0),
            importance_sd: 0.0,
            cached: Span::exact(0.0),
            said: vec![format!(
                "{why}: replies and recalled memories are priced at max_output_tokens ({cap}) in the expected and high cases, replies at 1 token in the low case"
            )],
        };
    };
    let (mut per_job, mut prompt, mut reply, mut probe_reply) =
        (Observed::default(), Observed::default(), Observed::default(), Observed::default());
    let (mut memory, mut importance) = (Observed::default(), Observed::default());
    let (mut served, mut local, mut measured) = (0u64, 0u64, 0u64);
    for job in &pilot.jobs {
        let calls = &pilot.calls[job.calls.clone()];
        let reactions: Vec<_> = calls.iter().filter(|c| c.purpose == ChatPurpose::Reaction).collect();
        per_job.add(reactions.len() as f64);
        for c in &reactions {
            prompt.add(c.spend.input_tokens as f64);
            reply.add(c.spend.output_tokens as f64);
        }
        for c in calls.iter().filter(|c| matches!(c.purpose, ChatPurpose::Probe | ChatPurpose::Survey)) {
            probe_reply.add(c.spend.output_tokens as f64);
        }
        if let Some(c) = calls.iter().find(|c| c.request == job.reaction && c.failed.is_none()) {
            served += c.spend.input_tokens;
            local += job.local_prompt;
            measured += 1;
        }
        if let Some((i, m)) = job.reacted {
            importance.add(f64::from(i));
            memory.add(m as f64);
        }
    }
    // The first call meets a cold prompt cache; the share is the others'.
    let (mut input, mut hit, mut best) = (0u64, 0u64, 0f64);
    for c in pilot.calls.iter().skip(1) {
        input += c.spend.input_tokens;
        hit += c.spend.cached_input_tokens;
        if c.spend.input_tokens > 0 {
            best = best.max(c.spend.cached_input_tokens as f64 / c.spend.input_tokens as f64);
        }
    }
    let share = if input > 0 { hit as f64 / input as f64 } else { 0.0 };
    let ratio = if local > 0 { served as f64 / local as f64 } else { 1.0 };
    let reply = reply.span().unwrap_or(Span::exact(cap));
    let report = pilot.report();
    let said = vec![format!(
        "pilot: {} jobs of tick 1 made {} calls; their prompts took {:.0} to {:.0} tokens ({ratio:.2} per engine-estimated token), their replies {:.0} to {:.0} (mean {:.1}); the run reuses their answers",
        report.jobs, report.calls, prompt.min, prompt.max, reply.low, reply.high, reply.expected
    )];
    Measured {
        per_job: per_job.span().unwrap_or(Span::exact(1.0)),
        prompt: prompt.span().unwrap_or_default(),
        // Three replies show neither a model's shortest nor its longest:
        // the low case takes half their shortest, the high case twice
        // their mean (at least their longest), under the cap.
        reply: Span::new(reply.low / 2.0, reply.expected, reply.high.max(2.0 * reply.expected).min(cap)),
        probe_reply: probe_reply.span(),
        ratio,
        local_prompt: local as f64 / measured.max(1) as f64,
        memory: memory.span().unwrap_or_default(),
        importance: importance.span().map_or(Span::new(1.0, 10.0, 10.0), |s| Span::new(s.low, s.expected, 10.0)),
        importance_sd: importance.sd(),
        cached: Span { low: best, expected: share, high: 0.0 },
        said,
    }
}

/// What the scenario fixes: jobs, probes and recalled memories, counted
/// tick by tick over the panel.
#[derive(Default)]
struct Counted {
    jobs: f64,
    /// Memories recalled over every reaction prompt: expected (one per
    /// earlier reaction, up to `k`) and high (`k` from the persona's
    /// second tick).
    recalled: (f64, f64),
    probes: f64,
    probe_recalled: (f64, f64),
    /// Engine-estimated prompt tokens of sampled jobs without memories.
    prompt: Observed,
    probe_prompt: Observed,
    /// Reactions per persona over the run.
    per_persona: Vec<u32>,
}

fn counted(plan: &Plan<'_>, profiles: &[Profile]) -> Counted {
    let Plan { cfg, scenario, seed, .. } = *plan;
    let first = plan.personas.start;
    let k = cfg.raw.retrieval.k.max(0) as f64;
    let mut c = Counted { per_persona: vec![0; profiles.len()], ..Counted::default() };
    for tick in 1..=plan.ticks {
        let jobs = scenario.jobs_of(seed, tick, plan.personas.clone(), |p| &profiles[(p - first) as usize].interests);
        let probes = scenario.probes_at(tick).count() as f64;
        let now = Clock::with_hours_per_tick(cfg.raw.run.hours_per_tick).at(tick);
        let ctx = TickContext { cfg, scenario, tick, now };
        for (i, job) in jobs.iter().enumerate() {
            let slot = (job.persona - first) as usize;
            let earlier = f64::from(c.per_persona[slot]);
            let recalled = (earlier.min(k), if earlier > 0.0 { k } else { 0.0 });
            c.jobs += 1.0;
            c.recalled = (c.recalled.0 + recalled.0, c.recalled.1 + recalled.1);
            // Every job of a first exposure asks the tick's probes.
            if job.exposure == 0 && probes > 0.0 {
                c.probes += probes;
                c.probe_recalled = (c.probe_recalled.0 + probes * recalled.0, c.probe_recalled.1 + probes * recalled.1);
            }
            if i < SAMPLED_PER_TICK {
                let state = PersonaState::new(profiles[slot].clone());
                if let Ok(p) = prepare(&state, job, None, &ctx) {
                    c.prompt.add(p.prompt_tokens as f64);
                    for probe in &p.probes {
                        c.probe_prompt.add(estimate_tokens(&probe.prompt) as f64);
                    }
                }
            }
        }
        for job in &jobs {
            c.per_persona[(job.persona - first) as usize] += 1;
        }
    }
    c
}

/// The estimate of `plan`, from its `pilot` when one was run.
pub fn estimate(plan: &Plan<'_>, profiles: &[Profile], pilot: Option<&Pilot>) -> Estimate {
    let cfg = plan.cfg;
    let m = measured(cfg, pilot);
    let c = counted(plan, profiles);
    let k = cfg.raw.retrieval.k.max(0);
    let jobs = c.jobs.max(1.0);
    // A prompt at tick 1 as the pilot saw it, scaled to the run's mix of
    // stimuli, plus its recalled memories in server tokens.
    let base = c.prompt.mean().unwrap_or(0.0);
    let scale = if m.local_prompt > 0.0 { base / m.local_prompt } else { 1.0 };
    let tick1 = if pilot.is_some() && m.local_prompt > 0.0 {
        Span::new(m.prompt.low * scale, m.prompt.expected * scale, m.prompt.high * scale)
    } else {
        Span::exact(base * m.ratio)
    };
    let grown = |recalled: (f64, f64), per: f64| {
        Span::new(0.0, m.ratio * m.memory.expected * recalled.0 / per, m.ratio * m.memory.high * recalled.1 / per)
    };
    let mut plan_calls = vec![Calls {
        what: "reactions",
        count: Span::exact(c.jobs).times(m.per_job),
        prompt: tick1.plus(grown(c.recalled, jobs)),
        reply: m.reply,
    }];
    if c.probes > 0.0 {
        let retry = if cfg.raw.answers.mode == AnswerMode::Sample { 2.0 } else { 1.0 };
        let prompt = Span::exact(m.ratio * c.probe_prompt.mean().unwrap_or(base));
        plan_calls.push(Calls {
            what: "probes",
            count: Span::new(c.probes, c.probes, c.probes * retry),
            prompt: prompt.plus(grown(c.probe_recalled, c.probes)),
            reply: m.probe_reply.unwrap_or(m.reply),
        });
    }
    // A persona reflects each time its reactions' importance adds up to the
    // threshold: expected from the pilot's mean and spread, low and high
    // at the pilot's lowest importance and at 10.
    let threshold = f64::from(cfg.raw.reflection.importance_threshold.max(1));
    let mut counts = std::collections::BTreeMap::<u32, f64>::new();
    for &n in &c.per_persona {
        *counts.entry(n).or_default() += 1.0;
    }
    let reflections = |importance: f64, sd: f64| {
        counts.iter().map(|(&n, &personas)| personas * engine::estimate::crossings(n, importance, sd, threshold)).sum()
    };
    let reflected = Span::new(
        reflections(m.importance.low, 0.0),
        reflections(m.importance.expected, m.importance_sd),
        reflections(m.importance.high, 0.0),
    );
    if reflected.high > 0.0 {
        let recent = cfg.raw.reflection.recent_memories as f64 + 1.0;
        let prompt = Span::new(
            m.ratio * base,
            m.ratio * (base + recent * m.memory.expected),
            m.ratio * (base + recent * m.memory.high),
        );
        plan_calls.push(Calls { what: "reflections", count: reflected, prompt, reply: m.reply });
    }
    let price = match cfg.raw.chat.mode {
        ChatMode::Online => cfg.chat_price,
        ChatMode::Batch => cfg.chat_batch_price,
    };
    let mut e = Estimate::priced(&plan_calls, &price, m.cached);
    e.pilot = pilot.map(Pilot::report);
    e.assumptions = m.said;
    e.assumptions.push(format!(
        "{} reactions (the scenario's jobs, counted), {:.1} chat calls each (retries and intent weighings included; {:.0} to {:.0})",
        c.jobs, m.per_job.expected, m.per_job.low, m.per_job.high
    ));
    e.assumptions.push(format!(
        "later prompts recall up to {k} memories, one per earlier reaction, of about {:.0} tokens each (low: none recalled; high: {k} from a persona's second tick, {:.0} tokens each)",
        m.ratio * m.memory.expected,
        m.ratio * m.memory.high
    ));
    if c.probes > 0.0 {
        let replies = if m.probe_reply.is_some() { "as long as the pilot's" } else { "as long as the reactions'" };
        e.assumptions.push(format!("{} probe questions (counted), replies {replies}", c.probes));
    }
    e.assumptions.push(format!(
        "{:.0} reflections expected at the pilot's importance ({:.1} on average, sd {:.1}) against the threshold {threshold}; {:.0} to {:.0} (importance {:.0} to 10 every time)",
        reflected.expected, m.importance.expected, m.importance_sd, reflected.low, reflected.high, m.importance.low
    ));
    if price.cached_input_nano_per_mtok != price.input_nano_per_mtok {
        e.assumptions.push(format!(
            "prompt caching: {:.0}% of prompt tokens cached as in the pilot (low: {:.0}%, high: none)",
            100.0 * m.cached.expected,
            100.0 * m.cached.low
        ));
    }
    e.assumptions.push(
        "the run reaches its last tick (a budget, an interrupt or failures stop it short); chat only: embeddings are billed on top"
            .into(),
    );
    e
}

/// The checks and the estimate before a live run, each done once, when
/// first asked for: the connection check, then the pilot.
pub struct Preflight<'a> {
    plan: Plan<'a>,
    /// Jobs to pilot (0: none).
    pilot_jobs: u32,
    /// The provider itself, for the connection check.
    live: &'a dyn ChatPort,
    /// The port the pilot asks (through the response cache).
    chat: &'a dyn ChatPort,
    runtime: &'a tokio::runtime::Runtime,
    progress: &'a dyn Progress,
    checked: Cell<bool>,
    done: RefCell<Option<(Estimate, Pilot)>>,
}

impl<'a> Preflight<'a> {
    /// The preflight of `plan`: `live` is checked, `chat` piloted.
    pub fn new(
        plan: Plan<'a>,
        pilot_jobs: u32,
        (live, chat): (&'a dyn ChatPort, &'a dyn ChatPort),
        runtime: &'a tokio::runtime::Runtime,
        progress: &'a dyn Progress,
    ) -> Self {
        Preflight {
            plan,
            pilot_jobs,
            live,
            chat,
            runtime,
            progress,
            checked: Cell::new(false),
            done: RefCell::new(None),
        }
    }

    /// The connection check, once.
    pub fn check(&self) -> Result<()> {
        if !self.checked.get() {
            self.runtime.block_on(probe(self.plan.cfg, self.live, self.progress))?;
            self.checked.set(true);
        }
        Ok(())
    }

    /// The estimate: after the connection check, a pilot of the run's
    /// first jobs (a scripted model has none: it costs nothing), once.
    pub fn estimate(&self) -> Result<Estimate> {
        if let Some((e, _)) = &*self.done.borrow() {
            return Ok(e.clone());
        }
        self.check()?;
        let plan = &self.plan;
        let cfg = plan.cfg;
        let profiles: Vec<Profile> = plan
            .personas
            .clone()
            .map(|id| engine::persona::profile::draw(cfg, plan.traits, plan.seed, id))
            .collect::<Option<_>>()
            .ok_or_else(|| Error::Refused("the panel holds fewer rows than the run's personas".into()))?;
        // A batch waits up to its completion window: no pilot for it.
        let batch = cfg.raw.chat.mode == ChatMode::Batch;
        let piloted = cfg.raw.chat.provider != ChatProvider::Scripted && self.pilot_jobs > 0 && !batch;
        let pilot = match piloted {
            true => {
                self.progress.note(&format!("pilot: asking the first {} jobs of tick 1", self.pilot_jobs));
                self.runtime.block_on(Pilot::run(plan, &profiles, self.pilot_jobs, self.chat))
            }
            false => Pilot::default(),
        };
        let mut e = estimate(plan, &profiles, piloted.then_some(&pilot));
        if batch && self.pilot_jobs > 0 {
            e.assumptions.insert(0, "batch mode: no pilot (a batch may take its whole completion window)".into());
        }
        *self.done.borrow_mut() = Some((e.clone(), pilot));
        Ok(e)
    }

    /// After the go-ahead: the connection check if it was not made yet,
    /// then the port the run asks (the pilot's answers served first), the
    /// estimate if one was made, and the pilot's calls (for the run's
    /// chat log).
    pub fn finish(self, chat: Arc<dyn ChatPort>) -> Result<Finished> {
        self.check()?;
        Ok(match self.done.into_inner() {
            Some((e, pilot)) => Finished { chat: pilot.serve(chat), estimate: Some(e), paid: pilot.calls },
            None => Finished { chat, estimate: None, paid: Vec::new() },
        })
    }
}

/// What a preflight leaves the run.
pub struct Finished {
    /// The port the run asks.
    pub chat: Arc<dyn ChatPort>,
    /// The estimate, if one was made.
    pub estimate: Option<Estimate>,
    /// The pilot's calls, bought before the run's chat log was opened.
    pub paid: Vec<ChatCallRecord>,
}

/// One request through the live chat port: a failure stops the run before
/// any persona is charged, with the server's message.
pub async fn probe(cfg: &Config, chat: &dyn ChatPort, progress: &dyn Progress) -> Result<()> {
    if cfg.raw.chat.provider != ChatProvider::Openai {
        return Ok(());
    }
    let prompt = format!(
        "{PROBE_MARKER} Reply to this test in the requested format: a short reaction to a plain white mug, \
         sentiment 0, intent 3, importance 1."
    );
    let request = ChatRequest::new(&cfg.raw.chat.model, ChatPurpose::Reaction, prompt);
    let reply = chat.complete(&request).await.map_err(|e| {
        Error::context(format!("the live chat model {} failed its check before the run", cfg.raw.chat.model), e)
    })?;
    // The check is paid for but belongs to no persona: it is reported here
    // and stays out of the run's ledger.
    let model = reply.attempts.last().and_then(|a| a.model.clone()).unwrap_or_else(|| cfg.raw.chat.model.clone());
    progress.note(&format!(
        "connection check: {model} answered ({} tokens, ${:.6}{}, outside the run's ledger)",
        reply.spend.input_tokens + reply.spend.output_tokens,
        reply.spend.nano_usd as f64 / engine::cost::NANO_PER_USD as f64,
        if reply.estimated { " estimated" } else { "" }
    ));
    Ok(())
}
