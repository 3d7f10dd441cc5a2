//! The agent team and its missions. Three [`AgentActor`]s (researcher,
//! analyst, writer) think through the [`ChatPort`] and share context
//! through the shared-context port: one field (the field actor, behind
//! [`FieldHandle`])
//! in the treatment condition, message passing in the control.
//!
//! A mission over a topic with P passages runs P + 2 iterations, each one
//! simulated hour, each a read phase, the agents' work (concurrently), and a
//! write phase:
//!
//! - iteration i <= P: the researcher reads passage i and shares its findings;
//! - iterations 2..=P+1: the analyst reads what it can see and shares points;
//! - iteration P+2: the writer reads what it can see and writes the report.
//!
//! With the field, every agent injects into and queries one context. With
//! message passing, the researcher's findings go to the analyst's inbox and
//! the analyst's points to the writer's (an inbox merges by key, so a point
//! sent twice counts once). Both conditions use the same model, budgets,
//! embedder, queries and latency model.

use crate::field::FieldHandle;
use crate::{Error, Result};
use ::experiment::cassette::mission_key;
use ::experiment::judge::{JudgeScore, ScriptedJudge, SCRIPTED_JUDGE};
use ::experiment::model::{live_prompt, parse_lines, prompt};
use ::experiment::summary::{Condition, MissionCost, RunRecord};
use ::experiment::topic::sentences;
use ::experiment::{metrics, Role, ScriptedAgentModel, Topic};
use ::field::telemetry::TimelinePoint;
use ::field::{
    ContextId, Entry, FieldConfig, Merge, MessagePassing, PortOp, PortReply, SharedContextPort, Submitted,
    TelemetryReport,
};
use engine::chat::{ChatPort, ChatPurpose, ChatRequest};
use engine::clock::SimTime;
use engine::cost::{Price, Spend};
use engine::digest::{Digest, DigestWriter};
use engine::embed::{EmbedKey, EmbedRole, EmbeddingPort};
use engine::rng::{Purpose, Stream};
use ractor::concurrency::oneshot;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Token budgets of the team (identical in both conditions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// Researcher's output per passage.
    pub researcher_output: u64,
    /// Analyst's context window.
    pub analyst_context: u64,
    /// Analyst's output per iteration.
    pub analyst_output: u64,
    /// Writer's context window.
    pub writer_context: u64,
    /// Writer's report.
    pub writer_output: u64,
    /// Results per query.
    pub k: usize,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            researcher_output: 60,
            analyst_context: 220,
            analyst_output: 60,
            writer_context: 260,
            writer_output: 150,
            k: 16,
        }
    }
}

/// The modelled latency of a mission (deterministic, so reruns agree).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyModel {
    /// Per chat call.
    pub chat_ms: f64,
    /// Per prompt token.
    pub input_token_ms: f64,
    /// Per completion token.
    pub output_token_ms: f64,
    /// Per embedding call (one per phase that embeds).
    pub embed_call_ms: f64,
    /// Per embedded token.
    pub embed_token_ms: f64,
}

impl Default for LatencyModel {
    fn default() -> Self {
        LatencyModel {
            chat_ms: 400.0,
            input_token_ms: 0.05,
            output_token_ms: 10.0,
            embed_call_ms: 30.0,
            embed_token_ms: 0.01,
        }
    }
}

impl LatencyModel {
    fn chat(&self, s: &Spend) -> f64 {
        self.chat_ms + self.input_token_ms * s.input_tokens as f64 + self.output_token_ms * s.output_tokens as f64
    }
}

/// What an agent produced.
#[derive(Debug, Clone)]
pub struct AgentWork {
    /// Its points, one per line of the reply.
    pub lines: Vec<String>,
    /// Tokens and cost of the call.
    pub spend: Spend,
    /// Items that fitted its context.
    pub items_seen: usize,
}

/// Messages to an agent.
pub enum AgentMsg {
    /// Do one step: read `items` (cut to the context budget), answer within
    /// the output budget.
    Work {
        /// The mission's question.
        question: String,
        /// What the agent can see, best first.
        items: Vec<String>,
        /// Context window in tokens.
        context_budget: u64,
        /// Output budget in tokens.
        output_budget: u64,
        /// Reply.
        reply: RpcReplyPort<engine::Result<AgentWork>>,
    },
}

