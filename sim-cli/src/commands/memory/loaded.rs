//! A recorded run's memory as the `memory` commands see it: the library's
//! [`runs::memory::load`], with terminal progress and its warnings on
//! stderr.

use super::RunDirArgs;
use crate::prelude::progress;
use anyhow::{Context, Result};

/// A run's memory, with where it came from.
pub(super) type Loaded = runs::memory::Memory;

/// `texts` through the run's embedding provider, as its personas'
/// memories were; `None` when the run embeds nothing (`model = "none"`).
pub(super) fn embed_like_the_run(l: &Loaded, texts: &[String]) -> Result<Option<Vec<Vec<f32>>>> {
    if texts.is_empty() || l.config.raw.embedding.model() == engine::config::EmbeddingModel::Disabled {
        return Ok(None);
    }
    let vectors = crate::prelude::embed_texts(&l.config, texts, None)
        .with_context(|| format!("cannot embed through the run's embedder ({})", l.config.raw.embedding.model))?;
    Ok(Some(vectors.iter().map(|v| v.to_vec()).collect()))
}

pub(super) fn load(dir: &RunDirArgs) -> Result<Loaded> {
    let mut terminal = None;
    let loaded = runs::memory::load(dir.run(), |ticks| {
        let (t, progress) = progress(ticks);
        terminal = t;
        progress
    });
    if let Some(t) = &terminal {
        t.finish();
    }
    let loaded = loaded?;
    for why in loaded.warnings() {
        eprintln!("warning: {why}");
    }
    Ok(loaded)
}
