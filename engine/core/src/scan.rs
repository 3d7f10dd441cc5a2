//! Substring scans and number writing for the hot text paths (prompts,
//! the scripted model reading them, reply parsing).
//!
//! `str::find` with a string pattern builds a two-way searcher on every
//! call, which costs more than the search itself on the short lines these
//! paths read. These jump between occurrences of the needle's first byte
//! with `memchr` instead. Each gives exactly what its `std` counterpart
//! gives.

use std::fmt::Write;

/// The hasher of the text-keyed maps on the hot paths (deduplicating a
/// tick's texts): several times cheaper than the default SipHash on
/// sentence-long keys, and fixed, so nothing varies between processes. The
/// maps are only looked up, never iterated, so their order reaches no
/// output.
pub type TextHasher = foldhash::fast::FixedState;

/// Byte offset of the first occurrence of `needle` in `hay`, as
/// `hay.find(needle)`.
pub fn find(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    let Some(&first) = n.first() else { return Some(0) };
    let mut at = 0;
    while at + n.len() <= h.len() {
        let p = at + memchr::memchr(first, &h[at..=h.len() - n.len()])?;
        if h[p..].starts_with(n) {
            return Some(p);
        }
        at = p + 1;
    }
    None
}

/// `hay.contains(needle)`.
pub fn contains(hay: &str, needle: &str) -> bool {
    find(hay, needle).is_some()
}

/// `hay.split_once(sep)`, for a non-empty `sep`.
pub fn split_once<'a>(hay: &'a str, sep: &str) -> Option<(&'a str, &'a str)> {
    let at = find(hay, sep)?;
    Some((&hay[..at], &hay[at + sep.len()..]))
}

/// `hay.split(sep)`, for a non-empty `sep`.
pub fn split<'a>(hay: &'a str, sep: &'a str) -> impl Iterator<Item = &'a str> + 'a {
    let mut rest = Some(hay);
    std::iter::from_fn(move || {
        let r = rest?;
        match split_once(r, sep) {
            Some((head, tail)) => {
                rest = Some(tail);
                Some(head)
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// `text.lines()`: lines split at `\n`, a `\r` before it dropped, no
/// empty last line after a final `\n`.
pub fn lines(text: &str) -> impl Iterator<Item = &str> + '_ {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let line = match memchr::memchr(b'\n', rest.as_bytes()) {
            Some(at) => {
                let line = &rest[..at];
                rest = &rest[at + 1..];
                line.strip_suffix('\r').unwrap_or(line)
            }
            None => std::mem::take(&mut rest),
        };
        Some(line)
    })
}

/// The decimal digits of `n`, zero-padded to `width` (at most 20, the
/// digits of `u64::MAX`): they are `digits[start..]` of the returned
/// `(digits, start)`, written from the right into a buffer of zeros.
pub fn decimal(n: u64, width: usize) -> ([u8; 20], usize) {
    let mut digits = [b'0'; 20];
    let mut at = digits.len();
    let mut rest = n;
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    (digits, at.min(digits.len() - width.min(digits.len())))
}

/// Appends `n` in decimal, as `{n}` writes it.
pub fn push_uint(out: &mut String, n: u64) {
    let (digits, start) = decimal(n, 0);
    out.extend(digits[start..].iter().map(|d| char::from(*d)));
}

/// Whether `v`, a non-negative float, rounds to an integer exactly as its
/// exact decimal value does: finite, small enough for a float to hold its
/// fraction, and not within a millionth of a tie.
fn rounds_plainly(v: f64) -> bool {
    v.is_finite() && v < 1e15 && (v - v.floor() - 0.5).abs() >= 1e-6
}

/// Appends `x` with no decimals, exactly as `{x:.0}` writes it (the
/// formatter takes the cases [`push_fixed2`] leaves to it).
pub fn push_fixed0(out: &mut String, x: f64) {
    let v = x.abs();
    if !rounds_plainly(v) {
        let _ = write!(out, "{x:.0}");
        return;
    }
    if x.is_sign_negative() {
        out.push('-');
    }
    push_uint(out, v.round() as u64);
}

/// Appends `x` with two decimals, exactly as `{x:.2}` (or `{x:+.2}` with
/// `plus`) writes it. Prompts carry thousands of such numbers per tick, and
/// the formatting machinery's exact decimal expansion costs more than the
/// rest of a prompt. A hundredfold that lies near a tie, or too large to
/// round in a float, is left to the formatter.
pub fn push_fixed2(out: &mut String, x: f64, plus: bool) {
    let v = (x * 100.0).abs();
    if !rounds_plainly(v) {
        let _ = if plus { write!(out, "{x:+.2}") } else { write!(out, "{x:.2}") };
        return;
    }
    if x.is_sign_negative() {
        out.push('-');
    } else if plus {
        out.push('+');
    }
    let n = v.round() as u64;
    push_uint(out, n / 100);
    out.push('.');
    let cents = (n % 100) as u8;
    out.push(char::from(b'0' + cents / 10));
    out.push(char::from(b'0' + cents % 10));
}

/// A plain decimal (`-0.52`, `+3`, `19.99`): its sign, its digits as an
/// integer, the count of digits after the point, and the count of digits.
fn plain_decimal(text: &str) -> Option<(bool, u64, usize, usize)> {
    let b = text.as_bytes();
    let (negative, digits) = match b.first()? {
        b'-' => (true, &b[1..]),
        b'+' => (false, &b[1..]),
        _ => (false, b),
    };
    let (mut mantissa, mut decimals, mut count, mut point) = (0u64, 0usize, 0usize, false);
    for &c in digits {
        match c {
            b'0'..=b'9' if count < 15 => {
                mantissa = mantissa * 10 + u64::from(c - b'0');
                count += 1;
                decimals += usize::from(point);
            }
            b'.' if !point && count > 0 => point = true,
            _ => return None,
        }
    }
    (count > 0).then_some((negative, mantissa, decimals, count))
}

