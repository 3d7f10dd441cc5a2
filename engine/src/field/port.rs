//! The shared-context port and its two adapters: the field, and message
//! passing (the baseline). A mission picks one; both pass the same
//! contract tests.

use super::pattern::{Field, FieldConfig, FieldError};
use crate::clock::SimTime;
use crate::persona::memory::cosine;
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
    /// A field error (dimension, vector, strength).
    #[error(transparent)]
    Field(#[from] FieldError),
}

/// Shared context between the agents of a team.
pub trait SharedContextPort {
    /// Opens a context for `team`, seeded with `initial` entries (shared by
    /// the first team member).
    fn create_context(&mut self, team: &[String], initial: Vec<Entry>, now: SimTime) -> Result<ContextId, PortError>;
    /// Shares an entry.
    fn inject(&mut self, ctx: ContextId, agent: &str, entry: Entry, now: SimTime) -> Result<(), PortError>;
    /// What `agent` can see that best matches `query`, best first.
    fn query(&mut self, ctx: ContextId, agent: &str, query: &[f32], k: usize, now: SimTime) -> Result<Vec<Found>, PortError>;
    /// Closes a context; later calls on it fail.
    fn destroy_context(&mut self, ctx: ContextId) -> Result<(), PortError>;
}

struct Team {
    members: Vec<String>,
}

fn check<'a, T>(ctxs: &'a mut BTreeMap<ContextId, Option<(Team, T)>>, ctx: ContextId, agent: Option<&str>) -> Result<&'a mut T, PortError> {
    match ctxs.get_mut(&ctx) {
        None => Err(PortError::UnknownContext(ctx)),
        Some(None) => Err(PortError::Destroyed(ctx)),
        Some(Some((team, inner))) => match agent {
            Some(a) if !team.members.iter().any(|m| m == a) => Err(PortError::NotInTeam { agent: a.into(), context: ctx }),
            _ => Ok(inner),
        },
    }
}

/// The field adapter: one field per context.
pub struct FieldContexts {
    dim: usize,
    cfg: FieldConfig,
    contexts: BTreeMap<ContextId, Option<(Team, Field)>>,
}

impl FieldContexts {
    /// Contexts of dimension `dim`.
    pub fn new(dim: usize, cfg: FieldConfig) -> Self {
        FieldContexts { dim, cfg, contexts: BTreeMap::new() }
    }

    /// A context's field.
    pub fn field(&self, ctx: ContextId) -> Option<&Field> {
        self.contexts.get(&ctx).and_then(|c| c.as_ref()).map(|(_, f)| f)
    }
}

impl SharedContextPort for FieldContexts {
    fn create_context(&mut self, team: &[String], initial: Vec<Entry>, now: SimTime) -> Result<ContextId, PortError> {
        let id = ContextId(self.contexts.len() as u64);
        let mut field = Field::new(self.dim, self.cfg.clone())?;
        let first = team.first().cloned().unwrap_or_default();
        for e in initial {
            field.inject(&first, &e.key, &e.value, &e.vector, e.strength, now)?;
        }
        self.contexts.insert(id, Some((Team { members: team.to_vec() }, field)));
        Ok(id)
    }

    fn inject(&mut self, ctx: ContextId, agent: &str, e: Entry, now: SimTime) -> Result<(), PortError> {
        check(&mut self.contexts, ctx, Some(agent))?.inject(agent, &e.key, &e.value, &e.vector, e.strength, now)?;
        Ok(())
    }

    fn query(&mut self, ctx: ContextId, agent: &str, query: &[f32], k: usize, now: SimTime) -> Result<Vec<Found>, PortError> {
        let field = check(&mut self.contexts, ctx, Some(agent))?;
        let hits = field.query_and_reinforce(query, k, now)?;
        Ok(hits
            .iter()
            .filter_map(|h| field.patterns().get(&h.id).map(|p| Found { agent: p.agent.clone(), key: p.key.clone(), value: p.value.clone(), score: h.score }))
            .collect())
    }

    fn destroy_context(&mut self, ctx: ContextId) -> Result<(), PortError> {
        check(&mut self.contexts, ctx, None)?;
        self.contexts.insert(ctx, None);
        Ok(())
    }
}

/// How a receiver merges messages that share a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Merge {
    /// The latest value for a key replaces earlier ones.
    Override,
    /// Every message is kept.
    Append,
    /// The value most senders gave for a key (ties: the earliest).
    Consensus,
}

struct Message {
    from: String,
    entry: Entry,
    seq: u64,
}

/// Each member's inbox, by agent.
type Inboxes = BTreeMap<String, Vec<Message>>;

/// The message-passing adapter: each agent has an inbox; an injection is a
/// message to every other team member (and kept by its sender).
pub struct MessagePassing {
    dim: usize,
    merge: Merge,
    contexts: BTreeMap<ContextId, Option<(Team, Inboxes)>>,
    seq: u64,
}

impl MessagePassing {
    /// The baseline with a merge strategy.
    pub fn new(dim: usize, merge: Merge) -> Self {
        MessagePassing { dim, merge, contexts: BTreeMap::new(), seq: 0 }
    }

