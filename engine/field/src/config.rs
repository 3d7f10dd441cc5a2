//! The field's parameters and their ranges.

use crate::error::FieldError;
use crate::pattern::MAX_AMPLIFICATION;
use serde::{Deserialize, Serialize};

/// Field parameters; the defaults are the source's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FieldConfig {
    /// Decay constant per simulated hour. Default 0.1 (a 6.9 h half-life).
    pub lambda: f64,
    /// Score boost per access. Default 0.05.
    pub boost_per_access: f64,
    /// Cap of the access boost factor. Default 2.
    pub boost_cap: f64,
    /// Strength bonus for each pattern returned together with others.
    /// Default 0.02.
    pub co_access_bonus: f64,
    /// Patterns whose decayed strength falls below this are archived (left
    /// out of queries). Default 0.05.
    pub archive_below: f64,
    /// Boundary permeability applied at injection. Default 1.
    pub permeability: f64,
    /// Resonance amplification: when a query returns two patterns that
    /// resonate (cosine above 0.7, both decayed strengths above 0.1), each
    /// gains `factor x resonance` of the pair (its strongest one) as score
    /// bonus. Default 0.2, the source's cap (`amplification = resonance x
    /// 0.2`); 0 turns amplification off; above 0.2 is refused.
    pub resonance_amplification: f64,
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
        if !(self.boost_cap.is_finite() && self.boost_cap >= 1.0) {
            return bad("boost_cap", format!("must be a finite number >= 1, got {}", self.boost_cap));
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
            threads: one_thread(),
        }
    }
}
