//! The shared-context port and its field adapter; the message-passing
//! adapter (the baseline) is [`crate::messages`]. A mission picks one;
//! both pass the same contract tests, here.

use crate::field::{Field, FieldConfig, FieldError};
use crate::log::{EventLog, OpEvent, OpRecord, OutcomeRecord, PhaseEvent};
use crate::telemetry::{Telemetry, TelemetryReport};
use engine::clock::SimTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A context's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ContextId(pub u64);

/// Something an agent shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Its key (a finding id, a topic).
    pub key: String,
    /// Its text.
    pub value: String,
    /// Its embedding.
    pub vector: Vec<f32>,
    /// Injection strength (the field's S0; ignored by message passing).
    pub strength: f64,
}

/// What a query returns.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The agent that shared it.
    pub agent: String,
    /// Key.
    pub key: String,
    /// Text.
    pub value: String,
    /// Rank score.
    pub score: f64,
    /// It resonates with another item of the same answer (the field only).
    pub resonant: bool,
    /// One of those resonances is strong (the field only).
    pub strongly_resonant: bool,
}

/// One operation an agent submits for a phase.
#[derive(Debug, Clone, PartialEq)]
pub enum PortOp {
    /// Share an entry.
    Inject(Entry),
    /// Ask for the `k` best matches of a vector.
    Query {
        /// The query embedding.
        vector: Vec<f32>,
        /// How many results.
        k: usize,
    },
}

/// An operation with its author and the author's sequence number: a phase
/// applies its operations in `(agent, seq)` order, whatever order they
/// arrived in.
#[derive(Debug, Clone, PartialEq)]
pub struct Submitted {
    /// The agent.
    pub agent: String,
    /// The agent's own counter.
    pub seq: u64,
    /// What it asks.
    pub op: PortOp,
}

/// The answer to one submitted operation.
#[derive(Debug, Clone, PartialEq)]
pub enum PortReply {
    /// The entry was shared.
    Injected,
    /// The query's results, best first.
    Found(Vec<Found>),
}

/// Why a port call was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PortError {
    /// No such context.
    #[error("unknown context {0:?}")]
    UnknownContext(ContextId),
    /// The context was destroyed.
    #[error("context {0:?} was destroyed")]
    Destroyed(ContextId),
    /// The agent is not in the context's team.
    #[error("agent {agent:?} is not in the team of context {context:?}")]
    NotInTeam {
        /// Agent.
        agent: String,
        /// Context.
        context: ContextId,
    },
    /// Two operations of one phase carry the same `(agent, seq)`.
    #[error("agent {agent:?} submitted sequence number {seq} twice in one phase")]
    DuplicateSequence {
        /// Agent.
        agent: String,
        /// The repeated number.
        seq: u64,
    },
    /// A field error (dimension, vector, strength).
    #[error(transparent)]
    Field(#[from] FieldError),
}

impl PortError {
    /// Whether the caller is at fault (a bad operation or input) rather
    /// than FAISS or the file system.
    pub fn is_caller_fault(&self) -> bool {
        match self {
            PortError::UnknownContext(_)
            | PortError::Destroyed(_)
            | PortError::NotInTeam { .. }
            | PortError::DuplicateSequence { .. } => true,
            PortError::Field(e) => e.is_caller_fault(),
        }
    }
}

/// The order a phase applies `ops` in: indices sorted by `(agent, seq)`,
/// with every operation whose key is not unique marked as a duplicate (all
/// of them, so that arrival order cannot pick a winner).
fn phase_order(ops: &[Submitted]) -> (Vec<usize>, Vec<bool>) {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by(|a, b| (&ops[*a].agent, ops[*a].seq, a).cmp(&(&ops[*b].agent, ops[*b].seq, b)));
    let same =
        |i: usize, j: usize| ops[order[i]].agent == ops[order[j]].agent && ops[order[i]].seq == ops[order[j]].seq;
    let dup = (0..order.len()).map(|i| (i > 0 && same(i, i - 1)) || (i + 1 < order.len() && same(i, i + 1))).collect();
    (order, dup)
}