/// A researcher, analyst or writer. `self` is read-only.
pub struct AgentActor {
    /// Its role.
    pub role: Role,
    /// Its model.
    pub chat: Arc<dyn ChatPort>,
    /// The model's name in requests.
    pub model: String,
    /// The model is a live one: its prompts open with the role's brief
    /// ([`live_prompt`]); the scripted model's carry only
    /// the fields it reads.
    pub live: bool,
}

impl Actor for AgentActor {
    type Msg = AgentMsg;
    /// Chat calls made.
    type State = u64;
    type Arguments = ();

    async fn pre_start(&self, _myself: ActorRef<AgentMsg>, _: ()) -> std::result::Result<u64, ActorProcessingErr> {
        Ok(0)
    }

    async fn handle(
        &self,
        _myself: ActorRef<AgentMsg>,
        msg: AgentMsg,
        calls: &mut u64,
    ) -> std::result::Result<(), ActorProcessingErr> {
        let AgentMsg::Work { question, items, context_budget, output_budget, reply } = msg;
        let compose = if self.live { live_prompt } else { prompt };
        let (text, items_seen) = compose(self.role, output_budget, &question, &items, context_budget);
        let request = ChatRequest::new(&self.model, ChatPurpose::Agent, text);
        *calls += 1;
        let answer = self
            .chat
            .complete(&request)
            .await
            .map(|r| AgentWork {
                lines: parse_lines(&engine::chat::schema::to_lines(&r.text)),
                spend: r.spend,
                items_seen,
            })
            .map_err(engine::Error::from);
        let _ = reply.send(answer);
        Ok(())
    }
}

/// One mission.
#[derive(Clone)]
pub struct MissionSpec {
    /// Topic.
    pub topic: Topic,
    /// Condition.
    pub condition: Condition,
    /// Field parameters (used by the field condition).
    pub field: FieldConfig,
    /// Budgets.
    pub budgets: Budgets,
    /// Latency model.
    pub latency: LatencyModel,
    /// Embedding dimension.
    pub dim: usize,
    /// The embedder: every vector of the mission (question, findings,
    /// points) comes through it, billed per physical request.
    pub embedder: Arc<dyn EmbeddingPort>,
    /// The embedding model's name (the key texts are embedded under).
    pub embed_model: String,
    /// The agents' model.
    pub chat: Arc<dyn ChatPort>,
    /// Model name.
    pub model: String,
    /// `chat` is a live model (not the scripted agent model): the agents
    /// brief it on its role in every prompt.
    pub live: bool,
    /// Where the field condition logs its phases (`field.events`), if anywhere.
    pub log: Option<std::path::PathBuf>,
}

/// What a mission produced.
#[derive(Debug, Clone)]
pub struct MissionResult {
    /// The final report.
    pub report: String,
    /// Chat spend.
    pub chat: Spend,
    /// What the embedder billed (input tokens and nano-USD).
    pub embedding: Spend,
    /// Modelled latency.
    pub latency_ms: f64,
    /// The field's telemetry (field condition).
    pub telemetry: Option<TelemetryReport>,
    /// The field's digest (field condition).
    pub field_digest: Option<Digest>,
}

enum Shared {
    Field { handle: FieldHandle, ctx: ContextId, seq: u64 },
    Messages { port: MessagePassing, research: ContextId, analysis: ContextId, seq: u64 },
}

/// A shared-context operation of one agent.
struct Op {
    role: Role,
    op: PortOp,
}

