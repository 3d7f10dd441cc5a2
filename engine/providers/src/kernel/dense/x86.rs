//! The dense product compiled for x86-64's vector extensions, its tile
//! written by hand (compilers vectorize the generic body poorly): on
//! AVX-512F one 512-bit vector per row of a tile holds a panel's sixteen
//! sums; on AVX2 and FMA, two 256-bit ones. Each sum is `super::body`'s,
//! the same operations in the same order, so the same bits.
//!
//! This is one of the workspace's audited `unsafe` blocks (see the root
//! `Cargo.toml`). Two kinds of `unsafe` appear, each for one reason:
//!
//! - calling a `#[target_feature]` function, which is sound only on a CPU
//!   with those features: every public function here asserts them first
//!   (`crate::kernel::avx2_fma` and `crate::kernel::avx512`, cached by the
//!   standard library), so a wrong call panics instead of executing an
//!   illegal instruction;
//! - unaligned loads and stores through pointers into slices whose lengths
//!   are asserted in [`dense_task_with`] before each tile.
#![allow(unsafe_code)]

use super::{body, Dense, MAX_TILE_ROWS, PANEL};
use crate::kernel::avx512;
use std::arch::x86_64::*;
use std::ops::Range;

fn check() {
    assert!(crate::kernel::avx2_fma(), "the AVX2 kernels were called on a CPU without AVX2 and FMA; this is a bug");
}

/// `dense::body::task` with each tile's product by hand: on AVX-512F
/// (`wide`), one 512-bit vector per row of a tile holds a panel's sixteen
/// sums; on AVX2, two 256-bit ones. Each sum is `dense::body::tile`'s: a
/// multiply, then an add, per term in order of `k`, then the bias.
pub fn dense_task_with(w: &Dense, x: &[f32], panels: Range<usize>, tile_rows: usize, part: &mut [f32], wide: bool) {
    check();
    if wide {
        assert!(avx512(), "the AVX-512F kernels were called on a CPU without AVX-512F; this is a bug");
    }
    body::task_with(w, x, panels, tile_rows, part, |rows, tile, panel, bias, out, stride| {
        let k = panel.len() / PANEL;
        // The bounds every load and store below stays within.
        assert!(
            (1..=MAX_TILE_ROWS).contains(&rows)
                && panel.len() == k * PANEL
                && tile.len() == rows * k
                && out.len() >= (rows - 1) * stride + PANEL,
            "a tile's slices hold its rows; this is a bug"
        );
        macro_rules! rows {
            ($form:ident: $($n:literal)*) => {
                match rows {
                    // SAFETY: the CPU's features are asserted above (and
                    // by `check`); the lengths asserted above keep every
                    // access within its slice.
                    $($n => unsafe { $form::<$n>(tile, panel, bias, out, stride) },)*
                    _ => unreachable!(),
                }
            };
        }
        if wide {
            rows!(tile512: 1 2 3 4 5 6 7 8 9 10 11 12);
        } else {
            rows!(tile256: 1 2 3 4 5 6 7 8 9 10 11 12);
        }
    });
}

/// # Safety
///
/// The CPU has AVX-512F; `tile` holds `R` rows of `k` values, `panel`
/// `k * PANEL` and `out` `(R - 1) * stride + PANEL`.
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn tile512<const R: usize>(tile: &[f32], panel: &[f32], bias: &[f32; PANEL], out: &mut [f32], stride: usize) {
    let k = panel.len() / PANEL;
    let (xp, wp, op) = (tile.as_ptr(), panel.as_ptr(), out.as_mut_ptr());
    let mut acc = [_mm512_setzero_ps(); R];
    for i in 0..k {
        let w = _mm512_loadu_ps(wp.add(i * PANEL));
        for (r, a) in acc.iter_mut().enumerate() {
            *a = _mm512_add_ps(*a, _mm512_mul_ps(_mm512_set1_ps(*xp.add(r * k + i)), w));
        }
    }
    let b = _mm512_loadu_ps(bias.as_ptr());
    for (r, a) in acc.iter().enumerate() {
        _mm512_storeu_ps(op.add(r * stride), _mm512_add_ps(*a, b));
    }
}

/// # Safety
///
/// The CPU has AVX2; the lengths are [`tile512`]'s.
#[target_feature(enable = "avx2,fma")]
unsafe fn tile256<const R: usize>(tile: &[f32], panel: &[f32], bias: &[f32; PANEL], out: &mut [f32], stride: usize) {
    let k = panel.len() / PANEL;
    let (xp, wp, op) = (tile.as_ptr(), panel.as_ptr(), out.as_mut_ptr());
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    for i in 0..k {
        let (w0, w1) = (_mm256_loadu_ps(wp.add(i * PANEL)), _mm256_loadu_ps(wp.add(i * PANEL + 8)));
        for (r, a) in acc.iter_mut().enumerate() {
            let x = _mm256_set1_ps(*xp.add(r * k + i));
            a[0] = _mm256_add_ps(a[0], _mm256_mul_ps(x, w0));
            a[1] = _mm256_add_ps(a[1], _mm256_mul_ps(x, w1));
        }
    }
    let (b0, b1) = (_mm256_loadu_ps(bias.as_ptr()), _mm256_loadu_ps(bias.as_ptr().add(8)));
    for (r, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(op.add(r * stride), _mm256_add_ps(a[0], b0));
        _mm256_storeu_ps(op.add(r * stride + 8), _mm256_add_ps(a[1], b1));
    }
}

/// [`dense_task_with`] on AVX-512F where the CPU has it, on AVX2
/// otherwise.
pub fn dense_task(w: &Dense, x: &[f32], panels: Range<usize>, tile_rows: usize, part: &mut [f32]) {
    dense_task_with(w, x, panels, tile_rows, part, avx512());
}