/// Shared context between the agents of a team.
pub trait SharedContextPort {
    /// Opens a context for `team`, seeded with `initial` entries (shared by
    /// the first team member).
    fn create_context(&mut self, team: &[String], initial: Vec<Entry>, now: SimTime) -> Result<ContextId, PortError>;
    /// Shares an entry.
    fn inject(&mut self, ctx: ContextId, agent: &str, entry: Entry, now: SimTime) -> Result<(), PortError>;
    /// What `agent` can see that best matches `query`, best first.
    fn query(
        &mut self,
        ctx: ContextId,
        agent: &str,
        query: &[f32],
        k: usize,
        now: SimTime,
    ) -> Result<Vec<Found>, PortError>;
    /// Closes a context; later calls on it fail.
    fn destroy_context(&mut self, ctx: ContextId) -> Result<(), PortError>;

    /// Applies one phase of operations at `now`, in `(agent, seq)` order:
    /// first every injection, then every query, all queries seeing the same
    /// state (the field reinforces what they returned afterwards, in the
    /// same order). Replies come back in submission order. An unknown or
    /// destroyed context fails the whole phase; any other error fails only
    /// its operation.
    fn phase(
        &mut self,
        ctx: ContextId,
        ops: &[Submitted],
        now: SimTime,
    ) -> Result<Vec<Result<PortReply, PortError>>, PortError> {
        self.check_context(ctx)?;
        let (order, dup) = phase_order(ops);
        let mut replies: Vec<Option<Result<PortReply, PortError>>> = vec![None; ops.len()];
        for pass_injects in [true, false] {
            for (pos, i) in order.iter().enumerate() {
                let s = &ops[*i];
                let reply = match (&s.op, pass_injects) {
                    _ if dup[pos] => Err(PortError::DuplicateSequence { agent: s.agent.clone(), seq: s.seq }),
                    (PortOp::Inject(e), true) => {
                        self.inject(ctx, &s.agent, e.clone(), now).map(|()| PortReply::Injected)
                    }
                    (PortOp::Query { vector, k }, false) => {
                        self.query(ctx, &s.agent, vector, *k, now).map(PortReply::Found)
                    }
                    (PortOp::Inject(_), false) | (PortOp::Query { .. }, true) => continue,
                };
                replies[*i] = Some(reply);
            }
        }
        Ok(replies.into_iter().map(|r| r.unwrap_or(Err(PortError::UnknownContext(ctx)))).collect())
    }

    /// Fails when `ctx` is unknown or destroyed.
    fn check_context(&mut self, ctx: ContextId) -> Result<(), PortError>;
}

pub(crate) struct Team {
    members: Vec<String>,
}

/// An adapter's contexts: each a team and the adapter's state for it,
/// `None` once destroyed (ids are never reused).
pub(crate) struct Contexts<T>(BTreeMap<ContextId, Option<(Team, T)>>);

impl<T> Contexts<T> {
    pub(crate) fn new() -> Self {
        Contexts(BTreeMap::new())
    }

    /// Opens a context.
    pub(crate) fn open(&mut self, team: &[String], inner: T) -> ContextId {
        let id = ContextId(self.0.len() as u64);
        self.0.insert(id, Some((Team { members: team.to_vec() }, inner)));
        id
    }

    /// A live context's team and state.
    pub(crate) fn entry(&mut self, ctx: ContextId) -> Result<(&Team, &mut T), PortError> {
        match self.0.get_mut(&ctx) {
            None => Err(PortError::UnknownContext(ctx)),
            Some(None) => Err(PortError::Destroyed(ctx)),
            Some(Some((team, inner))) => Ok((team, inner)),
        }
    }

    /// A live context's state, for a team member.
    pub(crate) fn member(&mut self, ctx: ContextId, agent: &str) -> Result<&mut T, PortError> {
        let (team, inner) = self.entry(ctx)?;
        if !team.members.iter().any(|m| m == agent) {
            return Err(PortError::NotInTeam { agent: agent.into(), context: ctx });
        }
        Ok(inner)
    }

