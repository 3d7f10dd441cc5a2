//! SSR inside the memory-embedding stage: which texts a tick adds to the
//! stage's plan, and the ratings its vectors give.
//!
//! Each reacting job asks for its reaction text under its own SSR consumer
//! id (`jobs + position`, apart from its memory drafts, so that what SSR
//! cost can be shown apart). Until the anchors' vectors are known, every
//! such job also asks for every anchor statement, so their cost is shared
//! among the jobs of the first stage that used them, like any shared text.

use super::IntentSection;
use super::{rate, SsrRating};
use crate::cost::Spend;
use crate::embed::Embedding;
use std::collections::BTreeMap;

/// What a tick added to the memory stage for SSR.
#[derive(Debug, Clone, Default)]
pub struct SsrPlan {
    /// Jobs in the tick (SSR consumer ids start here).
    pub jobs: u32,
    /// By job position, the request index of its reaction text.
    pub reaction: BTreeMap<u32, usize>,
    /// The request indices of the anchor statements (all sets, in order),
    /// from the first job that asked for them; empty when they were known.
    pub anchors: Vec<usize>,
}

impl SsrPlan {
    /// Appends the SSR requests of `reactions` (job position, reaction
    /// text) to `requests`; with `anchors_known` false, each also asks for
    /// every anchor statement of `intent`.
    pub fn build(
        requests: &mut Vec<(u32, std::sync::Arc<str>)>,
        jobs: u32,
        reactions: impl IntoIterator<Item = (u32, String)>,
        intent: &IntentSection,
        anchors_known: bool,
    ) -> SsrPlan {
        let mut plan = SsrPlan { jobs, ..Default::default() };
        for (position, text) in reactions {
            let consumer = jobs + position;
            plan.reaction.insert(position, requests.len());
            requests.push((consumer, text.into()));
            if !anchors_known {
                let first = plan.anchors.is_empty();
                for statement in intent.anchor_sets.iter().flat_map(|s| &s.statements) {
                    if first {
                        plan.anchors.push(requests.len());
                    }
                    requests.push((consumer, statement.as_str().into()));
                }
            }
        }
        plan
    }

    /// The job a consumer id belongs to, and whether it is an SSR consumer.
    pub fn owner(&self, consumer: u32) -> (u32, bool) {
        if consumer >= self.jobs {
            (consumer - self.jobs, true)
        } else {
            (consumer, false)
        }
    }

    /// The anchors' vectors from this stage, when it asked for them and
    /// got them all.
    pub fn anchor_vectors(&self, vectors: &[Option<Embedding>]) -> Option<Vec<Embedding>> {
        if self.anchors.is_empty() {
            return None;
        }
        self.anchors.iter().map(|i| vectors[*i].clone()).collect()
    }

    /// Each reacting job's rating, given the stage's vectors, the anchors'
    /// vectors and each SSR consumer's allocated cost.
    pub fn ratings(
        &self,
        vectors: &[Option<Embedding>],
        anchors: &[Embedding],
        intent: &IntentSection,
        cost: &BTreeMap<u32, Spend>,
    ) -> BTreeMap<u32, SsrRating> {
        let mut sets: Vec<Vec<&[f32]>> = Vec::new();
        let mut rest = anchors;
        for set in &intent.anchor_sets {
            let (this, more) = rest.split_at(set.statements.len().min(rest.len()));
            sets.push(this.iter().map(|v| &v.vector[..]).collect());
            rest = more;
        }
        self.reaction
            .iter()
            .filter_map(|(position, index)| {
                let v = vectors[*index].as_ref()?;
                let (pmf, expected) = rate(&v.vector, &sets, intent.epsilon, intent.temperature);
                let cost = cost.get(position).copied().unwrap_or_default();
                Some((*position, SsrRating { pmf, expected, cost }))
            })
            .collect()
    }
}
