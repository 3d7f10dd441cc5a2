//! Money, tokens and their exact division.
//!
//! Money is integer nano-USD and tokens are integers, so totals can be
//! conserved exactly. [`split_proportional`] is the one rounding rule:
//! largest remainder, ties to the earlier position.

use serde::{Deserialize, Serialize};

/// Nano-USD per USD.
pub const NANO_PER_USD: u64 = 1_000_000_000;

/// Tokens and money for one or more model calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, bincode::Encode)]
pub struct Spend {
    /// Tokens sent to the model (prompt or embedding input).
    pub input_tokens: u64,
    /// Tokens the model produced (zero for embeddings).
    pub output_tokens: u64,
    /// Cost in nano-USD.
    pub nano_usd: u64,
}

impl Spend {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Spend) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.nano_usd += other.nano_usd;
    }
}

/// A resolved price: nano-USD per million tokens, for input and output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    /// Nano-USD per million input tokens.
    pub input_nano_per_mtok: u64,
    /// Nano-USD per million output tokens.
    pub output_nano_per_mtok: u64,
}

impl Price {
    /// Converts USD-per-million-token prices, rounding to the nano-USD.
    pub fn from_usd_per_mtok(input: f64, output: f64) -> Self {
        let conv = |usd: f64| (usd * NANO_PER_USD as f64).round() as u64;
        Price { input_nano_per_mtok: conv(input), output_nano_per_mtok: conv(output) }
    }

    /// What one call with these token counts is billed, rounded half up to
    /// the nano-USD.
    pub fn bill(&self, input_tokens: u64, output_tokens: u64) -> Spend {
        let raw = u128::from(input_tokens) * u128::from(self.input_nano_per_mtok)
            + u128::from(output_tokens) * u128::from(self.output_nano_per_mtok);
        let nano = (raw + 500_000) / 1_000_000;
        Spend { input_tokens, output_tokens, nano_usd: u64::try_from(nano).unwrap_or(u64::MAX) }
    }
}

/// The token estimator used everywhere (billing of the embedded models and
/// the weights of cost allocation): one token per four bytes, rounded up.
/// An empty text estimates to zero; allocation weighs it at least 1.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// Splits `total` into parts proportional to `weights`, exactly.
///
/// Each part gets the floor of its exact share; the remaining units go one
/// each to the largest fractional remainders, ties to the lower index. The
/// parts always sum to `total`. With all weights zero, every weight counts
/// as one.
pub fn split_proportional(total: u64, weights: &[u64]) -> Vec<u64> {
    if weights.is_empty() {
        return Vec::new();
    }
    let sum: u128 = weights.iter().map(|w| u128::from(*w)).sum();
    let ones;
    let (weights, sum) = if sum == 0 {
        ones = vec![1u64; weights.len()];
        (&ones[..], weights.len() as u128)
    } else {
        (weights, sum)
    };
    let mut parts = Vec::with_capacity(weights.len());
    let mut rems = Vec::with_capacity(weights.len());
    let mut given: u128 = 0;
    for (i, w) in weights.iter().enumerate() {
        let exact = u128::from(total) * u128::from(*w);
        let q = exact / sum;
        parts.push(q as u64);
        rems.push((exact % sum, i));
        given += q;
    }
    let mut left = (u128::from(total) - given) as usize;
    if left > 0 {
        // Largest remainder first; equal remainders go to the earlier index.
        rems.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        for (_, i) in rems {
            if left == 0 {
                break;
            }
            parts[i] += 1;
            left -= 1;
        }
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Purpose, Stream};

    #[test]
    fn split_conserves_any_total() {
        let mut s = Stream::derive(11, 0, 0, Purpose::Testing);
        for _ in 0..2_000 {
            let n = 1 + s.below(12);
            let weights: Vec<u64> = (0..n).map(|_| s.below(5) as u64 * (s.below(1000) as u64)).collect();
            let total = s.next_u64() % 10_000_000;
            let parts = split_proportional(total, &weights);
            assert_eq!(parts.iter().sum::<u64>(), total, "weights {weights:?}");
            assert_eq!(parts.len(), n);
        }
    }

    #[test]
    fn split_rounds_largest_remainder_ties_first() {
        assert_eq!(split_proportional(10, &[1, 1, 1]), vec![4, 3, 3]);
        assert_eq!(split_proportional(2, &[1, 1, 1]), vec![1, 1, 0]);
        assert_eq!(split_proportional(7, &[0, 0]), vec![4, 3]);
        assert_eq!(split_proportional(100, &[3, 1]), vec![75, 25]);
        assert_eq!(split_proportional(5, &[2, 1, 0]), vec![3, 2, 0]);
    }

    #[test]
    fn billing_rounds_half_up() {
        let p = Price::from_usd_per_mtok(0.02, 0.0);
        assert_eq!(p.input_nano_per_mtok, 20_000_000);
        assert_eq!(p.bill(1, 0).nano_usd, 20);
        let p = Price { input_nano_per_mtok: 1_500_000, output_nano_per_mtok: 0 };
        assert_eq!(p.bill(1, 0).nano_usd, 2);
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcde"), 2);
    }
}
