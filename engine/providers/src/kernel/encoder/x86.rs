//! The encoder's row-wise operations compiled for AVX2 and FMA: the
//! bodies of `super::body` under `#[target_feature]`, the same source and
//! so the same bits as the portable level.
//!
//! This is one of the workspace's audited `unsafe` blocks (see the root
//! `Cargo.toml`), for one reason: calling a `#[target_feature]` function,
//! which is sound only on a CPU with those features. Every function here
//! asserts them first (`crate::kernel::avx2_fma`, cached by the standard
//! library), so a wrong call panics instead of executing an illegal
//! instruction.
#![allow(unsafe_code)]

use super::body;
use crate::kernel::avx2_compiled;

fn check() {
    assert!(crate::kernel::avx2_fma(), "the AVX2 kernels were called on a CPU without AVX2 and FMA; this is a bug");
}

avx2_compiled!(body => layer_norm, layer_norm_avx2(x: &[f32], g: &[f32], b: &[f32], eps: f32, out: &mut [f32]));
avx2_compiled!(body => gelu_all, gelu_all_avx2(x: &mut [f32]));
avx2_compiled!(body => attend, attend_avx2(qkv: &[f32], width: usize, heads: usize, scale: f32, out: &mut [f32]));
