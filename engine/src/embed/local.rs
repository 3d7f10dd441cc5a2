//! The embedded deterministic embedder: hashed word unigrams and bigrams,
//! signed, L2-normalised. Texts that share words get similar vectors; the
//! same text always gets the same vector. It answers at once, with no
//! network and no key.

use super::provider::{EmbedProvider, ProviderError, ProviderReply, ProviderRequest};
use crate::BoxFuture;

/// The local embedding provider.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalProvider;

fn fnv1a(bytes: &[u8], seed: u64) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // Final avalanche so that nearby hashes spread over buckets and signs.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

fn add(v: &mut [f32], h: u64, weight: f32) {
    let bucket = (h % v.len() as u64) as usize;
    v[bucket] += if h >> 63 == 0 { weight } else { -weight };
}

/// Embeds one text into `dim` dimensions.
pub fn embed_text(text: &str, dim: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; dim];
    let mut prev: Option<u64> = None;
    let mut word = String::with_capacity(16);
    let flush = |word: &mut String, v: &mut Vec<f32>, prev: &mut Option<u64>| {
        if word.is_empty() {
            return;
        }
        let h = fnv1a(word.as_bytes(), 0);
        add(v, h, 1.0);
        if let Some(p) = *prev {
            add(v, p.rotate_left(17) ^ h.wrapping_mul(31), 0.5);
        }
        *prev = Some(h);
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        } else {
            flush(&mut word, &mut v, &mut prev);
        }
    }
    flush(&mut word, &mut v, &mut prev);
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if norm > 0.0 {
        for x in &mut v {
            *x = (f64::from(*x) / norm) as f32;
        }
    }
    v
}

impl EmbedProvider for LocalProvider {
    fn request<'a>(&'a self, req: ProviderRequest<'a>) -> BoxFuture<'a, Result<ProviderReply, ProviderError>> {
        let vectors = req.texts.iter().map(|t| embed_text(t, req.dim)).collect();
        Box::pin(std::future::ready(Ok(ProviderReply { vectors, billed_tokens: None })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persona::memory::cosine;

    #[test]
    fn similarity_follows_shared_words() {
        let a = embed_text("trail running shoe, recycled upper", 256);
        let b = embed_text("A recycled trail running shoe", 256);
        let c = embed_text("quarterly energy bills rise in heatwave", 256);
        assert!(cosine(&a, &b) > 0.5, "{}", cosine(&a, &b));
        assert!(cosine(&a, &c) < 0.2, "{}", cosine(&a, &c));
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-6);
        assert_eq!(a, embed_text("trail running shoe, recycled upper", 256));
    }

    #[test]
    fn case_and_punctuation_fold_but_texts_stay_distinct() {
        assert_eq!(embed_text("Hello, World", 64), embed_text("hello world", 64));
        assert_ne!(embed_text("hello world", 64), embed_text("world hello", 64));
        assert!(embed_text("", 64).iter().all(|x| *x == 0.0));
    }
}