impl Shared {
    /// Applies one phase; replies in `ops` order.
    async fn phase(&mut self, ops: Vec<Op>, now: SimTime) -> Result<Vec<PortReply>> {
        let mut replies = Vec::with_capacity(ops.len());
        match self {
            Shared::Field { handle, ctx, seq } => {
                let mut rx = Vec::with_capacity(ops.len());
                for o in ops {
                    *seq += 1;
                    rx.push(handle.submit(*ctx, Submitted { agent: o.role.name().into(), seq: *seq, op: o.op })?);
                }
                handle.end_phase(*ctx, now).await?;
                for r in rx {
                    replies.push(r.await.map_err(|_| Error::FieldActor("a submission was never answered".into()))??);
                }
            }
            Shared::Messages { port, research, analysis, seq } => {
                for o in ops {
                    *seq += 1;
                    // Researcher -> analyst inbox; analyst -> writer inbox.
                    let ctx = match (o.role, &o.op) {
                        (Role::Researcher, _) | (Role::Analyst, PortOp::Query { .. }) => *research,
                        (Role::Analyst, PortOp::Inject(_)) | (Role::Writer, _) => *analysis,
                    };
                    let sub = [Submitted { agent: o.role.name().into(), seq: *seq, op: o.op }];
                    let mut r = port.phase(ctx, &sub, now)?;
                    replies.push(r.pop().ok_or(Error::Mission("message passing returned no reply".into()))??);
                }
            }
        }
        Ok(replies)
    }
}

async fn work(
    role: Role,
    agent: &ActorRef<AgentMsg>,
    question: &str,
    items: Vec<String>,
    context_budget: u64,
    output_budget: u64,
) -> Result<AgentWork> {
    let (tx, rx) = oneshot();
    let msg = AgentMsg::Work { question: question.into(), items, context_budget, output_budget, reply: tx.into() };
    agent.cast(msg).map_err(|e| Error::Mission(format!("agent unreachable: {e}")))?;
    rx.await
        .map_err(|_| Error::Mission("an agent stopped without replying".into()))?
        .map_err(|e| Error::AgentChat { role: role.name(), source: Box::new(e) })
}

fn key_of(role: Role, text: &str) -> String {
    format!("{}:{}", role.name(), &DigestWriter::new("point key v1").str(text).finish().hex()[..12])
}

/// Runs one mission. The agents and the field actor are stopped and
/// awaited on every exit path, a failed start included.
pub async fn mission(spec: &MissionSpec) -> Result<MissionResult> {
    let mut team = Team { agents: Vec::new(), field: None };
    let result = async {
        for role in ROLES {
            let actor = AgentActor { role, chat: Arc::clone(&spec.chat), model: spec.model.clone(), live: spec.live };
            let agent = Actor::spawn(None, actor, ()).await.map_err(|e| Error::spawn(role.name(), e))?;
            team.agents.push(agent);
        }
        if let Condition::Field | Condition::Store = spec.condition {
            team.field = Some(FieldHandle::spawn(spec.dim, spec.field.clone()).await?);
        }
        let agents: Vec<_> = team.agents.iter().map(|(a, _)| a.clone()).collect();
        run_mission(spec, &agents, team.field.as_ref().map(|(h, _)| h)).await
    }
    .await;
    team.shutdown().await;
    result
}

/// A mission's actors: stopped and awaited by [`Team::shutdown`], and
/// stopped by `Drop` if the mission is abandoned before it.
struct Team {
    agents: Vec<(ActorRef<AgentMsg>, tokio::task::JoinHandle<()>)>,
    field: Option<(FieldHandle, tokio::task::JoinHandle<()>)>,
}

impl Team {
    async fn shutdown(&mut self) {
        for (a, join) in std::mem::take(&mut self.agents) {
            a.stop(None);
            let _ = join.await;
        }
        if let Some((h, join)) = self.field.take() {
            h.stop();
            let _ = join.await;
        }
    }
}

impl Drop for Team {
    fn drop(&mut self) {
        for (a, _) in &self.agents {
            a.stop(None);
        }
        if let Some((h, _)) = &self.field {
            h.stop();
        }
    }
}

/// The team, in the order the agents are spawned and addressed.
const ROLES: [Role; 3] = [Role::Researcher, Role::Analyst, Role::Writer];

/// What the agents produced in one iteration.
struct Worked {
    researcher: Option<AgentWork>,
    analyst: Option<AgentWork>,
    writer: Option<AgentWork>,
}