    fn visible(merge: Merge, inbox: &[Message]) -> Vec<&Message> {
        match merge {
            Merge::Append => inbox.iter().collect(),
            Merge::Override => {
                let mut last: BTreeMap<&str, &Message> = BTreeMap::new();
                for m in inbox {
                    last.insert(&m.entry.key, m);
                }
                let mut v: Vec<&Message> = last.into_values().collect();
                v.sort_by_key(|m| m.seq);
                v
            }
            Merge::Consensus => {
                let mut by_key: BTreeMap<&str, Vec<&Message>> = BTreeMap::new();
                for m in inbox {
                    by_key.entry(&m.entry.key).or_default().push(m);
                }
                let mut v: Vec<&Message> = by_key
                    .into_values()
                    .filter_map(|ms| {
                        let mut votes: Vec<(&str, usize, u64, &Message)> = Vec::new();
                        for m in &ms {
                            match votes.iter_mut().find(|(val, ..)| *val == m.entry.value) {
                                Some(v) => v.1 += 1,
                                None => votes.push((&m.entry.value, 1, m.seq, m)),
                            }
                        }
                        votes.into_iter().max_by(|a, b| a.1.cmp(&b.1).then(b.2.cmp(&a.2))).map(|v| v.3)
                    })
                    .collect();
                v.sort_by_key(|m| m.seq);
                v
            }
        }
    }
}

impl SharedContextPort for MessagePassing {
    fn create_context(&mut self, team: &[String], initial: Vec<Entry>, now: SimTime) -> Result<ContextId, PortError> {
        let id = ContextId(self.contexts.len() as u64);
        let inboxes = team.iter().map(|m| (m.clone(), Vec::new())).collect();
        self.contexts.insert(id, Some((Team { members: team.to_vec() }, inboxes)));
        let first = team.first().cloned().unwrap_or_default();
        for e in initial {
            self.inject(id, &first, e, now)?;
        }
        Ok(id)
    }

    fn inject(&mut self, ctx: ContextId, agent: &str, entry: Entry, _now: SimTime) -> Result<(), PortError> {
        if entry.vector.len() != self.dim {
            return Err(FieldError::WrongDimension { expected: self.dim, got: entry.vector.len() }.into());
        }
        self.seq += 1;
        let seq = self.seq;
        let inboxes = check(&mut self.contexts, ctx, Some(agent))?;
        for inbox in inboxes.values_mut() {
            inbox.push(Message { from: agent.into(), entry: entry.clone(), seq });
        }
        Ok(())
    }

    fn query(&mut self, ctx: ContextId, agent: &str, query: &[f32], k: usize, _now: SimTime) -> Result<Vec<Found>, PortError> {
        if query.len() != self.dim {
            return Err(FieldError::WrongDimension { expected: self.dim, got: query.len() }.into());
        }
        let merge = self.merge;
        let inboxes = check(&mut self.contexts, ctx, Some(agent))?;
        let inbox = inboxes.get(agent).map(Vec::as_slice).unwrap_or_default();
        let mut found: Vec<(f64, u64, &Message)> = Self::visible(merge, inbox).into_iter().map(|m| (cosine(query, &m.entry.vector), m.seq, m)).collect();
        found.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Ok(found
            .into_iter()
            .take(k)
            .map(|(score, _, m)| Found { agent: m.from.clone(), key: m.entry.key.clone(), value: m.entry.value.clone(), score })
            .collect())
    }

    fn destroy_context(&mut self, ctx: ContextId) -> Result<(), PortError> {
        check(&mut self.contexts, ctx, None)?;
        self.contexts.insert(ctx, None);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!((got[0].key.as_str(), got[0].agent.as_str()), ("f1", "researcher"), "another agent's entry is found first");
        assert!(got[0].score >= got[1].score);
        assert!(matches!(port.query(ctx, "stranger", &[1.0, 0.0, 0.0], 1, now), Err(PortError::NotInTeam { .. })));
        assert!(matches!(port.inject(ctx, "writer", e("x", "y", [1.0, 0.0, 0.0]).with_dim(2), now), Err(PortError::Field(FieldError::WrongDimension { .. }))));
        assert_eq!(port.query(ContextId(99), "writer", &[1.0, 0.0, 0.0], 1, now), Err(PortError::UnknownContext(ContextId(99))));
        port.destroy_context(ctx).expect("destroy");
        assert_eq!(port.query(ctx, "writer", &[1.0, 0.0, 0.0], 1, now), Err(PortError::Destroyed(ctx)));
        assert_eq!(port.destroy_context(ctx), Err(PortError::Destroyed(ctx)));
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
            p.query(ctx, "writer", &[1.0, 0.0, 0.0], 10, now).expect("query").into_iter().map(|f| f.value).collect::<Vec<_>>()
        };
        assert_eq!(run(Merge::Override), vec!["no"]);
        assert_eq!(run(Merge::Append), vec!["yes", "yes", "no"]);
        assert_eq!(run(Merge::Consensus), vec!["yes"]);
    }
}
