#![warn(missing_docs)]
//! The run as a library: what `sim-cli` and any other caller (a binding, a
//! test, a bench) do to a run, callable without the command line.
//!
//! - [`RunDir`] owns a run directory's layout; every file name is spelled
//!   once, in [`dir`].
//! - [`start()`] and [`resume()`] run a panel, writing its trace (the run
//!   owns its trace sink), chat log, outcomes and summary;
//!   [`replay()`] re-runs a trace with no model call; [`merge()`] joins a
//!   panel's shards into the unsharded run's digest.
//! - [`report()`] writes a run's HTML report, [`export::write_outcomes`]
//!   its outcomes as JSON lines or CSV, [`memory::load`] its personas'
//!   memory, and [`validate()`] scores a panel against real survey answers.
//! - [`load_config`] reads a configuration file as every command does.
//!
//! ```no_run
//! let start = runs::Start { personas: Some(20), ticks: 2, ..runs::Start::new(runs::load_config(None)?) };
//! let finished = runs::start(start, &runs::Watch::quiet())?;
//! println!("{}: digest {}", finished.dir.path().display(), finished.summary.digest);
//! # Ok::<(), runs::Error>(())
//! ```

mod calibration;
pub mod dir;
mod error;
pub mod export;
pub mod memory;
mod merge;
pub mod preflight;
mod replay;
pub mod report;
mod start;
pub mod validate;
mod watch;

pub use dir::RunDir;
pub use error::{Error, Result};
pub use merge::{merge, Merged};
pub use replay::{replay, Replayed};
pub use report::{report, Reported};
pub use start::{
    load_scenario, resume, runtime, start, Finished, LoadedScenario, OutcomesFile, PanelData, Start, TraceHooks,
    DEFAULT_PERSONAS,
};
pub use validate::{compare, validate, Compare, Validate, Validation};
pub use watch::{Confirm, Interrupt, Watch};

use engine::config::{Config, RawConfig};
use std::path::Path;

/// The configuration in `path` (the embedded defaults without one),
/// resolved, with the identity of the models it names (the MiniLM weights'
/// SHA-256, which loads the model; a GGUF file's SHA-256). A relative
/// `[embedding.minilm] model_dir` or `[chat.gguf] model_file` is relative
/// to the file's directory.
pub fn load_config(path: Option<&Path>) -> Result<Config> {
    load_config_for(path, Models::All)
}

/// Which of a configuration's models [`load_config_for`] identifies (and
/// so loads, and needs on disk).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Models {
    /// The embedder and the chat model: what a run records.
    All,
    /// The embedder only, for a command that never chats (`embed`,
    /// `intent score`).
    Embedder,
    /// The chat model only, for a command that embeds only when asked
    /// (`validate`, which identifies the embedder itself for SSR).
    Chat,
}

/// [`load_config`], identifying only the `models` the caller uses.
pub fn load_config_for(path: Option<&Path>, models: Models) -> Result<Config> {
    let Some(path) = path else { return Ok(Config::defaults()) };
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(Error::io(format!("cannot read config {name}")))?;
    let mut raw = RawConfig::from_toml(&text, &name)?;
    if let Some((field, cause)) = raw.chat.gguf.retired_key() {
        return Err(engine::Error::Config { source_name: name, field: field.into(), cause }.into());
    }
    let base = path.parent().unwrap_or(Path::new("."));
    for file in [&mut raw.embedding.minilm.model_dir, &mut raw.chat.gguf.model_file, &mut raw.cache.dir] {
        if !file.is_empty() && Path::new(file.as_str()).is_relative() {
            *file = base.join(file.as_str()).display().to_string();
        }
    }
    let mut cfg = raw.resolve(&name)?;
    let identified = match models {
        Models::All => providers::identify_models(&mut cfg),
        Models::Embedder => providers::identify_embedder(&mut cfg),
        Models::Chat => providers::identify_chat(&mut cfg),
    };
    identified.map_err(|e| Error::context(format!("config {name}"), e))?;
    Ok(cfg)
}

/// The key texts of `cfg`'s model are embedded under; refused when the
/// config turns embeddings off.
pub fn embed_key(cfg: &Config) -> Result<engine::embed::EmbedKey> {
    use engine::config::EmbeddingModel;
    let e = &cfg.raw.embedding;
    if e.model() == EmbeddingModel::Disabled {
        return Err(Error::Input(
            "the config turns embeddings off (embedding.model = \"none\"): there is nothing to embed with".into(),
        ));
    }
    Ok(engine::embed::EmbedKey { role: engine::embed::EmbedRole::Memory, model: e.model.clone(), dim: e.dim })
}

/// `texts` through `cfg`'s embedder, in order.
pub fn embed_texts(cfg: &Config, texts: &[String], threads: Option<u32>) -> Result<Vec<std::sync::Arc<[f32]>>> {
    use engine::embed::EmbeddingPort;
    let key = embed_key(cfg)?;
    let client = providers::build_embedder(cfg, 0).map_err(actors::Error::from)?;
    let batch = runtime(threads)?.block_on(client.embed(&key, texts))?;
    Ok(batch.vectors)
}

/// Refuses `[chat] mode = "batch"` for a command that asks its questions
/// one at a time (`validate`, `experiment`): only a run gathers a round.
pub fn refuse_batch_mode(cfg: &Config, command: &str) -> Result<()> {
    if cfg.raw.chat.mode == engine::config::ChatMode::Batch {
        return Err(Error::Input(format!(
            "{command} does not use the Batch API: [chat] mode = \"batch\" is for `sim-cli run`; \
             set mode = \"online\" (or leave it out) for {command}"
        )));
    }
    Ok(())
}