/// The work phase of an iteration: the agents that have input work
/// concurrently.
async fn work_phase(
    spec: &MissionSpec,
    agents: &[ActorRef<AgentMsg>],
    researcher: Option<Vec<String>>,
    analyst: Option<Vec<String>>,
    writer: Option<Vec<String>>,
) -> Result<Worked> {
    let (q, b) = (&spec.topic.question, &spec.budgets);
    let run = |agent: usize, items: Option<Vec<String>>, context: u64, output: u64| async move {
        match items {
            Some(items) => work(ROLES[agent], &agents[agent], q, items, context, output).await.map(Some),
            None => Ok(None),
        }
    };
    let (r, a, w) = tokio::join!(
        run(0, researcher, u64::MAX, b.researcher_output),
        run(1, analyst, b.analyst_context, b.analyst_output),
        run(2, writer, b.writer_context, b.writer_output),
    );
    Ok(Worked { researcher: r?, analyst: a?, writer: w? })
}

/// `texts` through the mission's embedder, in one invocation; adds what
/// it billed to `spend`.
async fn embed(spec: &MissionSpec, texts: &[String], spend: &mut Spend) -> Result<Vec<Vec<f32>>> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    let key = EmbedKey { role: EmbedRole::Memory, model: spec.embed_model.clone(), dim: spec.dim };
    match spec.embedder.embed(&key, texts).await {
        Ok(batch) => {
            batch.calls.iter().for_each(|c| spend.add(&c.spend));
            Ok(batch.vectors.iter().map(|v| v.to_vec()).collect())
        }
        Err(e) => {
            e.calls().iter().for_each(|c| spend.add(&c.spend));
            Err(engine::Error::from(e).into())
        }
    }
}

/// The write phase's injections: every line the researcher and the analyst
/// produced, embedded in one invocation (billed to `spend`).
async fn write_ops(spec: &MissionSpec, worked: &mut Worked, spend: &mut Spend) -> Result<Vec<Op>> {
    let researcher = worked.researcher.as_mut().map(|x| std::mem::take(&mut x.lines));
    let analyst = worked.analyst.as_mut().map(|x| std::mem::take(&mut x.lines));
    let lines: Vec<(Role, String)> = [(Role::Researcher, researcher), (Role::Analyst, analyst)]
        .into_iter()
        .flat_map(|(role, lines)| lines.unwrap_or_default().into_iter().map(move |l| (role, l)))
        .collect();
    let texts: Vec<String> = lines.iter().map(|(_, l)| l.clone()).collect();
    // Text message passing carries no vectors: nothing is embedded.
    let vectors = match spec.condition {
        Condition::MessagePassing => vec![Vec::new(); texts.len()],
        Condition::Field | Condition::Store => embed(spec, &texts, spend).await?,
    };
    Ok(lines
        .into_iter()
        .zip(vectors)
        .map(|((role, line), vector)| Op {
            role,
            op: PortOp::Inject(Entry { key: key_of(role, &line), vector, value: line, strength: 1.0 }),
        })
        .collect())
}

