//! The forward pass of every architecture ([`super::arch`]), on the
//! project's own kernels ([`super::kernel`]).
//!
//! [`Transformer`] holds the weights (every matrix in `Q8_0`, Q, K and V
//! stacked into one product with their biases where the architecture has
//! them, gate and up into another) and the RoPE table.
//! [`Sequence`] is one conversation's key/value cache. [`Transformer::forward`]
//! runs any number of sequences' new tokens in one pass:
//!
//! - the linear layers run on the stacked rows of every sequence (one
//!   product per layer and kind), and norms, RoPE (each row at its own
//!   position) and activations run row by row;
//! - attention runs per sequence and head over that sequence's own cache,
//!   after the pass's keys and values are appended, so a prompt's rows see
//!   the rows before them and nothing else;
//! - logits are computed for the last row of each sequence that asks.
//!
//! Every output of every step is computed whole, in a fixed order, by one
//! task, so a sequence's logits are the same bits alone or in any batch,
//! at any thread count and on every kernel level.

use super::arch::{Arch, RopeStyle};
use super::error::GgufError;
use super::kernel::{Cached, Level, Ops, Q8Matrix, Q8Rows, KEY_BLOCK};
use super::tensor::Tensors;
use candle_core::quantized::gguf_file::Content;
use rayon::prelude::*;
use std::io::{Read, Seek};
use std::sync::atomic::{AtomicBool, Ordering};
use toktrie::TokenId;

/// The shape of a model, from its metadata (`{arch}.block_count` and the
/// rest).
#[derive(Debug, Clone, PartialEq)]
pub struct Hparams {
    /// Transformer blocks.
    pub layers: usize,
    /// Width of the residual stream.
    pub width: usize,
    /// Query heads.
    pub heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    pub kv_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
    /// Hidden width of the feed-forward block.
    pub ffn: usize,
    /// Tokens in the vocabulary.
    pub vocab: usize,
    /// The RMS norm's epsilon.
    pub eps: f32,
    /// RoPE's base frequency.
    pub rope_base: f64,
    /// Dimensions of a head that RoPE rotates.
    pub rope_dim: usize,
    /// Longest sequence (the model's context).
    pub context: usize,
}