    /// A live context's state, read-only.
    pub(crate) fn live(&self, ctx: ContextId) -> Option<&T> {
        self.0.get(&ctx).and_then(|c| c.as_ref()).map(|(_, inner)| inner)
    }

    /// Closes a context and returns its state.
    pub(crate) fn destroy(&mut self, ctx: ContextId) -> Result<T, PortError> {
        self.entry(ctx)?;
        match self.0.insert(ctx, None) {
            Some(Some((_, inner))) => Ok(inner),
            Some(None) | None => Err(PortError::Destroyed(ctx)),
        }
    }
}

/// One context of the field adapter: its field, what it has seen, and
/// where its events go.
pub struct FieldSession {
    /// The field.
    pub field: Field,
    /// Counters and the timeline.
    pub telemetry: Telemetry,
    log: Option<EventLog>,
    log_error: Option<String>,
}

impl FieldSession {
    fn new(field: Field) -> Self {
        FieldSession { field, telemetry: Telemetry::default(), log: None, log_error: None }
    }

    /// The telemetry report at `now`, with any event-log failure; an error
    /// names a pattern whose strength or resonance is not finite.
    pub fn report(&self, now: SimTime) -> Result<TelemetryReport, FieldError> {
        Ok(TelemetryReport { log_error: self.log_error.clone(), ..self.telemetry.report(&self.field, now)? })
    }
}

/// The field adapter: one field per context.
pub struct FieldContexts {
    dim: usize,
    cfg: FieldConfig,
    contexts: Contexts<FieldSession>,
}

impl FieldContexts {
    /// Contexts of dimension `dim`.
    pub fn new(dim: usize, cfg: FieldConfig) -> Self {
        FieldContexts { dim, cfg, contexts: Contexts::new() }
    }

    /// A live context's field and telemetry.
    pub fn session(&self, ctx: ContextId) -> Option<&FieldSession> {
        self.contexts.live(ctx)
    }

    /// A context's field.
    pub fn field(&self, ctx: ContextId) -> Option<&Field> {
        self.session(ctx).map(|s| &s.field)
    }

    /// Records the context's phases from now on into `log` (the field's
    /// configuration first), so that its evolution can be replayed.
    pub fn record(&mut self, ctx: ContextId, mut log: EventLog) -> Result<(), PortError> {
        let (team, session) = self.contexts.entry(ctx)?;
        log.start(&team.members, &session.field)?;
        session.log = Some(log);
        Ok(())
    }

    /// Opens a context over an existing field (a loaded or replayed one).
    pub fn adopt(&mut self, team: &[String], field: Field) -> ContextId {
        self.contexts.open(team, FieldSession::new(field))
    }

    /// Closes a context and hands its field and telemetry over.
    pub fn take(&mut self, ctx: ContextId) -> Option<FieldSession> {
        self.contexts.destroy(ctx).ok()
    }
}

impl SharedContextPort for FieldContexts {
    fn create_context(&mut self, team: &[String], initial: Vec<Entry>, now: SimTime) -> Result<ContextId, PortError> {
        let mut field = Field::new(self.dim, self.cfg.clone())?;
        // Initial entries are the context's seed, not an agent's operation:
        // telemetry counts only what agents do.
        let first = team.first().cloned().unwrap_or_default();
        for e in initial {
            field.inject(&first, &e.key, &e.value, &e.vector, e.strength, now)?;
        }
        Ok(self.contexts.open(team, FieldSession::new(field)))
    }

    fn inject(&mut self, ctx: ContextId, agent: &str, e: Entry, now: SimTime) -> Result<(), PortError> {
        let s = self.contexts.member(ctx, agent)?;
        s.field.inject(agent, &e.key, &e.value, &e.vector, e.strength, now)?;
        s.telemetry.count_inject(agent);
        Ok(())
    }

    fn query(
        &mut self,
        ctx: ContextId,
        agent: &str,
        query: &[f32],
        k: usize,
        now: SimTime,
    ) -> Result<Vec<Found>, PortError> {
        let s = self.contexts.member(ctx, agent)?;
        let hits = s.field.query_and_reinforce(agent, query, k, now)?;
        s.telemetry.count_query(agent, &hits);
        Ok(found(&s.field, &hits))
    }

