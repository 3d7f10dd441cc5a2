//! What several commands share, as cargo's `command_prelude` is: loading a
//! configuration, starting the async runtime, progress, finding a run's
//! trace, naming a persona, the answer-mode and option-order arguments,
//! and embedding texts through the configured provider. Commands use it;
//! it uses no command.

use crate::progress::TerminalProgress;
use actors::progress::{Progress, Silent};
use anyhow::Result;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use engine::config::{AnswerMode, AnswerOrder, Config, Provider};
use engine::embed::check::{self, CheckReport, Similarity};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The configuration in `path` (the embedded defaults without one), as
/// [`runs::load_config`] reads it.
pub fn load_config(path: Option<&PathBuf>) -> Result<Config> {
    Ok(runs::load_config(path.map(PathBuf::as_path))?)
}

/// The same, for a command that embeds and never chats: the chat model's
/// file is not read.
pub fn load_embedding_config(path: Option<&PathBuf>) -> Result<Config> {
    Ok(runs::load_config_for(path.map(PathBuf::as_path), runs::Models::Embedder)?)
}

/// `--answer-mode`: the names [`AnswerMode`] spells, listed in `--help`,
/// read by its one parser.
pub fn answer_mode() -> impl TypedValueParser<Value = AnswerMode> {
    PossibleValuesParser::new(AnswerMode::ALL.map(AnswerMode::as_str)).try_map(|s| s.parse::<AnswerMode>())
}

/// `--option-order`: the names [`AnswerOrder`] spells, read by its one
/// parser.
pub fn answer_order() -> impl TypedValueParser<Value = AnswerOrder> {
    PossibleValuesParser::new(AnswerOrder::ALL.map(AnswerOrder::as_str)).try_map(|s| s.parse::<AnswerOrder>())
}

/// A tokio runtime with `threads` workers (default: one per core).
pub fn runtime(threads: Option<u32>) -> Result<tokio::runtime::Runtime> {
    Ok(runs::runtime(threads)?)
}

/// Terminal progress when stderr is a terminal, else silence.
pub fn progress(ticks: u32) -> (Option<Arc<TerminalProgress>>, Arc<dyn Progress>) {
    let terminal = TerminalProgress::new(ticks).map(Arc::new);
    let progress: Arc<dyn Progress> = match &terminal {
        Some(t) => t.clone(),
        None => Arc::new(Silent),
    };
    (terminal, progress)
}

/// The trace file of a run directory (or the file itself).
pub fn trace_path(arg: &Path) -> Result<PathBuf> {
    Ok(runs::dir::trace_of(arg)?)
}

/// A persona named by index or label (`7` or `p-00007`) in a panel of `personas`.
pub fn parse_persona(s: &str, personas: u32) -> Result<u32> {
    Ok(runs::export::persona_index(s, personas)?)
}

/// `texts` through `cfg`'s embedder, in order.
pub fn embed_texts(cfg: &Config, texts: &[String], threads: Option<u32>) -> Result<Vec<std::sync::Arc<[f32]>>> {
    Ok(runs::embed_texts(cfg, texts, threads)?)
}

/// What kind of similarity the configured provider offers.
pub fn similarity(cfg: &Config) -> Similarity {
    match cfg.raw.embedding.provider {
        Provider::Local | Provider::Modelled => Similarity::Lexical,
        Provider::Openai | Provider::Minilm => Similarity::Semantic,
    }
}

/// The sanity check on `cfg`'s embedder.
pub fn run_check(cfg: &Config) -> Result<CheckReport> {
    let vectors = embed_texts(cfg, &check::texts(), None)?;
    Ok(check::judge(&cfg.raw.embedding.model, similarity(cfg), &vectors))
}
