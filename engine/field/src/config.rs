//! The field's parameters and their ranges.

use crate::error::FieldError;
use serde::{Deserialize, Serialize};

/// The largest amplification factor the source allows.
pub const MAX_AMPLIFICATION: f64 = 0.2;
/// The cap on what resonance amplification adds to a score, as a share of
/// the plan score (the source's risk 10: its `resonance x 0.2` is a cap on
/// the effect, not a rate of growth).
pub const MAX_EXTRA: f64 = 0.2;
/// The most the co-access bonus adds to a pattern's strength: 50 co-accesses
/// at the default 0.02. A pattern's score is then at most
/// `cos x (S0 + 1) x boost cap x 1.2`, however often it is co-accessed.
pub const MAX_CO_ACCESS: f64 = 1.0;
/// The largest `strength x permeability` a pattern may hold. Scores stay
/// below `MAX_STRENGTH x boost cap x 1.2` and resonances below its
/// square, so no figure the field prints can overflow; the source's
/// strengths are around 1.
pub const MAX_STRENGTH: f64 = 1e6;
/// The largest access boost cap a field accepts (the source's is 2): with
/// [`MAX_STRENGTH`] it keeps every strength below 1.2e8 and every
/// resonance below 1.5e16, far from overflow.
pub const MAX_BOOST_CAP: f64 = 100.0;

/// Field parameters; the defaults are the source's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FieldConfig {
    /// Decay constant per simulated hour. Default 0.1 (a 6.9 h half-life).
    pub lambda: f64,
    /// Score boost per access. Default 0.05.
    pub boost_per_access: f64,
    /// Cap of the access boost factor. Default 2, at most
    /// [`MAX_BOOST_CAP`](crate::field::MAX_BOOST_CAP).
    pub boost_cap: f64,
    /// Hebbian co-access bonus: each time a pattern is returned together
    /// with others, its strength rises by this much (it decays with the
    /// pattern), up to [`MAX_CO_ACCESS`](crate::field::MAX_CO_ACCESS) in
    /// all; apart from the resonance cap. Default 0.02, the source's
    /// `boost_strength(pid, bonus=0.02)`.
    pub co_access_bonus: f64,
    /// Patterns whose decayed strength falls below this are archived (left
    /// out of queries). Default 0.05.
    pub archive_below: f64,
    /// Boundary permeability applied at injection. Default 1.
    pub permeability: f64,
    /// Resonance amplification: when a query returns two patterns that
    /// resonate (cosine above 0.7, both decayed strengths above 0.1), each
    /// is amplified by `factor x resonance` of its strongest pair in that
    /// answer, as a share of its plan score. The value is *replaced* at
    /// each answer, never added to, and resonance is measured without it,
    /// so nothing grows from its own earlier amplification; it is capped at
    /// [`MAX_EXTRA`](crate::field::MAX_EXTRA) of the plan score.
    /// Default 0.2, the source's factor (`amplification = resonance x
    /// 0.2`); 0 turns amplification off; above 0.2 is refused.
    pub resonance_amplification: f64,
    /// The monitor's alarm: a phase whose max/min effective strength ratio
    /// over the live patterns exceeds this is reported as one pattern
    /// drowning out the rest (the source's risk 10). Default 100. A
    /// monitoring threshold: it changes no score.
    pub ratio_alarm: f64,
    /// The lock-in monitor's N: the share of answer slots held by the N
    /// patterns that answered most, over a window of phases. Default 20. A
    /// monitoring setting, apart from the queries' `k`: it changes no score.
    /// The three lock-in settings are not written to the event log (whose
    /// format they would change); `field stats` uses the defaults.
    #[serde(skip, default = "default_lock_in_top")]
    pub lock_in_top: usize,
    /// The lock-in monitor's window, in phases (the last this many phases'
    /// answers). Default 12.
    #[serde(skip, default = "default_lock_in_window")]
    pub lock_in_window: u32,
    /// The lock-in alarm: a phase whose window is full and whose window's
    /// top-N share exceeds this, while the field holds more than N live
    /// patterns, is reported as locked in. Default 0.9.
    #[serde(skip, default = "default_lock_in_alarm")]
    pub lock_in_alarm: f64,
    /// FAISS's OpenMP threads, process-wide (see [`crate::threads`]).
    /// Default 1; 0 leaves OpenMP's own choice.
    /// Operational: never written out or read back, never in a digest.
    #[serde(skip, default = "one_thread")]
    pub threads: u32,
}

impl FieldConfig {
    /// Checks every parameter's range.
    pub fn validate(&self) -> Result<(), FieldError> {
        let bad = |field, cause: String| Err(FieldError::Config { field, cause });
        let non_negative = [
            ("lambda", self.lambda),
            ("boost_per_access", self.boost_per_access),
            ("co_access_bonus", self.co_access_bonus),
            ("archive_below", self.archive_below),
            ("permeability", self.permeability),
        ];
        for (field, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return bad(field, format!("must be a finite number >= 0, got {v}"));
            }
        }
        if !(self.boost_cap.is_finite() && (1.0..=MAX_BOOST_CAP).contains(&self.boost_cap)) {
            let cap = self.boost_cap;
            return bad("boost_cap", format!("must be a number from 1 to {MAX_BOOST_CAP}, got {cap}"));
        }
        if !(self.ratio_alarm.is_finite() && self.ratio_alarm > 1.0) {
            return bad("ratio_alarm", format!("must be a finite number > 1, got {}", self.ratio_alarm));
        }
        if self.lock_in_top == 0 {
            return bad("lock_in_top", "must be at least 1, got 0".into());
        }
        if self.lock_in_window == 0 {
            return bad("lock_in_window", "must be at least 1 phase, got 0".into());
        }
        if !(self.lock_in_alarm > 0.0 && self.lock_in_alarm < 1.0) {
            return bad("lock_in_alarm", format!("must be a share between 0 and 1, got {}", self.lock_in_alarm));
        }
        if !(0.0..=MAX_AMPLIFICATION).contains(&self.resonance_amplification) {
            let a = self.resonance_amplification;
            return bad(
                "resonance_amplification",
                format!("must be between 0 and {MAX_AMPLIFICATION} (the source's cap), got {a}"),
            );
        }
        Ok(())
    }
}

fn one_thread() -> u32 {
    1
}

fn default_lock_in_top() -> usize {
    20
}

fn default_lock_in_window() -> u32 {
    12
}

fn default_lock_in_alarm() -> f64 {
    0.9
}

impl FieldConfig {
    /// A plain shared vector store: the field's index and retrieval
    /// (cosine x strength, top k) with no decay, no access boost, no
    /// co-access bonus and no resonance amplification. The experiment's
    /// third arm: what a shared store gives without the field's mechanisms.
    pub fn plain_store() -> FieldConfig {
        FieldConfig {
            lambda: 0.0,
            boost_per_access: 0.0,
            co_access_bonus: 0.0,
            resonance_amplification: 0.0,
            ..FieldConfig::default()
        }
    }
}

impl Default for FieldConfig {
    fn default() -> Self {
        FieldConfig {
            lambda: 0.1,
            boost_per_access: 0.05,
            boost_cap: 2.0,
            co_access_bonus: 0.02,
            archive_below: 0.05,
            permeability: 1.0,
            resonance_amplification: 0.2,
            ratio_alarm: 100.0,
            lock_in_top: default_lock_in_top(),
            lock_in_window: default_lock_in_window(),
            lock_in_alarm: default_lock_in_alarm(),
            threads: one_thread(),
        }
    }
}