    fn destroy_context(&mut self, ctx: ContextId) -> Result<(), PortError> {
        self.contexts.destroy(ctx).map(|_| ())
    }

    fn check_context(&mut self, ctx: ContextId) -> Result<(), PortError> {
        self.contexts.entry(ctx).map(|_| ())
    }

    /// The field's phase: injections in order, then one batched FAISS
    /// search for every query against the same state, then reinforcement in
    /// order; the phase is logged and a timeline point taken.
    fn phase(
        &mut self,
        ctx: ContextId,
        ops: &[Submitted],
        now: SimTime,
    ) -> Result<Vec<Result<PortReply, PortError>>, PortError> {
        let (order, dup) = phase_order(ops);
        let (team, s) = self.contexts.entry(ctx)?;
        let mut replies: Vec<Option<Result<PortReply, PortError>>> = vec![None; ops.len()];
        let mut queries: Vec<(usize, &[f32], usize)> = Vec::new();
        for (pos, i) in order.iter().enumerate() {
            let sub = &ops[*i];
            if dup[pos] {
                replies[*i] = Some(Err(PortError::DuplicateSequence { agent: sub.agent.clone(), seq: sub.seq }));
            } else if !team.members.contains(&sub.agent) {
                replies[*i] = Some(Err(PortError::NotInTeam { agent: sub.agent.clone(), context: ctx }));
            } else {
                match &sub.op {
                    PortOp::Inject(e) => {
                        let r = s.field.inject(&sub.agent, &e.key, &e.value, &e.vector, e.strength, now);
                        if r.is_ok() {
                            s.telemetry.count_inject(&sub.agent);
                        }
                        replies[*i] = Some(r.map(|_| PortReply::Injected).map_err(PortError::from));
                    }
                    PortOp::Query { vector, .. } if vector.len() != s.field.dim() => {
                        let e = FieldError::WrongDimension { expected: s.field.dim(), got: vector.len() };
                        replies[*i] = Some(Err(e.into()));
                    }
                    PortOp::Query { vector, k } => queries.push((*i, vector, *k)),
                }
            }
        }
        // One batch per distinct k (agents usually share one k).
        let mut ks: Vec<usize> = queries.iter().map(|q| q.2).collect();
        ks.sort_unstable();
        ks.dedup();
        let mut hits_of: BTreeMap<usize, Result<Vec<super::Hit>, FieldError>> = BTreeMap::new();
        for k in ks {
            let group: Vec<&(usize, &[f32], usize)> = queries.iter().filter(|q| q.2 == k).collect();
            let vectors: Vec<&[f32]> = group.iter().map(|q| q.1).collect();
            match s.field.query_batch(&vectors, k, now) {
                Ok(answers) => hits_of.extend(group.iter().map(|q| q.0).zip(answers.into_iter().map(Ok))),
                // A batch fails only for a vector that cannot be normalised:
                // answer each query alone so the others still succeed.
                Err(_) => hits_of.extend(group.iter().map(|q| (q.0, s.field.query(q.1, k, now)))),
            }
        }
        for i in &order {
            if let Some(result) = hits_of.remove(i) {
                let reinforced =
                    result.and_then(|hits| s.field.reinforce_answer(&ops[*i].agent, &hits, now).map(|()| hits));
                replies[*i] = Some(match reinforced {
                    Ok(hits) => {
                        s.telemetry.count_query(&ops[*i].agent, &hits);
                        Ok(PortReply::Found(found(&s.field, &hits)))
                    }
                    Err(e) => Err(e.into()),
                });
            }
        }
        let replies: Vec<Result<PortReply, PortError>> =
            replies.into_iter().map(|r| r.unwrap_or(Err(PortError::UnknownContext(ctx)))).collect();
        let point = s.telemetry.observe(&s.field, now)?;
        if let Some(log) = &mut s.log {
            let sorted: Vec<&Submitted> = order.iter().map(|i| &ops[*i]).collect();
            let outcome: Vec<&Result<PortReply, PortError>> = order.iter().map(|i| &replies[*i]).collect();
            // The phase is applied whatever the log does: a failed write
            // closes the log and is reported with the telemetry, rather
            // than turning applied operations into errors.
            if let Err(e) = log.append(&phase_event(point.phase, now, &sorted, &outcome, s.field.digest())) {
                s.log_error = Some(format!("the event log stopped at phase {}: {e}", point.phase));
                s.log = None;
            }
        }
        Ok(replies)
    }
}