async fn run_mission(
    spec: &MissionSpec,
    agents: &[ActorRef<AgentMsg>],
    field: Option<&FieldHandle>,
) -> Result<MissionResult> {
    let team: Vec<String> =
        [Role::Researcher, Role::Analyst, Role::Writer].iter().map(|r| r.name().to_string()).collect();
    let mut shared = match field {
        Some(h) => Shared::Field {
            handle: h.clone(),
            ctx: h.create(team, Vec::new(), SimTime(0), spec.log.clone()).await?,
            seq: 0,
        },
        None => {
            let mut port = MessagePassing::text_only(Merge::Override);
            let research = port.create_context(&team[..2], Vec::new(), SimTime(0))?;
            let analysis = port.create_context(&team[1..], Vec::new(), SimTime(0))?;
            Shared::Messages { port, research, analysis, seq: 0 }
        }
    };
    let t = &spec.topic;
    let k = spec.budgets.k;
    let mut embedding = Spend::default();
    let question_vec = match field {
        Some(_) => embed(spec, std::slice::from_ref(&t.question), &mut embedding).await?.remove(0),
        None => Vec::new(),
    };
    let (mut chat, mut latency_ms, mut report) = (Spend::default(), 0.0f64, String::new());
    let p = t.passages.len();
    for it in 1..=p + 2 {
        let now = SimTime(it as u64 * 3600);
        let analyst_works = (2..=p + 1).contains(&it);
        let writer_works = it == p + 2;
        // Read phase.
        let mut reads = Vec::new();
        if analyst_works {
            reads.push(Op { role: Role::Analyst, op: PortOp::Query { vector: question_vec.clone(), k } });
        }
        if writer_works {
            reads.push(Op { role: Role::Writer, op: PortOp::Query { vector: question_vec.clone(), k } });
        }
        let seen: Vec<Vec<String>> = if reads.is_empty() {
            Vec::new()
        } else {
            shared
                .phase(reads, now)
                .await?
                .into_iter()
                .map(|r| match r {
                    PortReply::Found(f) => f.into_iter().map(|f| f.value).collect(),
                    PortReply::Injected => Vec::new(),
                })
                .collect()
        };
        let mut seen = seen.into_iter();
        // Work, concurrently.
        let researcher = (it <= p).then(|| sentences(&t.passages[it - 1].text));
        let analyst_items = if analyst_works { seen.next() } else { None };
        let writer_items = if writer_works { seen.next() } else { None };
        let mut worked = work_phase(spec, agents, researcher, analyst_items, writer_items).await?;
        let mut slowest = 0.0f64;
        for done in [&worked.researcher, &worked.analyst, &worked.writer].into_iter().flatten() {
            chat.add(&done.spend);
            slowest = slowest.max(spec.latency.chat(&done.spend));
        }
        latency_ms += slowest;
        if let Some(w) = &worked.writer {
            report = w.lines.join("\n");
        }
        // Write phase.
        let before = embedding.input_tokens;
        let writes = write_ops(spec, &mut worked, &mut embedding).await?;
        if !writes.is_empty() {
            let tokens = embedding.input_tokens - before;
            if field.is_some() {
                latency_ms += spec.latency.embed_call_ms + spec.latency.embed_token_ms * tokens as f64;
            }
            shared.phase(writes, now).await?;
        }
    }
    let end = SimTime((p as u64 + 2) * 3600);
    let (telemetry, field_digest) = match &shared {
        Shared::Field { handle, ctx, .. } => {
            let (d, t) = handle.report(*ctx, end).await?;
            if let Some(e) = &t.log_error {
                return Err(Error::Mission(format!("the field's {e}")));
            }
            handle.destroy(*ctx).await?;
            (Some(t), Some(d))
        }
        Shared::Messages { .. } => (None, None),
    };
    Ok(MissionResult { report, chat, embedding, latency_ms, telemetry, field_digest })
}

/// One mission's record: its metrics, latency, cost and judge's score.
async fn score(
    spec: &ExperimentSpec,
    topic: &Topic,
    (rep, seed, condition, lambda): (u32, u64, Condition, Option<f64>),
    r: MissionResult,
    wall: std::time::Duration,
) -> Result<Mission> {
    let key = mission_key(&topic.name, rep, condition.name(), lambda);
    let (latency_ms, modelled_latency_ms) = match &spec.latency_source {
        LatencySource::Modelled => (r.latency_ms, None),
        LatencySource::Measured => (wall.as_secs_f64() * 1000.0, Some(r.latency_ms)),
        LatencySource::Recorded(map) => match map.get(&key) {
            Some(ms) => (*ms, Some(r.latency_ms)),
            None => return Err(Error::Mission(format!("the cassette holds no latency of mission {key}"))),
        },
    };
    let task_accuracy = judge(spec, topic, &r.report).await;
    let semantic = match spec.chat.is_some() {
        true => Some(semantic_present(spec, topic, &r.report).await?),
        false => None,
    };
    let tel = r.telemetry.as_ref();
    Ok(Mission {
        record: RunRecord {
            topic: topic.name.clone(),
            rep,
            condition,
            lambda,
            seed,
            retention: metrics::retention(&r.report, topic),
            quality: metrics::quality(&r.report, topic),
            tokens: r.chat.input_tokens + r.chat.output_tokens + r.embedding.input_tokens,
            chat_tokens: r.chat.input_tokens + r.chat.output_tokens,
            latency_ms,
            modelled_latency_ms,
            cross_agent_resonance: tel.map(|t| t.multi_agent_patterns.len() as u64),
            stability: tel.map(|t| t.stability.stability),
            convergence_phase: tel.and_then(|t| t.convergence_phase),
            busiest_share: tel.map(|t| t.busiest.as_ref().map_or(0.0, |b| b.share)),
            max_strength_ratio: tel.and_then(|t| t.monitor.max_ratio),
            ratio_alarm: tel.map(|t| t.monitor.alarmed()),
            present: metrics::present(&r.report, topic),
            retention_semantic: semantic.as_ref().map(|p| p.len() as f64 / topic.findings.len() as f64),
            present_semantic: semantic,
            report: r.report.clone(),
            cost: MissionCost {
                chat_nano_usd: r.chat.nano_usd,
                embedding_nano_usd: r.embedding.nano_usd,
                total_nano_usd: r.chat.nano_usd + r.embedding.nano_usd,
                field_patterns: tel.map(|t| t.patterns as u64),
                field_vector_bytes: tel.map(|t| t.patterns as u64 * spec.dim as u64 * 4),
            },
            task_accuracy,
        },
        timeline: tel.map(|t| t.timeline.clone()).unwrap_or_default(),
        accessed_lifetimes: tel.map(|t| t.accessed_lifetimes.clone()).unwrap_or_default(),
    })
}