impl Hparams {
    /// Width of the stacked keys (or values) of one token.
    pub fn kv_width(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Bytes of key/value cache one token takes (`f32` keys and values).
    pub fn kv_bytes_per_token(&self) -> u64 {
        (2 * self.layers * self.kv_width() * 4) as u64
    }

    fn read(content: &Content, arch: &Arch) -> Result<Hparams, String> {
        let get = |key: &str| content.metadata.get(&arch.key(key)).and_then(|v| v.to_u32().ok()).map(|v| v as usize);
        let need =
            |key: &str| get(key).filter(|v| *v > 0).ok_or_else(|| format!("its metadata lacks {}", arch.key(key)));
        let float = |key: &str| content.metadata.get(&arch.key(key)).and_then(|v| v.to_f32().ok());
        let layers = need("block_count")?;
        let width = need("embedding_length")?;
        let heads = need("attention.head_count")?;
        let kv_heads = get("attention.head_count_kv").unwrap_or(heads);
        let ffn = need("feed_forward_length")?;
        if width % heads != 0 || kv_heads == 0 || heads % kv_heads != 0 {
            return Err(format!("its heads do not divide: width {width}, {heads} heads, {kv_heads} key/value heads"));
        }
        let head_dim = width / heads;
        let rope_dim = get("rope.dimension_count").unwrap_or(head_dim);
        if rope_dim > head_dim || rope_dim % 2 != 0 {
            return Err(format!("its RoPE dimension count {rope_dim} does not fit heads of {head_dim}"));
        }
        Ok(Hparams {
            layers,
            width,
            heads,
            kv_heads,
            head_dim,
            ffn,
            vocab: 0,
            eps: float("attention.layer_norm_rms_epsilon").unwrap_or(1e-5),
            rope_base: f64::from(float("rope.freq_base").unwrap_or(10_000.0)),
            rope_dim,
            context: get("context_length").unwrap_or(4096).clamp(1, 1 << 17),
        })
    }
}

/// RoPE's cosines and sines per position and pair, computed in `f64` with
/// the `libm` crate and rounded once to `f32`.
#[derive(Debug)]
struct Rope {
    pairs: usize,
    style: RopeStyle,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Rope {
    fn new(h: &Hparams, style: RopeStyle, factors: Option<&[f32]>) -> Rope {
        let pairs = h.rope_dim / 2;
        let theta: Vec<f64> = (0..pairs)
            .map(|i| {
                let t = libm::pow(h.rope_base, -((2 * i) as f64) / h.rope_dim as f64);
                t / factors.and_then(|f| f.get(i)).map_or(1.0, |f| f64::from(*f))
            })
            .collect();
        let mut cos = Vec::with_capacity(h.context * pairs);
        let mut sin = Vec::with_capacity(h.context * pairs);
        for p in 0..h.context {
            for t in &theta {
                let a = p as f64 * t;
                cos.push(libm::cos(a) as f32);
                sin.push(libm::sin(a) as f32);
            }
        }
        Rope { pairs, style, cos, sin }
    }

    /// Rotates each head of `x` (heads of `head_dim`) at `pos`: pair `i`
    /// `(a, b)` of the first `rope_dim` values (dimensions `2i` and `2i +
    /// 1`, or `i` and `i + rope_dim / 2` in the NeoX style) becomes `(a
    /// cos - b sin, a sin + b cos)`.
    fn apply(&self, x: &mut [f32], pos: usize, head_dim: usize) {
        let at = pos * self.pairs;
        let (cos, sin) = (&self.cos[at..at + self.pairs], &self.sin[at..at + self.pairs]);
        let (step, second) = match self.style {
            RopeStyle::Interleaved => (2, 1),
            RopeStyle::Neox => (1, self.pairs),
        };
        for head in x.chunks_exact_mut(head_dim) {
            for i in 0..self.pairs {
                let (ia, ib) = (step * i, step * i + second);
                let (a, b) = (head[ia], head[ib]);
                head[ia] = a * cos[i] - b * sin[i];
                head[ib] = a * sin[i] + b * cos[i];
            }
        }
    }
}

/// One transformer block's weights.
#[derive(Debug)]
struct Layer {
    attn_norm: Vec<f32>,
    /// Q, K and V stacked: `heads * head_dim + 2 * kv_width` rows.
    qkv: Q8Matrix,
    /// Their biases, stacked the same way, where the architecture has
    /// them.
    qkv_bias: Option<Vec<f32>>,
    wo: Q8Matrix,
    ffn_norm: Vec<f32>,
    /// Gate and up stacked: `2 * ffn` rows.
    gate_up: Q8Matrix,
    down: Q8Matrix,
}

/// A model of one of the architectures, ready to run.
#[derive(Debug)]
pub struct Transformer {
    /// Its architecture.
    pub arch: &'static Arch,
    /// Its shape.
    pub hp: Hparams,
    embd: Q8Matrix,
    /// `output.weight`, when the file has one; else the embedding is tied.
    head: Option<Q8Matrix>,
    norm: Vec<f32>,
    layers: Vec<Layer>,
    rope: Rope,
    ops: Ops,
}

/// One conversation's key/value cache, appended in place. Per layer:
///
/// - the keys in blocks of [`KEY_BLOCK`] positions, as attention reads
///   them ([`Cached`]): block `b` holds, for each key/value head and each
///   of its dimensions, the block's positions side by side (`(b *
///   kv_width + h * head_dim + d) * KEY_BLOCK + t % KEY_BLOCK`); a block
///   is allocated whole when its first position is appended;
/// - the values position by position (`kv_width` each).
#[derive(Debug, Clone, Default)]
pub struct Sequence {
    len: usize,
    keys: Vec<Vec<f32>>,
    values: Vec<Vec<f32>>,
}

impl Sequence {
    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Room for `more` positions beyond those held, allocated now.
    pub fn reserve(&mut self, more: usize, kv_width: usize) {
        let blocks = (self.len + more).div_ceil(KEY_BLOCK);
        for k in &mut self.keys {
            k.reserve((blocks * KEY_BLOCK * kv_width).saturating_sub(k.len()));
        }
        for v in &mut self.values {
            v.reserve(more * kv_width);
        }
    }