/// The log's record of a phase whose sorted operations returned
/// `outcomes`.
fn phase_event(
    phase: u64,
    now: SimTime,
    ops: &[&Submitted],
    outcomes: &[&Result<PortReply, PortError>],
    digest: engine::digest::Digest,
) -> PhaseEvent {
    let ops = ops
        .iter()
        .map(|s| OpEvent {
            agent: s.agent.clone(),
            seq: s.seq,
            op: match &s.op {
                PortOp::Inject(e) => OpRecord::Inject {
                    key: e.key.clone(),
                    value: e.value.clone(),
                    vector: e.vector.clone(),
                    strength: e.strength,
                },
                PortOp::Query { vector, k } => OpRecord::Query { vector: vector.clone(), k: *k as u64 },
            },
        })
        .collect();
    PhaseEvent { phase, now, ops, outcomes: outcomes.iter().map(|r| outcome_record(r)).collect(), digest }
}

/// How the log records an operation's outcome.
pub(crate) fn outcome_record(r: &Result<PortReply, PortError>) -> OutcomeRecord {
    match r {
        Ok(PortReply::Injected) => OutcomeRecord::Injected,
        Ok(PortReply::Found(found)) => OutcomeRecord::Found(found.iter().map(|f| (f.key.clone(), f.score)).collect()),
        Err(e) => OutcomeRecord::Failed(e.to_string()),
    }
}

