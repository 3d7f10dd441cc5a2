//! The model architectures the forward pass runs, each described as data
//! over the same blocks ([`super::transformer`]), the way llama.cpp
//! structures its families rather than one copied forward pass per family.
//!
//! An [`Arch`] names what differs between families: the prefix of its
//! hyper-parameter keys (`general.architecture`, then `{arch}.block_count`
//! and so on), its tensors' names, and the block it runs:
//!
//! - `llama` (Llama 1–3, SmolLM, Mistral-style files): RMS norms, Q, K and
//!   V without biases, RoPE on interleaved pairs (llama.cpp's "norm"
//!   style: GGUF's Llama files have Q and K rows permuted for it), a
//!   SwiGLU feed-forward block, an output matrix or the tied embedding;
//! - `qwen2` (Qwen2, Qwen2.5): the same, with biases on Q, K and V and
//!   RoPE on the two halves of each head (the "NeoX" style).
//!
//! A file of any other architecture is refused by name, with this list.

/// How RoPE pairs the dimensions of a head it rotates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// Dimensions `2i` and `2i + 1` (llama.cpp's `LLAMA_ROPE_TYPE_NORM`).
    Interleaved,
    /// Dimensions `i` and `i + rope_dim / 2` (`LLAMA_ROPE_TYPE_NEOX`).
    Neox,
}

/// A transformer block's form: which of the shared steps it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Q, K and V have bias vectors (`attn_q.bias`, `attn_k.bias`,
    /// `attn_v.bias`), added before RoPE.
    pub qkv_bias: bool,
    /// RoPE's pairing.
    pub rope: RopeStyle,
}

/// The names of a model's tensors (GGUF's own; `{}` in a block tensor's
/// name is the block's index).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorNames {
    /// The token embedding.
    pub embedding: &'static str,
    /// The output matrix; absent when the embedding is tied.
    pub output: &'static str,
    /// The final norm's weights.
    pub output_norm: &'static str,
    /// RoPE's per-pair frequency factors, when the file has them.
    pub rope_factors: &'static str,
    /// The prefix of block `i`'s tensors: `{prefix}{i}.{name}.weight`.
    pub block: &'static str,
    /// Attention's norm, Q, K, V and output, the feed-forward norm, gate,
    /// up and down, in that order.
    pub attn_norm: &'static str,
    /// Q.
    pub q: &'static str,
    /// K.
    pub k: &'static str,
    /// V.
    pub v: &'static str,
    /// Attention's output.
    pub attn_output: &'static str,
    /// The feed-forward block's norm.
    pub ffn_norm: &'static str,
    /// The gate.
    pub gate: &'static str,
    /// Up.
    pub up: &'static str,
    /// Down.
    pub down: &'static str,
}

/// GGUF's standard tensor names, which llama.cpp's converter writes for
/// every family described here.
pub const GGUF_NAMES: TensorNames = TensorNames {
    embedding: "token_embd.weight",
    output: "output.weight",
    output_norm: "output_norm.weight",
    rope_factors: "rope_freqs.weight",
    block: "blk.",
    attn_norm: "attn_norm",
    q: "attn_q",
    k: "attn_k",
    v: "attn_v",
    attn_output: "attn_output",
    ffn_norm: "ffn_norm",
    gate: "ffn_gate",
    up: "ffn_up",
    down: "ffn_down",
};

/// One architecture: its name (`general.architecture`, and the prefix of
/// its hyper-parameter keys), the families it covers, its tensors and its
/// block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arch {
    /// `general.architecture`.
    pub name: &'static str,
    /// The families whose files carry it, for messages.
    pub families: &'static str,
    /// Its tensors' names.
    pub tensors: TensorNames,
    /// Its block.
    pub block: Block,
}

impl Arch {
    /// The metadata key `{name}.{key}` (`llama.block_count`).
    pub fn key(&self, key: &str) -> String {
        format!("{}.{key}", self.name)
    }

    /// Block `i`'s tensor `part` (`blk.3.attn_q`), then `.weight` or
    /// `.bias`.
    pub fn block_tensor(&self, i: usize, part: &str, kind: &str) -> String {
        format!("{}{i}.{part}.{kind}", self.tensors.block)
    }
}

/// Every architecture the forward pass runs.
pub const ARCHS: [Arch; 2] = [
    Arch {
        name: "llama",
        families: "Llama, SmolLM2",
        tensors: GGUF_NAMES,
        block: Block { qkv_bias: false, rope: RopeStyle::Interleaved },
    },
    Arch {
        name: "qwen2",
        families: "Qwen2, Qwen2.5",
        tensors: GGUF_NAMES,
        block: Block { qkv_bias: true, rope: RopeStyle::Neox },
    },
];

/// The architecture named `name`, or why not: the name and the list of
/// those supported.
pub(crate) fn find(name: Option<&str>) -> Result<&'static Arch, String> {
    let supported = ARCHS.iter().map(|a| format!("{} ({})", a.name, a.families)).collect::<Vec<_>>().join(", ");
    match name {
        Some(n) => ARCHS.iter().find(|a| a.name == n).ok_or_else(|| {
            format!("holds a model of architecture \"{n}\" (general.architecture), which this provider does not run; it runs {supported}")
        }),
        None => Err(format!("its metadata names no general.architecture; this provider runs {supported}")),
    }
}