    /// Appends position `pos`'s keys (`kv_width` values) to layer `layer`,
    /// into its block's column.
    fn push_keys(&mut self, layer: usize, pos: usize, k: &[f32]) {
        let keys = &mut self.keys[layer];
        let at = (pos / KEY_BLOCK) * KEY_BLOCK * k.len();
        if keys.len() == at {
            keys.resize(at + KEY_BLOCK * k.len(), 0.0);
        }
        for (i, v) in k.iter().enumerate() {
            keys[at + i * KEY_BLOCK + pos % KEY_BLOCK] = *v;
        }
    }
}

/// One sequence's part of a forward pass.
pub struct Step<'a> {
    /// Its cache (the new tokens are appended).
    pub seq: &'a mut Sequence,
    /// The tokens to run, at the positions after those held.
    pub tokens: &'a [TokenId],
    /// Whether to compute the logits after the last of them.
    pub logits: bool,
}

impl Transformer {
    /// Reads a model of architecture `arch` from a GGUF file's tensors,
    /// computing at `level`.
    pub(crate) fn load<R: Read + Seek>(
        content: &Content,
        reader: &mut R,
        arch: &'static Arch,
        level: Level,
    ) -> Result<Transformer, String> {
        let ops = Ops::new(level).ok_or_else(|| format!("this CPU cannot run the {} kernels", level.name()))?;
        let mut hp = Hparams::read(content, arch)?;
        let names = &arch.tensors;
        let mut t = Tensors::new(content, reader);
        hp.vocab = t.info(names.embedding)?.rows;
        let (w, kv, qw) = (hp.width, hp.kv_width(), hp.heads * hp.head_dim);
        let embd = t.matrix(names.embedding, hp.vocab, w)?;
        let head = if t.has(names.output) { Some(t.matrix(names.output, hp.vocab, w)?) } else { None };
        let norm = t.vector(names.output_norm, w)?;
        let factors =
            if t.has(names.rope_factors) { Some(t.vector(names.rope_factors, hp.rope_dim / 2)?) } else { None };
        let mut layers = Vec::with_capacity(hp.layers);
        for i in 0..hp.layers {
            let name = |s: &str| arch.block_tensor(i, s, "weight");
            let q = t.matrix(&name(names.q), qw, w)?;
            let k = t.matrix(&name(names.k), kv, w)?;
            let v = t.matrix(&name(names.v), kv, w)?;
            let gate = t.matrix(&name(names.gate), hp.ffn, w)?;
            let up = t.matrix(&name(names.up), hp.ffn, w)?;
            let qkv_bias = if arch.block.qkv_bias {
                let mut bias = |s: &str, len: usize| t.vector(&arch.block_tensor(i, s, "bias"), len);
                Some([bias(names.q, qw)?, bias(names.k, kv)?, bias(names.v, kv)?].concat())
            } else {
                None
            };
            layers.push(Layer {
                attn_norm: t.vector(&name(names.attn_norm), w)?,
                qkv: Q8Matrix::stack(&[q, k, v]),
                qkv_bias,
                wo: t.matrix(&name(names.attn_output), w, qw)?,
                ffn_norm: t.vector(&name(names.ffn_norm), w)?,
                gate_up: Q8Matrix::stack(&[gate, up]),
                down: t.matrix(&name(names.down), w, hp.ffn)?,
            });
        }
        let rope = Rope::new(&hp, arch.block.rope, factors.as_deref());
        Ok(Transformer { arch, hp, embd, head, norm, layers, rope, ops })
    }

