//! Money, tokens and their exact division.
//!
//! Money is integer nano-USD and tokens are integers, so totals can be
//! conserved exactly. [`split_proportional`] is the one rounding rule:
//! largest remainder, ties to the earlier position.

use serde::{Deserialize, Serialize};

/// Nano-USD per USD.
pub const NANO_PER_USD: u64 = 1_000_000_000;

/// Tokens and money for one or more model calls.
///
/// Its binary layout (trace, chat log, cassette) has four fields in the
/// order declared; files written before trace format 6 hold the first three
/// only and are read and appended to through [`with_layout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Spend {
    /// Tokens sent to the model (prompt or embedding input).
    pub input_tokens: u64,
    /// Tokens the model produced (zero for embeddings).
    pub output_tokens: u64,
    /// Cost in nano-USD.
    pub nano_usd: u64,
    /// The part of `input_tokens` the provider served from its prompt
    /// cache (`usage.prompt_tokens_details.cached_tokens`), billed at the
    /// cached-input price. Zero when the provider reports none. Digests
    /// leave it out: `nano_usd` carries what it changed.
    pub cached_input_tokens: u64,
}

impl Spend {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Spend) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.nano_usd += other.nano_usd;
        self.cached_input_tokens += other.cached_input_tokens;
    }
}

/// The binary layout of [`Spend`] in a file being read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Four fields: what this engine writes.
    #[default]
    Current,
    /// Three fields, without the cached tokens: trace formats 3 to 5, chat
    /// log and cassette version 1.
    BeforeCached,
}

thread_local! {
    static LAYOUT: std::cell::Cell<Layout> = const { std::cell::Cell::new(Layout::Current) };
}

/// Runs `f` with [`Spend`] encoded and decoded in `layout` on this thread
/// (binary formats only; JSON always has every field). The layout is
/// restored afterwards, even if `f` panics.
pub fn with_layout<R>(layout: Layout, f: impl FnOnce() -> R) -> R {
    struct Restore(Layout);
    impl Drop for Restore {
        fn drop(&mut self) {
            LAYOUT.with(|l| l.set(self.0));
        }
    }
    let _restore = Restore(LAYOUT.with(|l| l.replace(layout)));
    f()
}

fn legacy() -> bool {
    LAYOUT.with(std::cell::Cell::get) == Layout::BeforeCached
}

impl Serialize for Spend {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let legacy = !s.is_human_readable() && legacy();
        let mut st = s.serialize_struct("Spend", if legacy { 3 } else { 4 })?;
        st.serialize_field("input_tokens", &self.input_tokens)?;
        st.serialize_field("output_tokens", &self.output_tokens)?;
        st.serialize_field("nano_usd", &self.nano_usd)?;
        if !legacy {
            st.serialize_field("cached_input_tokens", &self.cached_input_tokens)?;
        }
        st.end()
    }
}

impl<'de> Deserialize<'de> for Spend {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "Spend")]
        struct Old {
            input_tokens: u64,
            output_tokens: u64,
            nano_usd: u64,
        }
        #[derive(Deserialize)]
        #[serde(rename = "Spend")]
        struct New {
            input_tokens: u64,
            output_tokens: u64,
            nano_usd: u64,
            #[serde(default)]
            cached_input_tokens: u64,
        }
        if !d.is_human_readable() && legacy() {
            let o = Old::deserialize(d)?;
            return Ok(Spend {
                input_tokens: o.input_tokens,
                output_tokens: o.output_tokens,
                nano_usd: o.nano_usd,
                cached_input_tokens: 0,
            });
        }
        let n = New::deserialize(d)?;
        Ok(Spend {
            input_tokens: n.input_tokens,
            output_tokens: n.output_tokens,
            nano_usd: n.nano_usd,
            cached_input_tokens: n.cached_input_tokens,
        })
    }
}

impl bincode::Encode for Spend {
    fn encode<E: bincode::enc::Encoder>(&self, e: &mut E) -> Result<(), bincode::error::EncodeError> {
        self.input_tokens.encode(e)?;
        self.output_tokens.encode(e)?;
        self.nano_usd.encode(e)?;
        if !legacy() {
            self.cached_input_tokens.encode(e)?;
        }
        Ok(())
    }
}

/// A resolved price: nano-USD per million tokens, for input (fresh and
/// served from the provider's prompt cache) and output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Price {
    /// Nano-USD per million input tokens.
    pub input_nano_per_mtok: u64,
    /// Nano-USD per million output tokens.
    pub output_nano_per_mtok: u64,
    /// Nano-USD per million input tokens served from the provider's cache.
    pub cached_input_nano_per_mtok: u64,
}

