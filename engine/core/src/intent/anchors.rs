//! Anchor sets: five statements, one per point of the scale, in order.

use serde::{Deserialize, Serialize};

/// The built-in purchase-intent anchor sets (`fixtures/intent/purchase-intent.toml`).
const BUILTIN: &str = include_str!("../../../../fixtures/intent/purchase-intent.toml");

/// One anchor set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AnchorSet {
    /// Its name.
    pub name: String,
    /// Five statements, for points 1 to 5.
    pub statements: Vec<String>,
}

impl AnchorSet {
    /// Why the set is unusable, if it is: not exactly five statements, an
    /// empty one, or two the same.
    pub fn problem(&self) -> Option<String> {
        if self.statements.len() != super::POINTS {
            return Some(format!(
                "anchor set {:?} has {} statements; it needs exactly {}, one per point of the scale",
                self.name,
                self.statements.len(),
                super::POINTS
            ));
        }
        if let Some(i) = self.statements.iter().position(|s| s.trim().is_empty()) {
            return Some(format!("anchor set {:?}: statement {} is empty", self.name, i + 1));
        }
        for (i, s) in self.statements.iter().enumerate() {
            if let Some(j) = self.statements[..i].iter().position(|t| t.trim() == s.trim()) {
                return Some(format!(
                    "anchor set {:?}: statements {} and {} are the same ({s:?})",
                    self.name,
                    j + 1,
                    i + 1
                ));
            }
        }
        None
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    set: Vec<AnchorSet>,
}

/// Parses an anchor-set file (`[[set]] name = ... statements = [...]`),
/// checking every set. `source` names it in errors.
pub fn parse_anchor_sets(text: &str, source: &str) -> crate::Result<Vec<AnchorSet>> {
    let file: File = toml::from_str(text)
        .map_err(|e| crate::Error::Parse { source_name: source.to_string(), source: Box::new(e) })?;
    if let Some(problem) = file.set.iter().find_map(AnchorSet::problem) {
        return Err(crate::Error::Fixture { source_name: source.to_string(), field: "set".into(), cause: problem });
    }
    Ok(file.set)
}

/// The built-in purchase-intent sets.
pub fn builtin_anchor_sets() -> Vec<AnchorSet> {
    parse_anchor_sets(BUILTIN, "fixtures/intent/purchase-intent.toml")
        .expect("the built-in anchor sets are valid; this is a bug")
}