    /// The kernel level it computes at.
    pub fn level(&self) -> Level {
        self.ops.level()
    }

    /// An empty sequence for this model.
    pub fn sequence(&self) -> Sequence {
        Sequence { len: 0, keys: vec![Vec::new(); self.hp.layers], values: vec![Vec::new(); self.hp.layers] }
    }

    /// Bytes the weights take in memory.
    pub fn bytes(&self) -> usize {
        let layers: usize =
            self.layers.iter().map(|l| l.qkv.bytes() + l.wo.bytes() + l.gate_up.bytes() + l.down.bytes()).sum();
        layers + self.embd.bytes() + self.head.as_ref().map_or(0, Q8Matrix::bytes)
    }

    /// Whether `tokens` can run on `seq`: a sequence of this model, the
    /// tokens within its context and its vocabulary.
    pub fn check(&self, seq: &Sequence, tokens: &[TokenId]) -> Result<(), GgufError> {
        self.fits(seq, tokens).map_err(GgufError::Decode)
    }

    fn fits(&self, seq: &Sequence, tokens: &[TokenId]) -> Result<(), String> {
        let hp = &self.hp;
        if seq.keys.len() != hp.layers {
            return Err("a sequence of another model; this is a bug".into());
        }
        let end = seq.len + tokens.len();
        if end > hp.context {
            return Err(format!("the conversation needs {end} tokens, past the model's context of {}", hp.context));
        }
        match tokens.iter().find(|t| **t as usize >= hp.vocab) {
            Some(t) => Err(format!("token {t} is outside the vocabulary of {}", hp.vocab)),
            None => Ok(()),
        }
    }

