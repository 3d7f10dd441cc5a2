//! The message-passing adapter of the shared-context port, the
//! experiment's control: each agent has an inbox, an injection is a message
//! to every other team member, and a query ranks what the agent can see.

use crate::error::FieldError;
use crate::port::{ContextId, Contexts, Entry, Found, PortError, SharedContextPort};
use engine::clock::SimTime;
use engine::embed::cosine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    contexts: Contexts<Inboxes>,
    seq: u64,
    text_only: bool,
}

impl MessagePassing {
    /// The baseline with a merge strategy.
    pub fn new(dim: usize, merge: Merge) -> Self {
        MessagePassing { dim, merge, contexts: Contexts::new(), seq: 0, text_only: false }
    }

    /// Text message passing, with no vectors at all (the design document's
    /// control): entries and queries carry empty vectors, and a query
    /// returns the `k` newest visible messages, newest first, as a reader
    /// works through an inbox. Nothing is embedded, so nothing is paid
    /// for embeddings.
    pub fn text_only(merge: Merge) -> Self {
        MessagePassing { dim: 0, merge, contexts: Contexts::new(), seq: 0, text_only: true }
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
        let id = self.contexts.open(team, team.iter().map(|m| (m.clone(), Vec::new())).collect());
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
        let inboxes = self.contexts.member(ctx, agent)?;
        for inbox in inboxes.values_mut() {
            inbox.push(Message { from: agent.into(), entry: entry.clone(), seq });
        }
        Ok(())
    }

    fn query(
        &mut self,
        ctx: ContextId,
        agent: &str,
        query: &[f32],
        k: usize,
        _now: SimTime,
    ) -> Result<Vec<Found>, PortError> {
        if query.len() != self.dim {
            return Err(FieldError::WrongDimension { expected: self.dim, got: query.len() }.into());
        }
        let (merge, text_only) = (self.merge, self.text_only);
        let inboxes = self.contexts.member(ctx, agent)?;
        let inbox = inboxes.get(agent).map(Vec::as_slice).unwrap_or_default();
        let mut found: Vec<(f64, u64, &Message)> =
            Self::visible(merge, inbox).into_iter().map(|m| (cosine(query, &m.entry.vector), m.seq, m)).collect();
        if text_only {
            found.sort_by_key(|m| std::cmp::Reverse(m.1));
        } else {
            found.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        }
        Ok(found
            .into_iter()
            .take(k)
            .map(|(score, _, m)| Found {
                agent: m.from.clone(),
                key: m.entry.key.clone(),
                value: m.entry.value.clone(),
                score,
                resonant: false,
                strongly_resonant: false,
            })
            .collect())
    }

    fn destroy_context(&mut self, ctx: ContextId) -> Result<(), PortError> {
        self.contexts.destroy(ctx).map(|_| ())
    }

    fn check_context(&mut self, ctx: ContextId) -> Result<(), PortError> {
        self.contexts.entry(ctx).map(|_| ())
    }
}
