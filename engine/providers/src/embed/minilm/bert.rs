//! The BERT encoder MiniLM runs, on the project's kernels
//! (`crate::kernel`): token, position and segment embeddings, then
//! `num_hidden_layers` blocks of multi-head self-attention and a GELU
//! feed-forward, each closed by a residual sum and a layer norm (Devlin et
//! al. 2019; the layout of Hugging Face's `BertModel` checkpoints, which
//! MiniLM's weights follow). Only what an encoder needs for sentence
//! vectors is here: no pooler, no heads, no dropout (inference only).
//! candle reads the checkpoint; the arithmetic is the project's, in an
//! order that depends on the shapes alone, the same bits at every kernel
//! level.

use crate::kernel::dense::Dense;
use crate::kernel::{encoder, Level};
use candle_core::Result;
use candle_nn::VarBuilder;

/// The fields of a checkpoint's `config.json` the encoder reads.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct BertConfig {
    /// Tokens in the vocabulary.
    pub vocab_size: usize,
    /// Width of every hidden state.
    pub hidden_size: usize,
    /// Encoder blocks.
    pub num_hidden_layers: usize,
    /// Attention heads per block (they split `hidden_size`).
    pub num_attention_heads: usize,
    /// Width of the feed-forward layer.
    pub intermediate_size: usize,
    /// The feed-forward activation; only `gelu` (the exact, erf form) is
    /// supported.
    #[serde(default = "BertConfig::gelu")]
    pub hidden_act: String,
    /// Longest input, in tokens.
    pub max_position_embeddings: usize,
    /// Segment types.
    #[serde(default = "BertConfig::two")]
    pub type_vocab_size: usize,
    /// The layer norms' epsilon.
    #[serde(default = "BertConfig::epsilon")]
    pub layer_norm_eps: f64,
}

impl BertConfig {
    fn gelu() -> String {
        "gelu".into()
    }
    fn two() -> usize {
        2
    }
    fn epsilon() -> f64 {
        1e-12
    }
}

/// A layer norm's gain and bias.
struct Norm {
    gain: Vec<f32>,
    bias: Vec<f32>,
}

/// One encoder block. The query, key and value layers are one product
/// (`qkv`, their outputs side by side): each output is its own sum, so
/// stacking them changes no bit.
struct Block {
    qkv: Dense,
    attention_out: Dense,
    attention_norm: Norm,
    feed_in: Dense,
    feed_out: Dense,
    feed_norm: Norm,
}

/// A loaded encoder.
pub struct Bert {
    /// The word embeddings, `vocab_size` rows of `width`.
    words: Vec<f32>,
    /// The position embeddings, `max_position_embeddings` rows.
    positions: Vec<f32>,
    /// Segment type 0's embedding (every text is one segment).
    segment: Vec<f32>,
    norm: Norm,
    blocks: Vec<Block>,
    width: usize,
    heads: usize,
    eps: f32,
}

/// One tensor of the checkpoint, as `f32` values in row order.
fn read(vb: &VarBuilder<'_>, shape: &[usize], name: &str) -> Result<Vec<f32>> {
    vb.get(shape, name)?.flatten_all()?.to_vec1::<f32>()
}

fn dense(vb: &VarBuilder<'_>, inputs: usize, outputs: usize) -> Result<Dense> {
    let w = read(vb, &[outputs, inputs], "weight")?;
    let b = read(vb, &[outputs], "bias")?;
    Ok(Dense::new(&w, &b, outputs, inputs))
}

fn norm(vb: &VarBuilder<'_>, width: usize) -> Result<Norm> {
    Ok(Norm { gain: read(vb, &[width], "weight")?, bias: read(vb, &[width], "bias")? })
}

