//! Purchase intent by semantic similarity rating (SSR), beside the direct
//! rating the chat model prints.
//!
//! SSR (Maier et al. 2025, "LLMs Reproduce Human Purchase Intent via
//! Semantic Similarity Elicitation of Likert Ratings", arXiv 2510.08338)
//! embeds a respondent's free-text answer and compares it with five anchor
//! statements, one per point of the 1-5 scale. This module follows the
//! paper's equation 8 and its reference implementation: for one anchor set
//! with cosine similarities `g_1..g_5` and `l` the anchor of least
//! similarity,
//!
//! ```text
//! p(r) = (g_r - g_l + eps * [r == l]) / (sum_s g_s - 5 g_l + eps)
//! ```
//!
//! then a temperature `T` reshapes it, `p(r)^(1/T)` renormalised (`T = 0`
//! puts all mass on the most likely point), and the pmfs of the anchor
//! sets are averaged. The rating is the pmf's expectation. A set whose
//! similarities are all equal (and `eps = 0`) carries no information and
//! gives the uniform pmf.
//!
//! SSR is a measurement: it is recorded in the outcome and covered by
//! `digest`, and never feeds back into a persona's state.

pub mod anchors;
pub mod section;
pub mod stage;
pub mod stats;

pub use anchors::{builtin_anchor_sets, AnchorSet};
pub use section::{IntentMethod, IntentSection};
pub use stats::{ks_similarity, pmf_of_counts};

use serde::{Deserialize, Serialize};

/// Points of the scale.
pub const POINTS: usize = 5;

/// One reaction's SSR measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
pub struct SsrRating {
    /// Probability of each point 1..5, averaged over the anchor sets.
    pub pmf: [f64; POINTS],
    /// The pmf's expectation, in [1, 5].
    pub expected: f64,
    /// This job's share of what the SSR texts (its reaction, and in the
    /// first stage the anchors) cost in the memory-embedding stage; part
    /// of the job's memory-embedding estimate, shown apart.
    pub cost: crate::cost::Spend,
}

/// The pmf of one anchor set from its five similarities (equation 8).
pub fn set_pmf(similarities: &[f64; POINTS], epsilon: f64) -> [f64; POINTS] {
    to_points(set_pmf_over(similarities, epsilon))
}

/// Equation 8 over any number of points `k` (a survey question's
/// options): `p(r) = (g_r - g_l + eps [r = l]) / (sum g - k g_l + eps)`;
/// the uniform pmf when the similarities carry no information.
pub fn set_pmf_over(similarities: &[f64], epsilon: f64) -> Vec<f64> {
    let k = similarities.len();
    let (least, min) =
        similarities
            .iter()
            .enumerate()
            .fold((0, f64::INFINITY), |(li, lv), (i, v)| if *v < lv { (i, *v) } else { (li, lv) });
    let total: f64 = similarities.iter().sum::<f64>() - k as f64 * min + epsilon;
    if total <= 0.0 || !total.is_finite() {
        return vec![1.0 / k as f64; k];
    }
    similarities.iter().enumerate().map(|(r, g)| (g - min + if r == least { epsilon } else { 0.0 }) / total).collect()
}

/// Reshapes `pmf` by `temperature`: `p^(1/T)` renormalised; `T = 0` puts
/// all mass on the most likely point (the first, on a tie); a flat pmf
/// stays flat.
pub fn with_temperature(pmf: [f64; POINTS], temperature: f64) -> [f64; POINTS] {
    to_points(with_temperature_over(pmf.to_vec(), temperature))
}

/// [`with_temperature`] over any number of points.
pub fn with_temperature_over(pmf: Vec<f64>, temperature: f64) -> Vec<f64> {
    if (temperature - 1.0).abs() < f64::EPSILON {
        return pmf;
    }
    if temperature <= 0.0 {
        if pmf.iter().all(|p| (p - pmf[0]).abs() < f64::EPSILON) {
            return pmf;
        }
        let best = pmf.iter().enumerate().fold(0, |b, (i, p)| if *p > pmf[b] { i } else { b });
        return (0..pmf.len()).map(|i| if i == best { 1.0 } else { 0.0 }).collect();
    }
    let out: Vec<f64> = pmf.iter().map(|p| p.powf(1.0 / temperature)).collect();
    let sum: f64 = out.iter().sum();
    if sum <= 0.0 || !sum.is_finite() {
        return pmf;
    }
    out.iter().map(|p| p / sum).collect()
}

fn to_points(v: Vec<f64>) -> [f64; POINTS] {
    v.try_into().expect("five similarities give five probabilities; this is a bug")
}

/// The expectation of a pmf over 1..5.
pub fn expected(pmf: &[f64; POINTS]) -> f64 {
    pmf.iter().enumerate().map(|(r, p)| (r + 1) as f64 * p).sum()
}

/// SSR of one response vector against the anchor sets' vectors (five per
/// set, in scale order): each set's pmf, reshaped by `temperature`, then
/// averaged over the sets.
pub fn rate(response: &[f32], sets: &[Vec<&[f32]>], epsilon: f64, temperature: f64) -> ([f64; POINTS], f64) {
    let mut pmf = [0.0; POINTS];
    for set in sets {
        let mut g = [0.0; POINTS];
        for (r, anchor) in set.iter().take(POINTS).enumerate() {
            g[r] = crate::embed::check::cosine(response, anchor);
        }
        let p = with_temperature(set_pmf(&g, epsilon), temperature);
        pmf.iter_mut().zip(p).for_each(|(a, b)| *a += b / sets.len() as f64);
    }
    if sets.is_empty() {
        pmf = [1.0 / POINTS as f64; POINTS];
    }
    (pmf, expected(&pmf))
}

#[cfg(test)]
mod tests;
