//! The embedder sanity check (plan `000_*`, risk 5): before an experiment
//! trusts an embedder's similarities, known paraphrases must score high and
//! unrelated sentences low.
//!
//! The pairs were chosen so that paraphrases share few words: a lexical
//! embedder (the local hash embedder) scores them low, which is what it is
//! by design, and the check reports it as lexical rather than failing it.
//! all-MiniLM-L6-v2 scores the paraphrases 0.53 to 0.75 and the unrelated
//! pairs -0.02 to 0.11 (sentence-transformers 6.2, this model's weights).

use serde::{Deserialize, Serialize};

/// A paraphrase scores at least this.
pub const PARAPHRASE_MIN: f64 = 0.45;
/// An unrelated pair scores at most this.
pub const UNRELATED_MAX: f64 = 0.25;

/// Pairs that say the same thing in other words.
pub const PARAPHRASES: &[(&str, &str)] = &[
    ("The weather is lovely today.", "It's so sunny outside!"),
    ("I can't afford this, it is far too expensive.", "The price is more than I am able to pay."),
    ("These shoes are made from recycled plastic bottles.", "This footwear is produced from reclaimed plastic."),
    ("Electricity bills will go up this summer.", "Power costs are expected to rise during the hot months."),
    ("I would definitely buy this product.", "I am certain that I will purchase it."),
    (
        "The doctor said the infection no longer responds to antibiotics.",
        "Her bacteria have become resistant to the medicine.",
    ),
];

/// Pairs about unrelated things.
pub const UNRELATED: &[(&str, &str)] = &[
    ("The weather is lovely today.", "He drove to the stadium."),
    ("I would definitely buy this product.", "Antibiotic resistance is spreading in hospitals."),
    ("These shoes are made from recycled plastic bottles.", "The central bank raised interest rates again."),
    ("Electricity bills will go up this summer.", "My cat sleeps on the sofa all afternoon."),
    ("I can't afford this, it is far too expensive.", "The river flooded the old town last spring."),
];

/// What kind of similarity an embedder offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Similarity {
    /// Shared letters and words (the local hash embedder, by design).
    Lexical,
    /// Meaning (a neural model, local or hosted).
    Semantic,
}

/// One scored pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairScore {
    /// First text.
    pub a: String,
    /// Second text.
    pub b: String,
    /// `paraphrase` or `unrelated`.
    pub kind: String,
    /// Their cosine similarity.
    pub cosine: f64,
    /// Whether it is on the right side of its threshold.
    pub pass: bool,
}

/// The check's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckReport {
    /// The embedding model.
    pub model: String,
    /// What kind of similarity it offers.
    pub similarity: Similarity,
    /// Every pair, paraphrases first.
    pub pairs: Vec<PairScore>,
    /// `PARAPHRASE_MIN`.
    pub paraphrase_min: f64,
    /// `UNRELATED_MAX`.
    pub unrelated_max: f64,
    /// Every pair passed.
    pub passed: bool,
    /// One line: passed, failed (naming the pairs) or lexical by design.
    pub verdict: String,
}

impl CheckReport {
    /// Whether a caller that needs semantic similarity should refuse the
    /// embedder: a semantic embedder that failed. A lexical one is what it
    /// says it is, and is reported, not refused.
    pub fn refuses(&self) -> bool {
        self.similarity == Similarity::Semantic && !self.passed
    }
}

/// Every text the check embeds, in order: each pair's two texts,
/// paraphrases first.
pub fn texts() -> Vec<String> {
    PARAPHRASES.iter().chain(UNRELATED).flat_map(|(a, b)| [a.to_string(), b.to_string()]).collect()
}

/// The cosine similarity of two vectors, in f64; 0 when either is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let norm = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let n = norm(a) * norm(b);
    if n == 0.0 {
        0.0
    } else {
        dot / n
    }
}

/// Scores `vectors` (one per text of [`texts`], in order).
pub fn judge(model: &str, similarity: Similarity, vectors: &[impl AsRef<[f32]>]) -> CheckReport {
    let pairs: Vec<PairScore> = PARAPHRASES
        .iter()
        .map(|p| (p, "paraphrase"))
        .chain(UNRELATED.iter().map(|p| (p, "unrelated")))
        .zip(vectors.chunks(2))
        .map(|(((a, b), kind), v)| {
            let cosine = cosine(v[0].as_ref(), v[1].as_ref());
            let pass = if kind == "paraphrase" { cosine >= PARAPHRASE_MIN } else { cosine <= UNRELATED_MAX };
            PairScore { a: a.to_string(), b: b.to_string(), kind: kind.into(), cosine, pass }
        })
        .collect();
    let failing: Vec<String> = pairs
        .iter()
        .filter(|p| !p.pass)
        .map(|p| format!("{} {:?} / {:?} ({:.3})", p.kind, p.a, p.b, p.cosine))
        .collect();
    let passed = failing.is_empty();
    let verdict = match (similarity, passed) {
        (_, true) => format!("{model} passes: every paraphrase scores at least {PARAPHRASE_MIN}, every unrelated pair at most {UNRELATED_MAX}"),
        (Similarity::Lexical, false) => format!(
            "{model} is lexical by design (similar means sharing words): {} of {} pairs miss their threshold; use a neural embedder (provider = \"minilm\") for semantic similarity",
            failing.len(),
            pairs.len()
        ),
        (Similarity::Semantic, false) => format!("{model} fails the check: {}", failing.join("; ")),
    };
    CheckReport {
        model: model.into(),
        similarity,
        pairs,
        paraphrase_min: PARAPHRASE_MIN,
        unrelated_max: UNRELATED_MAX,
        passed,
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_semantic_embedder_that_confuses_pairs_is_refused_and_a_lexical_one_is_not() {
        let n = texts().len();
        // Every text the same vector: unrelated pairs score 1.
        let same = vec![vec![1.0f32, 0.0]; n];
        let r = judge("broken", Similarity::Semantic, &same);
        assert!(!r.passed && r.refuses());
        assert!(r.verdict.contains("unrelated") && r.verdict.contains("He drove to the stadium."), "{}", r.verdict);
        let lexical = judge("local-hash-v1", Similarity::Lexical, &same);
        assert!(!lexical.refuses() && lexical.verdict.contains("lexical by design"));
        // Pairs apart, paraphrases together.
        let good: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                if i < 2 * PARAPHRASES.len() {
                    vec![1.0, (i % 2) as f32 * 0.1]
                } else {
                    vec![(i % 2) as f32, 1.0 - (i % 2) as f32]
                }
            })
            .collect();
        let r = judge("good", Similarity::Semantic, &good);
        assert!(r.passed && !r.refuses(), "{}", r.verdict);
    }
}