impl Price {
    /// Converts USD-per-million-token prices, rounding to the nano-USD.
    /// Cached input costs what input costs until
    /// [`Price::with_cached_usd_per_mtok`] says otherwise.
    pub fn from_usd_per_mtok(input: f64, output: f64) -> Self {
        let input = usd_to_nano(input);
        Price {
            input_nano_per_mtok: input,
            output_nano_per_mtok: usd_to_nano(output),
            cached_input_nano_per_mtok: input,
        }
    }

    /// The same price with cached input at `cached` USD per million tokens.
    pub fn with_cached_usd_per_mtok(mut self, cached: f64) -> Self {
        self.cached_input_nano_per_mtok = usd_to_nano(cached);
        self
    }

    /// What one call with these token counts is billed, rounded half up to
    /// the nano-USD, with no input served from a cache.
    pub fn bill(&self, input_tokens: u64, output_tokens: u64) -> Spend {
        self.bill_cached(input_tokens, 0, output_tokens)
    }

    /// What one call is billed when `cached` of its `input_tokens` were
    /// served from the provider's prompt cache (capped at `input_tokens`),
    /// rounded half up to the nano-USD.
    pub fn bill_cached(&self, input_tokens: u64, cached: u64, output_tokens: u64) -> Spend {
        let cached = cached.min(input_tokens);
        let raw = u128::from(input_tokens - cached) * u128::from(self.input_nano_per_mtok)
            + u128::from(cached) * u128::from(self.cached_input_nano_per_mtok)
            + u128::from(output_tokens) * u128::from(self.output_nano_per_mtok);
        let nano = (raw + 500_000) / 1_000_000;
        Spend {
            input_tokens,
            output_tokens,
            nano_usd: u64::try_from(nano).unwrap_or(u64::MAX),
            cached_input_tokens: cached,
        }
    }
}

fn usd_to_nano(usd: f64) -> u64 {
    (usd * NANO_PER_USD as f64).round() as u64
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
        let p = Price { input_nano_per_mtok: 1_500_000, output_nano_per_mtok: 0, cached_input_nano_per_mtok: 0 };
        assert_eq!(p.bill(1, 0).nano_usd, 2);
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcde"), 2);
    }

    #[test]
    fn cached_input_is_billed_at_its_own_price() {
        // 1,000 prompt tokens, 600 of them from the cache, 100 out, at 2.50
        // (input), 1.25 (cached) and 10.00 (output) USD per million:
        // 400 x 2,500 + 600 x 1,250 + 100 x 10,000 nano-USD.
        let p = Price::from_usd_per_mtok(2.5, 10.0).with_cached_usd_per_mtok(1.25);
        let s = p.bill_cached(1_000, 600, 100);
        assert_eq!(s, Spend { input_tokens: 1_000, output_tokens: 100, nano_usd: 2_750_000, cached_input_tokens: 600 });
        // Without a cached price, cached input costs what input costs.
        let plain = Price::from_usd_per_mtok(2.5, 10.0);
        assert_eq!(plain.bill_cached(1_000, 600, 100).nano_usd, plain.bill(1_000, 100).nano_usd);
        // A server reporting more cached tokens than prompt tokens is capped.
        assert_eq!(p.bill_cached(10, 50, 0).cached_input_tokens, 10);
    }

    #[test]
    fn spend_reads_and_writes_the_layout_before_cached_tokens() {
        let s = Spend { input_tokens: 300, output_tokens: 2, nano_usd: 70_000, cached_input_tokens: 5 };
        let now = crate::store::codec::encode(&s).expect("encodes");
        let old = with_layout(Layout::BeforeCached, || crate::store::codec::encode(&s).expect("encodes"));
        assert_eq!(old.len() + 1, now.len(), "the old layout has no fourth field");
        let mut native = Vec::new();
        crate::store::codec::encode_native_into(&s, &mut native).expect("encodes");
        assert_eq!(native, now, "serde and bincode's own encoding agree");
        assert_eq!(crate::store::codec::decode::<Spend>(&now).expect("decodes"), s);
        let back = with_layout(Layout::BeforeCached, || crate::store::codec::decode::<Spend>(&old).expect("decodes"));
        assert_eq!(back, Spend { cached_input_tokens: 0, ..s });
        assert!(crate::store::codec::decode::<Spend>(&old).is_err(), "an old record is not read as a new one");
        // JSON always has every field, and reads files without the new one.
        let json: Spend = serde_json::from_str(r#"{"input_tokens":1,"output_tokens":2,"nano_usd":3}"#).expect("json");
        assert_eq!(json, Spend { input_tokens: 1, output_tokens: 2, nano_usd: 3, cached_input_tokens: 0 });
    }
}
