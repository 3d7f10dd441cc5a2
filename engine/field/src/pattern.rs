//! A pattern: what an agent injected into the field, with its strength,
//! its access history and its vector, and the arithmetic of its score.

use crate::config::{FieldConfig, MAX_CO_ACCESS, MAX_EXTRA};
use crate::error::FieldError;
use engine::clock::SimTime;
use engine::digest::Digest;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One pattern.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pattern {
    /// Id, also its FAISS id.
    pub id: u64,
    /// The agent that injected it.
    pub agent: String,
    /// Its key.
    pub key: String,
    /// Its value.
    pub value: String,
    /// Digest of key and value: re-injecting it reinforces.
    pub content_hash: Digest,
    /// Effective strength at injection, `strength x permeability`.
    pub strength: f64,
    /// Simulated creation time.
    pub created: SimTime,
    /// Simulated time of the last access (resets the decay clock).
    pub last_access: SimTime,
    /// Accesses.
    pub accesses: u32,
    /// Times it was returned together with other patterns (the Hebbian
    /// co-access count; its effect is capped, see [`Pattern::extra`]).
    pub co_accesses: u32,
    /// `resonance_amplification x` its strongest resonance in the last
    /// answer that returned it (0 when none resonated): replaced at every
    /// answer, never accumulated.
    pub amplification: f64,
    /// The agents whose queries returned it (or who re-injected it).
    pub accessed_by: BTreeSet<String>,
    /// The normalised vector.
    pub vector: Vec<f32>,
}

impl Pattern {
    /// What co-access has added to the strength: `min(co_access_bonus x
    /// co_accesses, MAX_CO_ACCESS)`.
    pub fn co_access(&self, cfg: &FieldConfig) -> f64 {
        (cfg.co_access_bonus * f64::from(self.co_accesses)).min(MAX_CO_ACCESS)
    }

    /// `S0` with the co-access bonus: `strength + co_access`.
    pub fn base(&self, cfg: &FieldConfig) -> f64 {
        self.strength + self.co_access(cfg)
    }

    /// `(S0 + co-access) x e^(-lambda t)`, t in hours since the last access.
    pub fn decayed(&self, cfg: &FieldConfig, now: SimTime) -> f64 {
        self.base(cfg) * (-cfg.lambda * now.hours_since(self.last_access)).exp()
    }

    /// `min(1 + boost x accesses, cap)`.
    pub fn boost(&self, cfg: &FieldConfig) -> f64 {
        (1.0 + cfg.boost_per_access * f64::from(self.accesses)).min(cfg.boost_cap)
    }

    /// The plan's strength, `S0 x e^(-lambda t) x boost`: what the plan
    /// ranks by (times the cosine) and what resonance multiplies.
    pub fn plan_strength(&self, cfg: &FieldConfig, now: SimTime) -> f64 {
        self.decayed(cfg, now) * self.boost(cfg)
    }

    /// The bounded extra share, `min(amplification, 0.2)`: what resonance
    /// adds, as a share of the plan score.
    pub fn extra(&self, _cfg: &FieldConfig) -> f64 {
        self.amplification.min(MAX_EXTRA)
    }

    /// The effective strength, `plan strength x (1 + extra)`: decay, boost
    /// and amplification together; what the monitor's ratio is taken over.
    pub fn effective(&self, cfg: &FieldConfig, now: SimTime) -> f64 {
        self.plan_strength(cfg, now) * (1.0 + self.extra(cfg))
    }

    /// The query score for a cosine similarity, `cosine x effective
    /// strength`: the plan score raised by at most 0.2 of itself, and never
    /// lifted above zero when the cosine is not positive.
    pub fn score(&self, cfg: &FieldConfig, now: SimTime, cosine: f64) -> f64 {
        cosine * self.effective(cfg, now)
    }

    /// The strength resonance sees: the plan's strength, without the
    /// extra share, so that amplification never feeds the resonance it
    /// comes from.
    pub fn resonant_strength(&self, cfg: &FieldConfig, now: SimTime) -> f64 {
        self.plan_strength(cfg, now)
    }

    /// `NonFinite` naming this pattern.
    pub(crate) fn non_finite(&self, what: &'static str, value: f64) -> FieldError {
        FieldError::NonFinite { id: self.id, key: self.key.clone(), what, value }
    }
}