    /// Runs each step's tokens and returns, per step, the next-token logits
    /// after its last token (empty where a step did not ask for them).
    ///
    /// The whole pass runs on one of rayon's threads: the pass's many
    /// parallel steps (a few per layer) are then split from inside the
    /// pool, not each sent to it from outside and waited for. The pool's
    /// other threads are kept awake for the length of the pass: they take
    /// its work as it comes and spin between its steps, instead of
    /// sleeping and being woken for each.
    pub fn forward(&self, steps: &mut [Step<'_>]) -> Result<Vec<Vec<f32>>, GgufError> {
        awake(|| self.run(steps)).map_err(GgufError::Decode)
    }

    fn run(&self, steps: &mut [Step<'_>]) -> Result<Vec<Vec<f32>>, String> {
        let hp = &self.hp;
        let (w, hd, kvw) = (hp.width, hp.head_dim, hp.kv_width());
        let qw = hp.heads * hd;
        let mut rows: Vec<(usize, usize)> = Vec::new();
        for (s, step) in steps.iter().enumerate() {
            self.fits(step.seq, step.tokens)?;
            rows.extend((step.seq.len..step.seq.len + step.tokens.len()).map(|pos| (s, pos)));
        }
        let m = rows.len();
        let mut x = vec![0f32; m * w];
        let mut r = 0;
        for step in steps.iter() {
            for &tok in step.tokens {
                self.embd.row(tok as usize, &mut x[r * w..(r + 1) * w]);
                r += 1;
            }
        }
        let ops = &self.ops;
        let mut h = vec![0f32; m * w];
        let mut q8 = Q8Rows::default();
        let mut qkv = Vec::new();
        let mut tmp = Vec::new();
        let mut att = vec![0f32; m * qw];
        let mut act = vec![0f32; m * hp.ffn];
        let stride = qw + 2 * kvw;
        let scale = 1.0 / (hd as f32).sqrt();
        let group = hp.heads / hp.kv_heads;
        for (li, layer) in self.layers.iter().enumerate() {
            ops.rms_norm(&x, &layer.attn_norm, hp.eps, &mut h);
            ops.quantize_rows(&h, w, &mut q8);
            ops.matmul(&layer.qkv, &q8, &mut qkv);
            for (row, &(s, pos)) in qkv.chunks_exact_mut(stride).zip(&rows) {
                if let Some(bias) = &layer.qkv_bias {
                    add(row, bias);
                }
                self.rope.apply(&mut row[..qw + kvw], pos, hd);
                let seq = &mut *steps[s].seq;
                seq.push_keys(li, pos, &row[qw..qw + kvw]);
                seq.values[li].extend_from_slice(&row[qw + kvw..]);
            }
            let seqs: Vec<&Sequence> = steps.iter().map(|s| &*s.seq).collect();
            let (qkv_ref, rows_ref) = (&qkv, &rows);
            att.par_chunks_mut(hd).enumerate().for_each_init(Vec::new, |scores, (i, out)| {
                let (r, head) = (i / hp.heads, i % hp.heads);
                let (s, pos) = rows_ref[r];
                let seq = seqs[s];
                let kvh = head / group;
                let n = pos + 1;
                scores.resize(n, 0.0);
                let q = &qkv_ref[r * stride + head * hd..r * stride + (head + 1) * hd];
                let (keys, values) = (&seq.keys[li][kvh * hd * KEY_BLOCK..], &seq.values[li][kvh * hd..]);
                let kv = Cached { keys, key_stride: kvw * KEY_BLOCK, values, stride: kvw, n, scale };
                ops.attend(q, kv, scores, out);
            });
            ops.quantize_rows(&att, qw, &mut q8);
            ops.matmul(&layer.wo, &q8, &mut tmp);
            add(&mut x, &tmp);
            ops.rms_norm(&x, &layer.ffn_norm, hp.eps, &mut h);
            ops.quantize_rows(&h, w, &mut q8);
            ops.matmul(&layer.gate_up, &q8, &mut tmp);
            ops.swiglu(&tmp, hp.ffn, &mut act);
            ops.quantize_rows(&act, hp.ffn, &mut q8);
            ops.matmul(&layer.down, &q8, &mut tmp);
            add(&mut x, &tmp);
        }
        // The last row of each step that asks for logits.
        let mut last = Vec::new();
        let mut at = 0;
        for step in steps.iter_mut() {
            at += step.tokens.len();
            step.seq.len += step.tokens.len();
            if step.logits && !step.tokens.is_empty() {
                last.extend_from_slice(&x[(at - 1) * w..at * w]);
            }
        }
        let mut out = vec![Vec::new(); steps.len()];
        if last.is_empty() {
            return Ok(out);
        }
        let mut normed = vec![0f32; last.len()];
        ops.rms_norm(&last, &self.norm, hp.eps, &mut normed);
        ops.quantize_rows(&normed, w, &mut q8);
        ops.matmul(self.head.as_ref().unwrap_or(&self.embd), &q8, &mut tmp);
        let mut rows_out = tmp.chunks_exact(hp.vocab);
        for (o, step) in out.iter_mut().zip(steps.iter()) {
            if step.logits && !step.tokens.is_empty() {
                *o = rows_out.next().expect("one row of logits per step that asked; this is a bug").to_vec();
            }
        }
        Ok(out)
    }

    /// The logits after running `tokens` on one sequence.
    pub fn forward_one(&self, seq: &mut Sequence, tokens: &[TokenId]) -> Result<Vec<f32>, GgufError> {
        let mut steps = [Step { seq, tokens, logits: true }];
        let mut out = self.forward(&mut steps)?;
        Ok(out.pop().unwrap_or_default())
    }
}

/// Runs `pass` on one of rayon's threads with the pool's other threads
/// kept awake ([`keep_awake`]) until it returns or panics (the panic then
/// goes on to the caller).
fn awake<T: Send>(pass: impl FnOnce() -> T + Send) -> T {
    let done = AtomicBool::new(false);
    rayon::scope(|s| {
        let leader = rayon::current_thread_index();
        let done = &done;
        for _ in 1..rayon::current_num_threads() {
            s.spawn(move |_| keep_awake(done, leader));
        }
        // Set when the pass ends, by returning or by a panic, so that the
        // scope's wait for the keepers always ends.
        let _finished = Finished(done);
        pass()
    })
}

/// Sets its flag when dropped: the end of a pass, however it ends.
struct Finished<'a>(&'a AtomicBool);

impl Drop for Finished<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Rounds of finding no work after which a keeper gives its thread back
/// to the pool (a few milliseconds): longer than the stretches of
/// row-wise work between a pass's parallel steps (a 512-token prompt's
/// are a few hundred microseconds; at 4,096 rounds its pass lost 7%),
/// short enough that a keeper the pool ran inside another job's wait
/// (which then waits for it) costs only that long.
const IDLE_ROUNDS: u32 = 1 << 16;

/// Keeps one of the pool's threads taking the pass's work until `done`.
///
/// A pass splits a few steps per layer over the pool (about 150 for
/// SmolLM2), with short stretches of row-wise work on the leading thread
/// between them. A rayon thread with nothing to do sleeps after a few
/// dozen idle rounds, and waking it for the next step costs more than the
/// step's share on a small batch: measured on two cores, a pass of eight
/// sequences left the cores idle or in the scheduler a fifth of the
/// time. So each of the pool's other threads runs this for the pass: it
/// executes whatever work the pool has (`rayon::yield_now`) and spins
/// between steps. Only who computes a part changes, never what: every
/// output is computed whole by one task, so the bits are the same.
///
/// It returns at once where the pool hands it to the leading thread
/// itself (which pops its own queue while it waits), and after
/// [`IDLE_ROUNDS`] rounds without work: the pool may run it inside
/// another job's wait (that job then waits for it), so it never holds a
/// thread for long while nothing comes.
fn keep_awake(done: &AtomicBool, leader: Option<usize>) {
    if rayon::current_thread_index() == leader {
        return;
    }
    let mut idle = 0;
    while !done.load(Ordering::Acquire) {
        if rayon::yield_now() == Some(rayon::Yield::Executed) {
            idle = 0;
        } else if idle == IDLE_ROUNDS {
            return;
        } else {
            idle += 1;
            std::hint::spin_loop();
        }
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += *b;
    }
}

#[cfg(test)]
mod tests {
    use super::awake;
    use rayon::prelude::*;