impl Bert {
    /// Loads the weights under `vb` (at its root, or under `bert.` as some
    /// checkpoints nest them). An unsupported activation or a head count
    /// that does not divide the width is refused.
    pub fn load(vb: VarBuilder<'_>, c: &BertConfig) -> Result<Bert> {
        if c.hidden_act != "gelu" {
            candle_core::bail!("hidden_act {:?} is not supported (only \"gelu\")", c.hidden_act);
        }
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            candle_core::bail!("{} attention heads do not divide hidden_size {}", c.num_attention_heads, c.hidden_size);
        }
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") { vb.pp("bert") } else { vb };
        let h = c.hidden_size;
        let e = vb.pp("embeddings");
        let blocks = (0..c.num_hidden_layers)
            .map(|i| {
                let b = vb.pp(format!("encoder.layer.{i}"));
                let (attention, output) = (b.pp("attention"), b.pp("output"));
                let (mut w, mut bias) = (Vec::with_capacity(3 * h * h), Vec::with_capacity(3 * h));
                for part in ["self.query", "self.key", "self.value"] {
                    w.extend(read(&attention.pp(part), &[h, h], "weight")?);
                    bias.extend(read(&attention.pp(part), &[h], "bias")?);
                }
                Ok(Block {
                    qkv: Dense::new(&w, &bias, 3 * h, h),
                    attention_out: dense(&attention.pp("output.dense"), h, h)?,
                    attention_norm: norm(&attention.pp("output.LayerNorm"), h)?,
                    feed_in: dense(&b.pp("intermediate.dense"), h, c.intermediate_size)?,
                    feed_out: dense(&output.pp("dense"), c.intermediate_size, h)?,
                    feed_norm: norm(&output.pp("LayerNorm"), h)?,
                })
            })
            .collect::<Result<Vec<Block>>>()?;
        let segments = read(&e.pp("token_type_embeddings"), &[c.type_vocab_size, h], "weight")?;
        Ok(Bert {
            words: read(&e.pp("word_embeddings"), &[c.vocab_size, h], "weight")?,
            positions: read(&e.pp("position_embeddings"), &[c.max_position_embeddings, h], "weight")?,
            segment: segments[..h].to_vec(),
            norm: norm(&e.pp("LayerNorm"), h)?,
            blocks,
            width: h,
            heads: c.num_attention_heads,
            eps: c.layer_norm_eps as f32,
        })
    }

    /// The last hidden states of several texts packed into one matrix,
    /// `(tokens of all texts) x hidden_size` row by row, the texts' rows in
    /// order, computed at `level`. Every row-wise operation (the
    /// embeddings, the dense layers, the layer norms, GELU, the residual
    /// sums) runs once on the whole matrix; attention runs per text, on
    /// its own rows. Nothing is padded and no mask is needed. Segment type
    /// 0 throughout; each text's positions count from 0.
    ///
    /// A text's rows are the same bits whatever else is packed with it, at
    /// any thread count and level: every operation computes each output in
    /// an order fixed by the shapes (`crate::kernel`), the dense products
    /// row by row, attention over the text's own rows.
    pub fn forward_packed(&self, level: Level, texts: &[&[u32]]) -> Result<Vec<f32>> {
        let h = self.width;
        if texts.iter().any(|t| t.is_empty()) {
            candle_core::bail!("a text of no tokens cannot be encoded");
        }
        let lens: Vec<usize> = texts.iter().map(|t| t.len()).collect();
        let rows: usize = lens.iter().sum();
        let mut sum = Vec::with_capacity(rows * h);
        for text in texts {
            for (at, id) in text.iter().enumerate() {
                let word = self.words.get(*id as usize * h..(*id as usize + 1) * h);
                let position = self.positions.get(at * h..(at + 1) * h);
                let (Some(word), Some(position)) = (word, position) else {
                    candle_core::bail!("token {id} at position {at} is outside the model's tables");
                };
                // As BERT adds them: the word and its segment, then the position.
                sum.extend(word.iter().zip(&self.segment).zip(position).map(|((w, s), p)| (*w + *s) + *p));
            }
        }
        let mut x = vec![0f32; rows * h];
        encoder::layer_norm(level, &sum, &self.norm.gain, &self.norm.bias, self.eps, &mut x);
        let mut scratch = Scratch::default();
        for block in &self.blocks {
            self.block_packed(level, block, &mut x, &lens, &mut scratch);
        }
        Ok(x)
    }

    /// One encoder block on packed rows (`lens`: each text's row count),
    /// `x` replaced by its output.
    fn block_packed(&self, level: Level, b: &Block, x: &mut [f32], lens: &[usize], s: &mut Scratch) {
        let (h, heads) = (self.width, self.heads);
        let scale = 1.0 / ((h / heads) as f32).sqrt();
        b.qkv.product(level, x, &mut s.qkv);
        s.context.resize(x.len(), 0.0);
        encoder::attend(level, &s.qkv, lens, h, heads, scale, &mut s.context);
        b.attention_out.product(level, &s.context, &mut s.out);
        residual(&mut s.out, x);
        encoder::layer_norm(level, &s.out, &b.attention_norm.gain, &b.attention_norm.bias, self.eps, x);
        b.feed_in.product(level, x, &mut s.feed);
        encoder::gelu(level, &mut s.feed, b.feed_in.outputs());
        b.feed_out.product(level, &s.feed, &mut s.out);
        residual(&mut s.out, x);
        encoder::layer_norm(level, &s.out, &b.feed_norm.gain, &b.feed_norm.bias, self.eps, x);
    }
}

/// A pass's intermediate matrices, reused from block to block.
#[derive(Default)]
struct Scratch {
    qkv: Vec<f32>,
    context: Vec<f32>,
    out: Vec<f32>,
    feed: Vec<f32>,
}

/// `out += x`, value by value (one rounding each).
fn residual(out: &mut [f32], x: &[f32]) {
    for (o, v) in out.iter_mut().zip(x) {
        *o += *v;
    }
}