/// `text.parse::<f64>().ok()`. A plain decimal of at most 15 digits is an
/// exact integer over an exact power of ten, so one correctly rounded
/// division gives the correctly rounded value the parser gives; anything
/// else goes to the parser.
pub fn parse_f64(text: &str) -> Option<f64> {
    const POW10: [f64; 16] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15];
    match plain_decimal(text) {
        Some((negative, mantissa, decimals, _)) => {
            let v = mantissa as f64 / POW10[decimals];
            Some(if negative { -v } else { v })
        }
        None => text.parse().ok(),
    }
}

/// `text.parse::<f32>().ok()`, by the same argument for at most 7 digits.
pub fn parse_f32(text: &str) -> Option<f32> {
    const POW10: [f32; 8] = [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7];
    match plain_decimal(text) {
        Some((negative, mantissa, decimals, count)) if count <= 7 => {
            let v = mantissa as f32 / POW10[decimals];
            Some(if negative { -v } else { v })
        }
        _ => text.parse().ok(),
    }
}

/// Whether `word` occurs in `text`, ignoring ASCII case; an empty word
/// never does.
pub fn mentions(text: &str, word: &str) -> bool {
    let (t, w) = (text.as_bytes(), word.as_bytes());
    let Some((&first, rest)) = w.split_first() else { return false };
    let (lower, upper) = (first.to_ascii_lowercase(), first.to_ascii_uppercase());
    let mut at = 0;
    while at + w.len() <= t.len() {
        let Some(i) = memchr::memchr2(lower, upper, &t[at..=t.len() - w.len()]) else { return false };
        let p = at + i;
        if t[p + 1..p + w.len()].eq_ignore_ascii_case(rest) {
            return true;
        }
        at = p + 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_scan_agrees_with_std() {
        let hays = ["", "a", ", ", "x, y, , z", "(sentiment +0.5) Nice) here", "ééé, ü | b", "aaab", "abcabcab"];
        let needles = [", ", "(sentiment ", ") ", " | ", "ab", "b", "aab", "é"];
        for h in hays {
            for n in needles {
                assert_eq!(find(h, n), h.find(n), "{h:?} {n:?}");
                assert_eq!(split_once(h, n), h.split_once(n), "{h:?} {n:?}");
                assert_eq!(split(h, n).collect::<Vec<_>>(), h.split(n).collect::<Vec<_>>(), "{h:?} {n:?}");
                for h in [h.to_string(), h.to_uppercase()] {
                    let naive = !n.is_empty()
                        && h.as_bytes().windows(n.len()).any(|win| win.eq_ignore_ascii_case(n.as_bytes()));
                    assert_eq!(mentions(&h, n), naive, "{h:?} {n:?}");
                }
            }
        }
        let numbers = [
            "0",
            "-0",
            "+0.52",
            "-0.52",
            "0.1",
            "1.",
            ".5",
            "+.5",
            "-.",
            ".",
            "+",
            "",
            "19.99",
            "1e3",
            "0.30",
            "123456789012345",
            "1234567890123456",
            "0.000001",
            "9999999",
            "12345678",
            "-1.25",
            "1.2.3",
            "nan",
            "inf",
            " 1",
        ];
        for t in numbers {
            assert_eq!(parse_f64(t).map(f64::to_bits), t.parse::<f64>().ok().map(f64::to_bits), "{t:?}");
            assert_eq!(parse_f32(t).map(f32::to_bits), t.parse::<f32>().ok().map(f32::to_bits), "{t:?}");
        }
        for i in -10_000..=10_000 {
            let t = format!("{:+.2}", f64::from(i) / 1000.0);
            assert_eq!(parse_f64(&t).map(f64::to_bits), t.parse::<f64>().ok().map(f64::to_bits), "{t:?}");
            assert_eq!(parse_f32(&t).map(f32::to_bits), t.parse::<f32>().ok().map(f32::to_bits), "{t:?}");
        }
        for t in ["", "\n", "a", "a\n", "a\r\nb", "a\rb\r", "\n\nx\r\n\r\n", "é\ny\r"] {
            assert_eq!(lines(t).collect::<Vec<_>>(), t.lines().collect::<Vec<_>>(), "{t:?}");
        }
        assert!(mentions("I love FITNESS gear", "fitness"));
        assert!(!mentions("fit", "fitness"));
        assert!(!mentions("anything", ""));
    }

    #[test]
    fn numbers_read_as_the_formatter_writes_them() {
        let mut xs: Vec<f64> = vec![0.0, -0.0, 0.005, -0.005, 0.125, 1e20, f64::NAN, f64::INFINITY, 19.99, 1499.995];
        xs.extend((-2000..=2000).map(|i| f64::from(i) * 0.0005));
        xs.extend((-300..=300).map(|i| f64::from((f64::from(i) / 100.0) as f32)));
        for x in xs {
            for plus in [false, true] {
                let mut ours = String::new();
                push_fixed2(&mut ours, x, plus);
                let theirs = if plus { format!("{x:+.2}") } else { format!("{x:.2}") };
                assert_eq!(ours, theirs, "{x:e}");
            }
            for x in [x, x * 1000.0] {
                let mut ours = String::new();
                push_fixed0(&mut ours, x);
                assert_eq!(ours, format!("{x:.0}"), "{x:e}");
            }
        }
        for n in [0, 7, 10, 4_294_967_295, u64::MAX] {
            let mut ours = String::new();
            push_uint(&mut ours, n);
            assert_eq!(ours, n.to_string());
        }
    }
}
