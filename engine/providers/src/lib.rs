#![warn(missing_docs)]
//! The adapters behind the engine's embedding port: everything that waits,
//! talks to the network or keeps a runtime.
//!
//! [`InferenceClient`] is the one [`engine::embed::EmbeddingPort`] over a
//! provider: it serves cached texts ([`TextCache`]), splits the rest into
//! physical requests, sends them with capped concurrency under per-minute
//! limits, retries transient failures with seeded backoff and bills each
//! request. Every decision it takes (the split, the backoff, the cache key)
//! is a plain function of [`engine::embed::upstream`]; time comes from a
//! [`clock::Sleeper`], so tests run it on simulated time.
//!
//! Providers ([`provider::EmbedProvider`]): [`LocalProvider`] (the
//! embedded default), [`ModelledProvider`] (latency and seeded faults, for
//! benches and tests) and [`HttpProvider`] (any OpenAI-compatible
//! `/embeddings` endpoint). [`build_embedder`] picks one from the
//! configuration.
//!
//! ```
//! use engine::config::Config;
//! use engine::embed::{EmbedKey, EmbedRole, EmbeddingPort};
//!
//! let cfg = Config::defaults();
//! let client = providers::build_embedder(&cfg, 42).unwrap();
//! let key = EmbedKey { role: EmbedRole::Memory, model: cfg.raw.embedding.model.clone(), dim: 8 };
//! let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
//! let batch = rt.block_on(client.embed(&key, &["a red shoe".to_string()])).unwrap();
//! assert_eq!(batch.vectors[0].len(), 8);
//! ```

pub mod batch_api;
pub mod cache;
pub mod chat;
pub mod client;
pub mod clock;
pub mod gguf;
pub mod http;
pub mod local;
pub mod minilm;
pub mod modelled;
pub mod provider;

pub use cache::TextCache;
pub use chat::ChatClient;
pub use client::InferenceClient;
pub use http::HttpProvider;
pub use local::LocalProvider;
pub use minilm::{MiniLm, MiniLmProvider};
pub use modelled::ModelledProvider;
pub use provider::EmbedProvider;

use engine::config::{Config, Provider};
use std::sync::Arc;

/// The chat port `cfg.chat` names: the scripted persona model, or the
/// client over the modelled or HTTP upstream. Fails when the HTTP key is
/// missing or a URL is malformed. A live endpoint is built only when the
/// configuration names it.
pub fn build_chat(cfg: &Config, seed: u64) -> engine::Result<Arc<dyn engine::chat::ChatPort>> {
    let c = &cfg.raw.chat;
    let scripted = engine::chat::ScriptedPersonaModel { seed, malformed_rate: c.malformed_rate, price: cfg.chat_price };
    let clock = modelled_clock(&c.modelled).filter(|_| c.provider == engine::config::ChatProvider::Modelled);
    let upstream: Arc<dyn chat::ChatUpstream> = match c.provider {
        engine::config::ChatProvider::Scripted => return Ok(Arc::new(scripted)),
        engine::config::ChatProvider::Modelled => {
            let modelled = chat::ModelledChat::new(scripted, c.modelled.clone());
            Arc::new(match &clock {
                Some(clock) => modelled.with_clock(clock.clone()),
                None => modelled,
            })
        }
        engine::config::ChatProvider::Openai => Arc::new(chat::HttpChat::new(c)?),
        engine::config::ChatProvider::Gguf => {
            Arc::new(Arc::new(gguf::GgufChat::new(gguf::load_configured(&c.gguf)?, c)))
        }
    };
    let client = chat::ChatClient::new(upstream, c, cfg.chat_price, seed);
    let client = match clock {
        Some(clock) => client.with_clock(clock),
        None => client,
    };
    if c.mode == engine::config::ChatMode::Batch {
        let batch = batch_api::BatchChat::new(c, Arc::new(client), cfg.chat_batch_price, seed)?;
        return Ok(Arc::new(batch));
    }
    Ok(Arc::new(client))
}

/// The inference client over the provider `cfg.embedding` names, with its
/// cache (in memory, or the cache file, loaded now). `seed` seeds the
/// backoff jitter. Fails when the HTTP provider's key is missing, the
/// MiniLM model cannot be loaded (or has other weights than the config
/// records) or the cache file cannot be read. A hosted provider is built
/// only when the configuration names it.
pub fn build_embedder(cfg: &Config, seed: u64) -> engine::Result<InferenceClient> {
    let e = &cfg.raw.embedding;
    let clock = modelled_clock(&e.modelled);
    let provider: Arc<dyn EmbedProvider> = match e.provider {
        Provider::Local => Arc::new(LocalProvider),
        Provider::Modelled => {
            let modelled = ModelledProvider::new(e.modelled.clone());
            Arc::new(match &clock {
                Some(c) => modelled.with_clock(c.clone()),
                None => modelled,
            })
        }
        Provider::Openai => Arc::new(HttpProvider::new(&e.http)?),
        Provider::Minilm => Arc::new(MiniLmProvider::new(minilm::load_configured(&e.minilm)?)),
    };
    let cache = match (e.cache, e.cache_file.as_str()) {
        (false, _) => None,
        (true, "") => Some(TextCache::in_memory()),
        (true, file) => Some(TextCache::with_file(std::path::Path::new(file))?),
    };
    let client = InferenceClient::new(provider, e.clone(), cfg.embedding_price, cache, seed);
    Ok(match clock {
        Some(c) if e.provider == Provider::Modelled => client.with_clock(c),
        _ => client,
    })
}

/// A simulated clock when a modelled provider's settings ask for one; the
/// client's backoffs then wait on the same clock.
pub(crate) fn modelled_clock(settings: &engine::embed::upstream::ModelledSettings) -> Option<Arc<dyn clock::Sleeper>> {
    use engine::embed::upstream::LatencyClock;
    match settings.clock {
        LatencyClock::Real => None,
        LatencyClock::Simulated => Some(Arc::new(clock::SimulatedSleeper::new())),
    }
}

/// Completes a configuration with the identity of the models it names, so
/// that its hash and a trace's header say which model ran: for `minilm`,
/// the SHA-256 of the weights (the model is loaded now, once per process
/// and directory); for a `gguf` chat model, the file's SHA-256 (loaded
/// likewise) and the kernel level it computes at. Refuses weights other
/// than the ones the config records.
pub fn identify_models(cfg: &mut Config) -> engine::Result<()> {
    identify_embedder(cfg)?;
    identify_chat(cfg)
}

/// [`identify_models`] for the chat model alone, for a command that chats
/// and embeds only when asked to (`validate`, for SSR).
pub fn identify_chat(cfg: &mut Config) -> engine::Result<()> {
    let c = &mut cfg.raw.chat;
    if c.provider == engine::config::ChatProvider::Gguf {
        let model = gguf::load_configured(&c.gguf)?;
        c.gguf.sha256 = model.sha256().to_string();
        // The level that runs, for the trace header (`auto` resolved).
        c.gguf.kernel = match model.level() {
            gguf::Level::Avx2 => engine::config::GgufKernel::Avx2,
            gguf::Level::Portable => engine::config::GgufKernel::Portable,
        };
    }
    Ok(())
}

/// [`identify_models`] for the embedder alone, for a command that embeds
/// and never chats: a chat model's file is neither read nor needed.
pub fn identify_embedder(cfg: &mut Config) -> engine::Result<()> {
    let e = &mut cfg.raw.embedding;
    if e.provider == Provider::Minilm {
        let model = minilm::load_configured(&e.minilm)?;
        e.minilm.weights_sha256 = model.weights_sha256().to_string();
    }
    Ok(())
}