    /// A pass with the pool kept awake computes what it would alone, on
    /// pools of one to three threads, and a pass that panics ends (the
    /// keepers stop) with its panic passed on, not a hang.
    #[test]
    fn a_pass_kept_awake_ends_whether_it_returns_or_panics() {
        for threads in 1..=3 {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a pool");
            let sum: u64 = pool.install(|| awake(|| (0..100_000u64).into_par_iter().map(|i| i * i).sum()));
            assert_eq!(sum, (0..100_000u64).map(|i| i * i).sum::<u64>(), "{threads} threads");
            let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                pool.install(|| awake(|| (0..64).into_par_iter().for_each(|i| assert!(i != 40, "a step failed"))))
            }));
            assert!(panicked.is_err(), "{threads} threads: the panic reaches the caller");
            // The pool still works afterwards: no keeper was left spinning.
            assert_eq!(pool.install(|| awake(|| (1..=10).into_par_iter().sum::<i32>())), 55);
        }
    }

    /// Passes that share a pool, started from several threads at once
    /// with parallel steps inside parallel steps, all end with their
    /// results.
    #[test]
    fn passes_sharing_a_pool_all_end() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().expect("a pool");
        let want: u64 = (0..64u64).map(|i| (0..i).sum::<u64>()).sum();
        std::thread::scope(|t| {
            for _ in 0..4 {
                t.spawn(|| {
                    for _ in 0..50 {
                        let got: u64 = pool.install(|| {
                            awake(|| (0..64u64).into_par_iter().map(|i| (0..i).into_par_iter().sum::<u64>()).sum())
                        });
                        assert_eq!(got, want);
                    }
                });
            }
        });
    }
}