/// The findings `report` carries by key phrase or by meaning, through the
/// experiment's embedder (an evaluation: billed to no mission).
async fn semantic_present(spec: &ExperimentSpec, topic: &Topic, report: &str) -> Result<Vec<String>> {
    let (homes, sentences) = metrics::semantic_texts(report, topic);
    let key = EmbedKey { role: EmbedRole::Memory, model: spec.embed_model.clone(), dim: spec.dim };
    let texts: Vec<String> = homes.iter().chain(&sentences).cloned().collect();
    let batch = spec.embedder.embed(&key, &texts).await.map_err(engine::Error::from)?;
    let vectors: Vec<Vec<f32>> = batch.vectors.iter().map(|v| v.to_vec()).collect();
    let (h, s) = vectors.split_at(homes.len().min(vectors.len()));
    Ok(metrics::semantic_present(report, topic, h, s))
}

/// The judge's score of `report`: the scripted rubric judge, or the
/// configured judge model (one retry when its reply does not parse; `None`
/// when it still does not, or the call fails).
async fn judge(spec: &ExperimentSpec, topic: &Topic, report: &str) -> Option<JudgeScore> {
    let prompt = ::experiment::judge::prompt(topic, report);
    let scripted = spec.judge.is_none();
    let port: Arc<dyn ChatPort> = match &spec.judge {
        Some(j) => Arc::clone(j),
        None => Arc::new(ScriptedJudge { price: Price::from_usd_per_mtok(0.15, 0.6) }),
    };
    let model = if scripted { SCRIPTED_JUDGE.to_string() } else { spec.judge_model.clone() };
    let first = ChatRequest::new(&model, ChatPurpose::Judge, prompt);
    for attempt in 0..2 {
        let request = first.attempt(attempt);
        let reply = port.complete(&request).await.ok()?;
        if let Some((score, justification)) = ::experiment::judge::parse(&reply.text) {
            return Some(JudgeScore { score, justification, judge: model, scripted });
        }
    }
    None
}

/// Where a mission's latency comes from.
#[derive(Debug, Clone)]
pub enum LatencySource {
    /// The latency model (scripted agents): reproducible.
    Modelled,
    /// The wall clock, from the mission's start to its final output (live
    /// agents); missions run one at a time, so conditions never compete.
    Measured,
    /// Measured when recorded: the cassette's figure per mission
    /// ([`::experiment::cassette::mission_key`]).
    Recorded(Arc<std::collections::HashMap<String, f64>>),
}