fn found(field: &Field, hits: &[super::Hit]) -> Vec<Found> {
    hits.iter()
        .filter_map(|h| {
            field.patterns().get(&h.id).map(|p| Found {
                agent: p.agent.clone(),
                key: p.key.clone(),
                value: p.value.clone(),
                score: h.score,
                resonant: h.resonant,
                strongly_resonant: h.strongly_resonant,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::EventLog;
    use crate::messages::{Merge, MessagePassing};

    fn e(key: &str, value: &str, v: [f32; 3]) -> Entry {
        Entry { key: key.into(), value: value.into(), vector: v.to_vec(), strength: 1.0 }
    }

    fn team() -> Vec<String> {
        vec!["researcher".into(), "analyst".into(), "writer".into()]
    }

    /// The contract every adapter meets.
    fn contract(port: &mut dyn SharedContextPort) {
        let now = SimTime(3600);
        let ctx = port.create_context(&team(), vec![e("brief", "the topic", [0.0, 0.0, 1.0])], now).expect("create");
        port.inject(ctx, "researcher", e("f1", "battery lasts 4 days", [1.0, 0.0, 0.0]), now).expect("inject");
        port.inject(ctx, "analyst", e("a1", "sleep tracking praised", [0.0, 1.0, 0.0]), now).expect("inject");
        let got = port.query(ctx, "writer", &[1.0, 0.1, 0.0], 2, now).expect("query");
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].key.as_str(), got[0].agent.as_str()),
            ("f1", "researcher"),
            "another agent's entry is found first"
        );
        assert!(got[0].score >= got[1].score);
        assert!(matches!(port.query(ctx, "stranger", &[1.0, 0.0, 0.0], 1, now), Err(PortError::NotInTeam { .. })));
        assert!(matches!(
            port.inject(ctx, "writer", e("x", "y", [1.0, 0.0, 0.0]).with_dim(2), now),
            Err(PortError::Field(FieldError::WrongDimension { .. }))
        ));
        assert_eq!(
            port.query(ContextId(99), "writer", &[1.0, 0.0, 0.0], 1, now),
            Err(PortError::UnknownContext(ContextId(99)))
        );
        port.destroy_context(ctx).expect("destroy");
        assert_eq!(port.query(ctx, "writer", &[1.0, 0.0, 0.0], 1, now), Err(PortError::Destroyed(ctx)));
        assert_eq!(port.destroy_context(ctx), Err(PortError::Destroyed(ctx)));
    }

    fn sub(agent: &str, seq: u64, op: PortOp) -> Submitted {
        Submitted { agent: agent.into(), seq, op }
    }

    fn q(v: [f32; 3], k: usize) -> PortOp {
        PortOp::Query { vector: v.to_vec(), k }
    }

    /// The phase contract: `(agent, seq)` order whatever the arrival order,
    /// injections visible to the same phase's queries, replies in
    /// submission order, duplicates and strangers refused one by one.
    fn phase_contract(make: &dyn Fn() -> Box<dyn SharedContextPort>) {
        let now = SimTime(0);
        let ops = vec![
            sub("writer", 1, q([1.0, 0.0, 0.0], 3)),
            sub("researcher", 2, PortOp::Inject(e("f2", "second", [0.9, 0.1, 0.0]))),
            sub("researcher", 1, PortOp::Inject(e("f1", "first", [1.0, 0.0, 0.0]))),
            sub("analyst", 1, q([0.0, 1.0, 0.0], 1)),
            sub("analyst", 1, q([0.0, 1.0, 0.0], 1)),
            sub("stranger", 1, q([0.0, 1.0, 0.0], 1)),
        ];
        let mut reversed = ops.clone();
        reversed.reverse();
        let mut results = Vec::new();
        for batch in [&ops, &reversed] {
            let mut port = make();
            let ctx = port.create_context(&team(), Vec::new(), now).expect("create");
            let mut replies = port.phase(ctx, batch, now).expect("phase");
            if std::ptr::eq(batch, &reversed) {
                replies.reverse();
            }
            results.push(replies);
        }
        assert_eq!(results[0], results[1], "arrival order does not matter");
        let r = &results[0];
        let Ok(PortReply::Found(found)) = &r[0] else { panic!("writer's query failed: {:?}", r[0]) };
        assert_eq!(
            found.iter().map(|f| f.key.as_str()).collect::<Vec<_>>(),
            vec!["f1", "f2"],
            "the phase's injections are visible"
        );
        assert_eq!(r[1], Ok(PortReply::Injected));
        let duplicate = Err(PortError::DuplicateSequence { agent: "analyst".into(), seq: 1 });
        assert_eq!((&r[3], &r[4]), (&duplicate, &duplicate), "neither copy of a repeated (agent, seq) runs");
        assert!(matches!(r[5], Err(PortError::NotInTeam { .. })));
        let mut port = make();
        assert_eq!(port.phase(ContextId(7), &ops, now), Err(PortError::UnknownContext(ContextId(7))));
    }

    #[test]
    fn both_adapters_meet_the_phase_contract() {
        phase_contract(&|| Box::new(FieldContexts::new(3, FieldConfig::default())));
        phase_contract(&|| Box::new(MessagePassing::new(3, Merge::Append)));
    }

    /// A logged field replays phase by phase to the same digests; telemetry
    /// counts what happened and names the patterns two agents touched.
    #[test]
    fn field_phases_are_logged_replayed_and_counted() {
        let dir = std::env::temp_dir().join(format!("field-log-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("field.events");
        let mut port = FieldContexts::new(3, FieldConfig::default());
        let ctx = port.create_context(&team(), vec![e("brief", "topic", [0.0, 0.0, 1.0])], SimTime(0)).expect("create");
        port.record(ctx, EventLog::create(&path).expect("log")).expect("record");
        for t in 0..6u64 {
            let now = SimTime(t * 3600);
            let ops = vec![
                sub("researcher", 2 * t, PortOp::Inject(e(&format!("f{t}"), "finding", [1.0, t as f32 * 0.1, 0.0]))),
                sub("analyst", t, q([1.0, 0.2, 0.1], 2)),
                sub("writer", t, q([1.0, 0.1, 0.0], 2)),
            ];
            port.phase(ctx, &ops, now).expect("phase");
        }
        let session = port.session(ctx).expect("live");
        let report = session.report(SimTime(5 * 3600)).expect("finite");
        assert_eq!(
            (report.injects.total, report.queries.total),
            (6, 12),
            "six findings (the brief is the seed); two queries a phase"
        );
        assert_eq!(report.queries.by_agent["writer"], 6);
        assert!(!report.multi_agent_patterns.is_empty(), "analyst and writer read the same findings");
        assert!(report.multi_agent_patterns.iter().all(|p| p.accessed_by == ["analyst", "writer"]));
        assert_eq!(report.timeline.len(), 6);
        assert_eq!(report.resonance.pairs, (report.resonance.patterns * (report.resonance.patterns - 1) / 2) as u64);
        // Twelve queries of two hits each: the busiest pattern's count and
        // share are the answers that held it.
        let busiest = report.busiest.as_ref().expect("queries answered");
        assert!((busiest.share - busiest.answered as f64 / 12.0).abs() < 1e-12 && busiest.answered <= 12);
        assert_eq!(report.monitor.max_ratio, report.timeline.iter().filter_map(|p| p.strength_ratio).reduce(f64::max));
        let (steps, replayed) = crate::replay::replay(&path).expect("replay");
        assert_eq!(steps.len(), 6);
        assert!(steps.iter().all(|s| s.matches), "{steps:?}");
        assert_eq!(replayed.field.digest(), session.field.digest());
        assert_eq!(replayed.telemetry, session.telemetry, "replay rebuilds the telemetry");
        // A damaged log is refused with its frame.
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 3;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        let Err(err) = crate::replay::replay(&path) else { panic!("a damaged log replayed") };
        let err = err.to_string();
        assert!(err.contains("frame 6") && err.contains("checksum"), "{err}");
    }

    /// A log that cannot be written (a full disk) stops; the phases are
    /// still applied and answered, and the report says where the log ended.
    #[test]
    fn a_failed_log_write_keeps_the_phase() {
        let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else { return };
        let mut port = FieldContexts::new(3, FieldConfig::default());
        let ctx = port.create_context(&team(), Vec::new(), SimTime(0)).expect("create");
        port.contexts.entry(ctx).expect("live").1.log =
            Some(EventLog::on_file(full, std::path::Path::new("/dev/full")));
        let ops = [sub("researcher", 1, PortOp::Inject(e("f1", "first", [1.0, 0.0, 0.0])))];
        assert_eq!(port.phase(ctx, &ops, SimTime(0)).expect("phase"), vec![Ok(PortReply::Injected)]);
        let session = port.session(ctx).expect("live");
        assert_eq!(session.field.patterns().len(), 1);
        let err = session.report(SimTime(0)).expect("finite").log_error.expect("the failure is reported");
        assert!(err.contains("phase 1") && err.contains("/dev/full"), "{err}");
    }

    impl Entry {
        fn with_dim(mut self, d: usize) -> Self {
            self.vector.truncate(d);
            self
        }
    }

    #[test]
    fn both_adapters_meet_the_contract() {
        contract(&mut FieldContexts::new(3, FieldConfig::default()));
        for merge in [Merge::Override, Merge::Append, Merge::Consensus] {
            contract(&mut MessagePassing::new(3, merge));
        }
    }

    #[test]
    fn merge_strategies_differ_on_a_shared_key() {
        let now = SimTime(0);
        let run = |merge| {
            let mut p = MessagePassing::new(3, merge);
            let ctx = p.create_context(&team(), Vec::new(), now).expect("create");
            p.inject(ctx, "researcher", e("k", "yes", [1.0, 0.0, 0.0]), now).expect("inject");
            p.inject(ctx, "analyst", e("k", "yes", [1.0, 0.0, 0.0]), now).expect("inject");
            p.inject(ctx, "writer", e("k", "no", [1.0, 0.0, 0.0]), now).expect("inject");
            p.query(ctx, "writer", &[1.0, 0.0, 0.0], 10, now)
                .expect("query")
                .into_iter()
                .map(|f| f.value)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(Merge::Override), vec!["no"]);
        assert_eq!(run(Merge::Append), vec!["yes", "yes", "no"]);
        assert_eq!(run(Merge::Consensus), vec!["yes"]);
    }
}
