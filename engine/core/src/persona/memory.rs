//! A persona's private memory stream and its retrieval score.
//!
//! Retrieval ranks only the owning persona's memories (there is no pooled
//! index) by `w_rec * recency + w_imp * importance + w_rel * relevance`,
//! each component min-max normalised over the persona's memories, ties
//! broken by memory id, top-k taken.

use crate::clock::SimTime;
use crate::config::RetrievalSection;
pub use crate::embed::cosine;
pub use crate::memory::{MemoryId, MemoryIdText};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What produced a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, bincode::Encode)]
pub enum MemoryKind {
    /// A reaction to a stimulus.
    Observation,
    /// An insight from a reflection (or its fallback description).
    Reflection,
}

impl MemoryKind {
    /// The code this value has in a digest. Explicit, so that reordering or
    /// adding variants never moves an existing digest.
    pub fn digest_code(self) -> u8 {
        match self {
            MemoryKind::Observation => 0,
            MemoryKind::Reflection => 1,
        }
    }
}

/// One memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRecord {
    /// Identity.
    pub id: MemoryId,
    /// What produced it.
    pub kind: MemoryKind,
    /// The text that is embedded and shown in prompts.
    pub description: Arc<str>,
    /// Importance 1-10, from the reply that produced it.
    pub importance: u8,
    /// Sentiment in [-1, 1] carried by the memory.
    pub sentiment: f32,
    /// Tick that created it.
    pub tick: u32,
    /// Simulated creation time.
    pub created: SimTime,
    /// Simulated time of the last retrieval (or creation).
    pub last_access: SimTime,
    /// Stimulus or memories it came from.
    pub sources: Vec<Arc<str>>,
    /// Its embedding; `None` when no embedding port was configured. Shared,
    /// because deduplicated drafts share one vector.
    pub vector: Option<Arc<[f32]>>,
}

/// A retrieved memory with its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// Which memory.
    pub id: MemoryId,
    /// Its combined score.
    pub score: f64,
}

/// A persona's memories, in creation order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryStream {
    records: Vec<MemoryRecord>,
}

impl MemoryStream {
    /// Gives back the room the record list grew into beyond what it holds.
    pub fn shrink_to_fit(&mut self) {
        self.records.shrink_to_fit();
    }

    /// Room for exactly `n` more memories: a commit knows how many it adds,
    /// and a stream kept without slack grows once rather than doubling and
    /// shrinking back.
    pub fn reserve_exact(&mut self, n: usize) {
        self.records.reserve_exact(n);
    }
}

fn normalise(values: &mut [f64]) {
    let (lo, hi) = values.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    let range = hi - lo;
    for v in values.iter_mut() {
        // A constant component carries no ranking information.
        *v = if range > 0.0 { (*v - lo) / range } else { 0.0 };
    }
}

impl MemoryStream {
    /// All records, in creation order.
    pub fn records(&self) -> &[MemoryRecord] {
        &self.records
    }

    /// Number of memories.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when the persona remembers nothing.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The sequence number the next memory gets.
    pub fn next_seq(&self) -> u32 {
        self.records.len() as u32
    }

    /// A memory by id, if it is this stream's.
    pub fn get(&self, id: MemoryId) -> Option<&MemoryRecord> {
        self.records.get(id.seq as usize).filter(|r| r.id == id)
    }

    /// Appends a memory. Its id must be the next in sequence.
    pub fn push(&mut self, record: MemoryRecord) {
        debug_assert_eq!(record.id.seq, self.next_seq(), "memory ids are sequential; this is a bug");
        self.records.push(record);
    }

    /// Marks memories as accessed at `now`.
    pub fn touch(&mut self, ids: &[MemoryId], now: SimTime) {
        for id in ids {
            if let Some(r) = self.records.get_mut(id.seq as usize) {
                if r.id == *id && r.last_access < now {
                    r.last_access = now;
                }
            }
        }
    }

