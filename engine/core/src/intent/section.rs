//! `[intent]`: how purchase intent is measured. The section belongs to the
//! intent stage that reads it; the configuration re-exports it.

use serde::{Deserialize, Serialize};

/// How purchase intent is measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IntentMethod {
    /// The digit the chat model prints (the default).
    #[default]
    Direct,
    /// Semantic similarity rating of the reaction text (see
    /// [`crate::intent`]); the summary leads with it.
    Ssr,
    /// Both, side by side, with the KS similarity of their distributions.
    Both,
}

/// `[intent]`: how purchase intent is measured. The persona's own state
/// always follows the direct rating; SSR is a measurement beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IntentSection {
    /// `direct` (default), `ssr` or `both`.
    pub method: IntentMethod,
    /// The paper's epsilon, added to the least similar point. Default 0,
    /// the paper's.
    pub epsilon: f64,
    /// Reshapes each set's pmf (`p^(1/T)`); 1 leaves it, 0 keeps only the
    /// most likely point. Default 1.
    pub temperature: f64,
    /// The anchor sets. Empty: the built-in purchase-intent sets
    /// (`fixtures/intent/purchase-intent.toml`), which the resolved config
    /// then lists, so that a trace replays with the sets it ran with.
    pub anchor_sets: Vec<super::AnchorSet>,
}

impl Default for IntentSection {
    fn default() -> Self {
        IntentSection { method: IntentMethod::Direct, epsilon: 0.0, temperature: 1.0, anchor_sets: Vec::new() }
    }
}

impl IntentSection {
    /// Whether SSR runs.
    pub fn ssr(&self) -> bool {
        self.method != IntentMethod::Direct
    }

    /// Whether it is the default (and so left out of the canonical form).
    pub fn is_default(&self) -> bool {
        *self == IntentSection::default()
    }
}
