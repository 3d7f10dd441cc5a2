//! Seeded random streams.
//!
//! Every draw in the engine comes from a [`Stream`] derived from
//! `(run seed, tick, actor id, purpose)`. Streams are never shared between
//! tasks, so the order in which tasks run cannot change what they draw.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

/// Why a stream is drawn from. Part of the derivation key, so two purposes
/// of the same actor never see correlated numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// Generating a persona's profile.
    Persona,
    /// Choosing who is exposed to what.
    Exposure,
    /// The scripted chat model's sampling for one request.
    Chat,
    /// Test builders.
    Testing,
    /// Synthetic field workloads (`field simulate`, `field bench`).
    Field,
    /// The agent experiment's scripted agents.
    Agent,
    /// A survey validation's draws: its sample, its held-out half, its
    /// baselines and its bootstrap.
    Survey,
}

impl Purpose {
    fn code(self) -> u8 {
        match self {
            Purpose::Persona => 1,
            Purpose::Exposure => 2,
            Purpose::Chat => 3,
            Purpose::Testing => 4,
            Purpose::Field => 5,
            Purpose::Agent => 6,
            Purpose::Survey => 7,
        }
    }
}

/// A ChaCha8 stream with the few draws the engine needs.
#[derive(Debug, Clone)]
pub struct Stream(ChaCha8Rng);

impl Stream {
    /// `n` random unit vectors of dimension `dim`, row after row (benchmark
    /// and test fields).
    pub fn unit_vectors(&mut self, n: usize, dim: usize) -> Vec<f32> {
        let mut out = Vec::with_capacity(n * dim);
        for _ in 0..n {
            let v: Vec<f64> = (0..dim).map(|_| self.normal()).collect();
            let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt().max(f64::MIN_POSITIVE);
            out.extend(v.iter().map(|x| (x / norm) as f32));
        }
        out
    }

    /// Derives the stream for `(seed, tick, actor, purpose)`.
    pub fn derive(seed: u64, tick: u32, actor: u64, purpose: Purpose) -> Self {
        use blake3::hazmat::HasherExt;
        // The context is hashed once per process rather than per stream;
        // the key derived is the same (`blake3::derive_key` does both steps).
        static CONTEXT: std::sync::OnceLock<blake3::hazmat::ContextKey> = std::sync::OnceLock::new();
        let context = CONTEXT.get_or_init(|| blake3::hazmat::hash_derive_key_context("sim-engine rng stream v1"));
        let mut h = blake3::Hasher::new_from_context_key(context);
        h.update(&seed.to_le_bytes());
        h.update(&tick.to_le_bytes());
        h.update(&actor.to_le_bytes());
        h.update(&[purpose.code()]);
        Stream(ChaCha8Rng::from_seed(*h.finalize().as_bytes()))
    }

    /// Derives a stream from a 32-byte key, e.g. a request digest.
    pub fn from_key(key: [u8; 32]) -> Self {
        Stream(ChaCha8Rng::from_seed(key))
    }

    /// A uniform `u64`.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A uniform float in `[0, 1)` with 53 bits of precision.
    pub fn unit(&mut self) -> f64 {
        (self.0.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A uniform integer in `[0, n)`. `n` must be positive.
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0, "below(0) is a bug");
        // Multiply-shift keeps the bias below 2^-32 for any n used here.
        ((self.0.next_u64() >> 32).wrapping_mul(n as u64) >> 32) as usize
    }

    /// Shuffles `items` in place (Fisher-Yates, from the last position
    /// down), a uniform permutation.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// An index drawn with the given non-negative weights. Falls back to a
    /// uniform draw when all weights are zero.
    pub fn weighted(&mut self, weights: &[f64]) -> usize {
        self.weighted_by(weights, |w| *w)
    }

    /// [`Stream::weighted`] over `items` weighted by `weight`, without
    /// gathering the weights first.
    pub fn weighted_by<T>(&mut self, items: &[T], weight: impl Fn(&T) -> f64) -> usize {
        let total: f64 = items.iter().map(&weight).sum();
        if total <= 0.0 {
            return self.below(items.len());
        }
        let mut x = self.unit() * total;
        for (i, item) in items.iter().enumerate() {
            let w = weight(item);
            if x < w {
                return i;
            }
            x -= w;
        }
        items.len() - 1
    }

    /// A standard normal draw (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.unit().max(f64::MIN_POSITIVE);
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_depend_on_every_key_part() {
        let base = Stream::derive(7, 1, 3, Purpose::Chat).next_u64();
        assert_eq!(base, Stream::derive(7, 1, 3, Purpose::Chat).next_u64());
        assert_ne!(base, Stream::derive(8, 1, 3, Purpose::Chat).next_u64());
        assert_ne!(base, Stream::derive(7, 2, 3, Purpose::Chat).next_u64());
        assert_ne!(base, Stream::derive(7, 1, 4, Purpose::Chat).next_u64());
        assert_ne!(base, Stream::derive(7, 1, 3, Purpose::Persona).next_u64());
        // The stream's key is BLAKE3's derive_key of the parts.
        let mut material = Vec::new();
        material.extend_from_slice(&7u64.to_le_bytes());
        material.extend_from_slice(&1u32.to_le_bytes());
        material.extend_from_slice(&3u64.to_le_bytes());
        material.push(Purpose::Chat.code());
        let key = blake3::derive_key("sim-engine rng stream v1", &material);
        assert_eq!(base, Stream::from_key(key).next_u64());
    }

    #[test]
    fn draws_stay_in_range() {
        let mut s = Stream::derive(1, 0, 0, Purpose::Testing);
        for _ in 0..10_000 {
            let u = s.unit();
            assert!((0.0..1.0).contains(&u));
            assert!(s.below(7) < 7);
        }
        assert_eq!(s.weighted(&[0.0, 0.0, 5.0]), 2);
    }
}