    /// Ranks this persona's memories against `query` and returns the top
    /// `k`, best first. Only memories marked visible take part (a memory
    /// past the end of `visible` counts as visible); expired and archived
    /// ones are never ranked. With no query vector, relevance is zero.
    pub fn retrieve(
        &self,
        query: Option<&[f32]>,
        now: SimTime,
        cfg: &RetrievalSection,
        visible: &[bool],
    ) -> Vec<Scored> {
        let k = usize::try_from(cfg.k).unwrap_or(0);
        let candidates: Vec<&MemoryRecord> =
            self.records.iter().filter(|r| visible.get(r.id.seq as usize).copied().unwrap_or(true)).collect();
        if k == 0 || candidates.is_empty() {
            return Vec::new();
        }
        let n = candidates.len();
        let mut recency = Vec::with_capacity(n);
        let mut importance = Vec::with_capacity(n);
        let mut relevance = Vec::with_capacity(n);
        for r in &candidates {
            recency.push(cfg.recency_decay_per_hour.powf(now.hours_since(r.last_access)));
            importance.push(f64::from(r.importance));
            relevance.push(match (query, &r.vector) {
                (Some(q), Some(v)) => cosine(q, v),
                _ => 0.0,
            });
        }
        normalise(&mut recency);
        normalise(&mut importance);
        normalise(&mut relevance);
        let mut scored: Vec<Scored> = candidates
            .iter()
            .enumerate()
            .map(|(i, r)| Scored {
                id: r.id,
                score: cfg.recency_weight * recency[i]
                    + cfg.importance_weight * importance[i]
                    + cfg.relevance_weight * relevance[i],
            })
            .collect();
        scored.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        scored.truncate(k);
        scored
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_reads_as_zero_padded_numbers() {
        for (persona, seq) in [(0, 0), (7, 3), (12345, 9999), (123456, 10000), (u32::MAX, u32::MAX)] {
            let id = MemoryId { persona, seq };
            assert_eq!(id.to_string(), format!("m-{persona:05}-{seq:04}"));
            assert_eq!(MemoryId::parse(id.text().as_str()), Some(id));
        }
    }

    fn rec(seq: u32, importance: u8, created_h: u64, vector: Option<Vec<f32>>) -> MemoryRecord {
        MemoryRecord {
            id: MemoryId { persona: 1, seq },
            kind: MemoryKind::Observation,
            description: format!("memory {seq}").into(),
            importance,
            sentiment: 0.0,
            tick: 1,
            created: SimTime(created_h * 3600),
            last_access: SimTime(created_h * 3600),
            sources: vec![],
            vector: vector.map(Into::into),
        }
    }

    fn cfg(k: i64, rec: f64, imp: f64, rel: f64) -> RetrievalSection {
        RetrievalSection { k, recency_weight: rec, importance_weight: imp, relevance_weight: rel, ..Default::default() }
    }

    #[test]
    fn components_are_weighted_and_normalised() {
        let mut s = MemoryStream::default();
        s.push(rec(0, 9, 0, Some(vec![1.0, 0.0])));
        s.push(rec(1, 1, 100, Some(vec![0.0, 1.0])));
        s.push(rec(2, 5, 50, Some(vec![0.7, 0.7])));
        let now = SimTime(100 * 3600);
        let q = [0.0f32, 1.0];
        let ids = |c: RetrievalSection| s.retrieve(Some(&q), now, &c, &[]).iter().map(|x| x.id.seq).collect::<Vec<_>>();
        assert_eq!(ids(cfg(3, 0.0, 1.0, 0.0)), vec![0, 2, 1], "importance only");
        assert_eq!(ids(cfg(3, 1.0, 0.0, 0.0)), vec![1, 2, 0], "recency only");
        assert_eq!(ids(cfg(1, 0.0, 0.0, 1.0)), vec![1], "relevance only, top 1");
        // Each component is scaled to [0, 1]: memory 1 scores 1 + 0 + 1.
        let top = s.retrieve(Some(&q), now, &cfg(1, 1.0, 1.0, 1.0), &[]);
        assert!((top[0].score - 2.0).abs() < 1e-12);
    }

    #[test]
    fn ties_break_by_id_and_k_limits() {
        let mut s = MemoryStream::default();
        for seq in 0..4 {
            s.push(rec(seq, 5, 0, None));
        }
        let got = s.retrieve(None, SimTime(0), &cfg(2, 1.0, 1.0, 1.0), &[]);
        assert_eq!(got.iter().map(|x| x.id.seq).collect::<Vec<_>>(), vec![0, 1]);
        let hidden = s.retrieve(None, SimTime(0), &cfg(2, 1.0, 1.0, 1.0), &[false, true, false]);
        assert_eq!(
            hidden.iter().map(|x| x.id.seq).collect::<Vec<_>>(),
            vec![1, 3],
            "invisible memories are never ranked"
        );
        assert!(s.retrieve(None, SimTime(0), &cfg(0, 1.0, 1.0, 1.0), &[]).is_empty());
        assert!(s.retrieve(None, SimTime(0), &cfg(-3, 1.0, 1.0, 1.0), &[]).is_empty());
    }

    #[test]
    fn touch_refreshes_recency() {
        let mut s = MemoryStream::default();
        s.push(rec(0, 5, 0, None));
        s.push(rec(1, 5, 10, None));
        s.touch(&[MemoryId { persona: 1, seq: 0 }], SimTime(20 * 3600));
        let got = s.retrieve(None, SimTime(20 * 3600), &cfg(1, 1.0, 0.0, 0.0), &[]);
        assert_eq!(got[0].id.seq, 0);
    }
}