/// The experiment.
#[derive(Clone)]
pub struct ExperimentSpec {
    /// Topics.
    pub topics: Vec<Topic>,
    /// Repetitions per topic and condition.
    pub reps: u32,
    /// The field's lambdas (the sweep).
    pub lambdas: Vec<f64>,
    /// Seed.
    pub seed: u64,
    /// Budgets.
    pub budgets: Budgets,
    /// Latency model.
    pub latency: LatencyModel,
    /// Embedding dimension (the embedder's).
    pub dim: usize,
    /// The embedder every mission uses. Give it no cache shared across
    /// missions, so that each mission pays for its own embeddings and
    /// neither condition rides on the other's.
    pub embedder: Arc<dyn EmbeddingPort>,
    /// The embedding model's name.
    pub embed_model: String,
    /// The agents' model for a repetition's seed; `None` uses the
    /// scripted agent model.
    pub chat: Option<Arc<dyn ChatPort>>,
    /// The agents' model name (what requests carry and reports name).
    pub model: String,
    /// The scripted analyst's words per point (`None`: whole points); only
    /// the scripted model reads it.
    pub analyst_words: Option<usize>,
    /// Where each mission's latency comes from.
    pub latency_source: LatencySource,
    /// The judge of task accuracy; `None` uses the scripted rubric judge.
    pub judge: Option<Arc<dyn ChatPort>>,
    /// The judge model's name.
    pub judge_model: String,
    /// A directory to log every field mission's phases into
    /// (`<topic>-rep<r>-lambda<l>/field.events`), for `sim-cli field replay`.
    pub field_logs: Option<std::path::PathBuf>,
}

/// The scripted model's name.
pub const SCRIPTED_MODEL: &str = "scripted-agent-v1";

/// A record with what the charts need.
#[derive(Debug, Clone)]
pub struct Mission {
    /// Measurements.
    pub record: RunRecord,
    /// The field timeline (field condition).
    pub timeline: Vec<TimelinePoint>,
    /// Per pattern accessed at least once: strength at injection and hours
    /// from injection to last access (field condition).
    pub accessed_lifetimes: Vec<(f64, f64)>,
}

/// Runs every topic x repetition: message passing once, the field at each
/// lambda; both conditions of a pair share the seed. `progress(done, total)`.
pub async fn run_experiment(spec: &ExperimentSpec, mut progress: impl FnMut(usize, usize)) -> Result<Vec<Mission>> {
    if spec.reps == 0 || spec.topics.is_empty() || spec.lambdas.is_empty() {
        return Err(Error::invalid("experiment", "needs at least one topic, one repetition and one lambda"));
    }
    let total = spec.topics.len() * spec.reps as usize * (2 + spec.lambdas.len());
    let mut out = Vec::with_capacity(total);
    for (ti, topic) in spec.topics.iter().enumerate() {
        for rep in 1..=spec.reps {
            let seed = Stream::derive(spec.seed, rep, ti as u64, Purpose::Agent).next_u64();
            let chat: Arc<dyn ChatPort> = match &spec.chat {
                Some(c) => Arc::clone(c),
                None => Arc::new(ScriptedAgentModel {
                    analyst_words: spec.analyst_words,
                    ..ScriptedAgentModel::new(seed, Price::from_usd_per_mtok(0.15, 0.6))
                }),
            };
            let mut conditions = vec![(Condition::MessagePassing, None), (Condition::Store, None)];
            conditions.extend(spec.lambdas.iter().map(|l| (Condition::Field, Some(*l))));
            for (condition, lambda) in conditions {
                let log = match (&spec.field_logs, lambda) {
                    (Some(dir), Some(l)) => {
                        let d = dir.join(format!("{}-rep{rep}-lambda{l}", topic.name));
                        std::fs::create_dir_all(&d)
                            .map_err(|e| Error::Mission(format!("cannot create {}: {e}", d.display())))?;
                        Some(d.join("field.events"))
                    }
                    _ => None,
                };
                let m = MissionSpec {
                    log,
                    topic: topic.clone(),
                    condition,
                    field: match lambda {
                        Some(l) => FieldConfig { lambda: l, ..FieldConfig::default() },
                        None => FieldConfig::plain_store(),
                    },
                    budgets: spec.budgets.clone(),
                    latency: spec.latency.clone(),
                    dim: spec.dim,
                    embedder: Arc::clone(&spec.embedder),
                    embed_model: spec.embed_model.clone(),
                    chat: Arc::clone(&chat),
                    model: spec.model.clone(),
                    live: spec.chat.is_some(),
                };
                let started = std::time::Instant::now();
                let r = mission(&m).await.map_err(|e| Error::InMission {
                    topic: topic.name.clone(),
                    rep,
                    condition: condition.name(),
                    source: Box::new(e),
                })?;
                out.push(score(spec, topic, (rep, seed, condition, lambda), r, started.elapsed()).await?);
                progress(out.len(), total);
            }
        }
    }
    Ok(out)
}
