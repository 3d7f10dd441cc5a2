//! The embedded deterministic embedder: hashed word unigrams and bigrams,
//! signed, L2-normalised. Texts that share words get similar vectors; the
//! same text always gets the same vector, whatever toolchain built the
//! engine: words are split and folded by a fixed table ([`is_word_char`]),
//! never by the standard library's Unicode tables, which move between Rust
//! releases.

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

/// Whether `c` belongs to a word. A fixed rule, so that vectors never depend
/// on the Unicode version of the standard library: ASCII letters and digits
/// are word characters, other ASCII is not; outside ASCII, the space and
/// punctuation blocks below separate words and every other code point
/// (letters of any script, ideographs, symbols) belongs to one. Only ASCII
/// letters fold to lower case.
pub fn is_word_char(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    !matches!(u32::from(c),
        0x80..=0xBF          // Latin-1 controls, no-break space, punctuation and signs
        | 0xD7 | 0xF7        // multiplication and division signs
        | 0x2000..=0x206F    // General Punctuation: spaces, dashes, quotes, ellipsis
        | 0x3000..=0x303F    // CJK symbols and punctuation, ideographic space
        | 0xFE30..=0xFE4F    // CJK compatibility forms
        | 0xFF00..=0xFF0F    // fullwidth ASCII punctuation
        | 0xFF1A..=0xFF20
        | 0xFF3B..=0xFF40
        | 0xFF5B..=0xFF65)
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
        if is_word_char(c) {
            word.push(c.to_ascii_lowercase());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::cosine;

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

    #[test]
    fn word_boundaries_follow_the_fixed_table() {
        // Curly quotes and dashes separate words; accented letters and other
        // scripts belong to them (unfolded); ASCII folds.
        assert_eq!(
            embed_text("\u{201c}caf\u{e9}\u{201d}\u{2014}Cr\u{e8}me", 64),
            embed_text("caf\u{e9} cr\u{e8}me", 64)
        );
        assert_ne!(embed_text("caf\u{e9}", 64), embed_text("caf", 64));
        assert!(embed_text("\u{6771}\u{4eac}", 64).iter().any(|x| *x != 0.0));
        assert!(["a", "Z", "9", "\u{e9}", "\u{4eac}", "\u{3b1}"].iter().all(|c| c.chars().all(is_word_char)));
        assert!(["-", " ", "\u{a0}", "\u{2019}", "\u{3001}", "\u{ff01}"].iter().all(|c| !c.chars().any(is_word_char)));
    }
}
