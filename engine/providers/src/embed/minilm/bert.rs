//! The BERT encoder MiniLM runs, on candle's tensors and layers: token,
//! position and segment embeddings, then `num_hidden_layers` blocks of
//! multi-head self-attention and a GELU feed-forward, each closed by a
//! residual sum and a layer norm (Devlin et al. 2019; the layout of
//! Hugging Face's `BertModel` checkpoints, which MiniLM's weights follow).
//! Only what an encoder needs for sentence vectors is here: no pooler, no
//! heads, no dropout (inference only).

use candle_core::{Module, Result, Tensor, D};
use candle_nn::{embedding, layer_norm, linear, Embedding, LayerNorm, Linear, VarBuilder};

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

/// One encoder block.
struct Block {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    feed_in: Linear,
    feed_out: Linear,
    feed_norm: LayerNorm,
}

/// A loaded encoder.
pub struct Bert {
    words: Embedding,
    positions: Embedding,
    segments: Embedding,
    norm: LayerNorm,
    blocks: Vec<Block>,
    heads: usize,
    head_size: usize,
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
        let (h, eps) = (c.hidden_size, c.layer_norm_eps);
        let e = vb.pp("embeddings");
        let blocks = (0..c.num_hidden_layers)
            .map(|i| {
                let b = vb.pp(format!("encoder.layer.{i}"));
                let (attention, output) = (b.pp("attention"), b.pp("output"));
                Ok(Block {
                    query: linear(h, h, attention.pp("self.query"))?,
                    key: linear(h, h, attention.pp("self.key"))?,
                    value: linear(h, h, attention.pp("self.value"))?,
                    attention_out: linear(h, h, attention.pp("output.dense"))?,
                    attention_norm: layer_norm(h, eps, attention.pp("output.LayerNorm"))?,
                    feed_in: linear(h, c.intermediate_size, b.pp("intermediate.dense"))?,
                    feed_out: linear(c.intermediate_size, h, output.pp("dense"))?,
                    feed_norm: layer_norm(h, eps, output.pp("LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<Block>>>()?;
        Ok(Bert {
            words: embedding(c.vocab_size, h, e.pp("word_embeddings"))?,
            positions: embedding(c.max_position_embeddings, h, e.pp("position_embeddings"))?,
            segments: embedding(c.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            norm: layer_norm(h, eps, e.pp("LayerNorm"))?,
            blocks,
            heads: c.num_attention_heads,
            head_size: h / c.num_attention_heads,
        })
    }

    /// The last hidden states of several texts packed into one matrix,
    /// `(tokens of all texts, hidden_size)`, the texts' rows in order. Every
    /// row-wise operation (the embeddings, the linear layers, the layer
    /// norms, GELU, the residual sums) runs once on the whole matrix;
    /// attention runs per text, on its own rows. Nothing is padded and no
    /// mask is needed. Segment type 0 throughout; each text's positions
    /// count from 0.
    ///
    /// A text's rows are the same bits whatever else is packed with it:
    /// elementwise operations and the layer norm compute each row alone,
    /// attention sees only the text's own rows, and candle's f32 matrix
    /// product (the `gemm` crate) adds each output in the same order for any
    /// number of rows. The weight matrix is gemm's fixed left operand, and
    /// the depth blocks come from the inner dimension and the cache sizes
    /// alone. The one exception, a one-row product (gemm's `gemv` path),
    /// never happens: a text holds at least `[CLS]` and `[SEP]`.
    pub fn forward_packed(&self, texts: &[&[u32]]) -> Result<Tensor> {
        let device = &candle_core::Device::Cpu;
        let lens: Vec<usize> = texts.iter().map(|t| t.len()).collect();
        if lens.contains(&0) {
            candle_core::bail!("a text of no tokens cannot be encoded");
        }
        let total: usize = lens.iter().sum();
        let ids = Tensor::from_vec(texts.concat(), total, device)?;
        let positions: Vec<u32> = lens.iter().flat_map(|n| 0..*n as u32).collect();
        let positions = Tensor::from_vec(positions, total, device)?;
        let types = ids.zeros_like()?;
        // As `forward` adds them: words and segments, then positions.
        let x = (self.words.forward(&ids)? + self.segments.forward(&types)?)?;
        let mut x = self.norm.forward(&(x + self.positions.forward(&positions)?)?)?;
        for block in &self.blocks {
            x = self.block_packed(block, &x, &lens)?;
        }
        Ok(x)
    }

    /// One encoder block on packed rows (`lens`: each text's row count).
    fn block_packed(&self, b: &Block, x: &Tensor, lens: &[usize]) -> Result<Tensor> {
        let (q, k, v) = (b.query.forward(x)?, b.key.forward(x)?, b.value.forward(x)?);
        let mut contexts = Vec::with_capacity(lens.len());
        let mut start = 0;
        for &n in lens {
            let split = |t: &Tensor| {
                t.narrow(0, start, n)?.reshape((1, n, self.heads, self.head_size))?.transpose(1, 2)?.contiguous()
            };
            let (q, k, v) = (split(&q)?, split(&k)?, split(&v)?);
            let scores = (q.matmul(&k.t()?)? / (self.head_size as f64).sqrt())?;
            let weights = candle_nn::ops::softmax(&scores, D::Minus1)?;
            contexts.push(weights.matmul(&v)?.transpose(1, 2)?.contiguous()?.flatten_from(D::Minus2)?.squeeze(0)?);
            start += n;
        }
        let context = Tensor::cat(&contexts, 0)?;
        let x = b.attention_norm.forward(&(b.attention_out.forward(&context)? + x)?)?;
        let fed = b.feed_out.forward(&b.feed_in.forward(&x)?.gelu_erf()?)?;
        b.feed_norm.forward(&(fed + x)?)
    }

    /// The last hidden states, `(batch, tokens, hidden_size)`, of `ids` and
    /// their segment `types` (both `(batch, tokens)`), padded texts under a
    /// `mask` (the same shape, 1 for a token, 0 for padding: no token
    /// attends to padding). Only the padded alternative the bench measures
    /// uses it; every request runs [`Bert::forward_packed`].
    pub fn forward(&self, ids: &Tensor, types: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let tokens = ids.dim(1)?;
        let positions = Tensor::arange(0u32, tokens as u32, ids.device())?;
        let x = (self.words.forward(ids)? + self.segments.forward(types)?)?;
        let mut x = self.norm.forward(&x.broadcast_add(&self.positions.forward(&positions)?)?)?;
        // Padding gets the lowest float added to its scores, so softmax
        // gives it no weight.
        let bias = match mask {
            Some(m) => {
                let m = m.to_dtype(x.dtype())?;
                Some(((m.ones_like()? - m)? * f64::from(f32::MIN))?.unsqueeze(1)?.unsqueeze(1)?)
            }
            None => None,
        };
        for block in &self.blocks {
            x = self.block(block, &x, bias.as_ref())?;
        }
        Ok(x)
    }

    fn block(&self, b: &Block, x: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let (batch, tokens, _) = x.dims3()?;
        let split = |t: Tensor| t.reshape((batch, tokens, self.heads, self.head_size))?.transpose(1, 2)?.contiguous();
        let (q, k, v) = (split(b.query.forward(x)?)?, split(b.key.forward(x)?)?, split(b.value.forward(x)?)?);
        let scores = (q.matmul(&k.t()?)? / (self.head_size as f64).sqrt())?;
        let scores = match bias {
            Some(bias) => scores.broadcast_add(bias)?,
            None => scores,
        };
        let weights = candle_nn::ops::softmax(&scores, D::Minus1)?;
        let context = weights.matmul(&v)?.transpose(1, 2)?.contiguous()?.flatten_from(D::Minus2)?;
        let x = b.attention_norm.forward(&(b.attention_out.forward(&context)? + x)?)?;
        let fed = b.feed_out.forward(&b.feed_in.forward(&x)?.gelu_erf()?)?;
        b.feed_norm.forward(&(fed + x)?)
    }
}
