#![warn(missing_docs)]
//! The adapters behind the engine's ports: everything that waits, talks to
//! the network, keeps a runtime or runs a model. Two trees, one per port:
//! [`embed`] (the embedding side) and [`chat`] (the chat side), over what
//! both share with an upstream ([`upstream`]: failures, backoff, rate
//! limits, seeded faults; [`clock`]: time). The models that run in-process
//! (MiniLM, GGUF chat models) are behind the `local-models` feature, which
//! `sim-cli`'s default build and the Python wheel turn on and the slim
//! build leaves out (with candle).
//!
//! [`InferenceClient`] is the one [`engine::embed::EmbeddingPort`] over a
//! provider: it serves cached texts ([`TextCache`]), splits the rest into
//! physical requests, sends them with capped concurrency under per-minute
//! limits, retries transient failures with seeded backoff and bills each
//! request. Every decision it takes (the split, the backoff, the cache key)
//! is a plain function of [`engine::embed::upstream`]; time comes from a
//! [`clock::Sleeper`], so tests run it on simulated time.
//!
//! Providers ([`embed::provider::EmbedProvider`]): [`LocalProvider`] (the
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

pub mod cache;
pub mod chat;
pub mod clock;
pub mod embed;
mod http;
#[cfg(feature = "local-models")]
pub mod kernel;
pub mod upstream;

pub use chat::ChatClient;
pub use embed::{EmbedProvider, HttpProvider, InferenceClient, LocalProvider, ModelledProvider, TextCache};
#[cfg(feature = "local-models")]
pub use embed::{MiniLm, MiniLmProvider};

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
    let upstream: Arc<dyn chat::upstream::ChatUpstream> = match c.provider {
        engine::config::ChatProvider::Scripted => return Ok(Arc::new(scripted)),
        engine::config::ChatProvider::Modelled => {
            let modelled = chat::ModelledChat::new(scripted, c.modelled.clone());
            Arc::new(match &clock {
                Some(clock) => modelled.with_clock(clock.clone()),
                None => modelled,
            })
        }
        engine::config::ChatProvider::Openai => {
            Arc::new(chat::HttpChat::new(c)?.with_min_option_mass(cfg.raw.answers.min_option_mass))
        }
        engine::config::ChatProvider::Gguf => gguf_chat(c)?,
    };
    let client = chat::ChatClient::new(upstream, c, cfg.chat_price, seed);
    let client = match clock {
        Some(clock) => client.with_clock(clock),
        None => client,
    };
    if c.mode == engine::config::ChatMode::Batch {
        let batch = chat::BatchChat::new(c, Arc::new(client), cfg.chat_batch_price, seed)?;
        return Ok(Arc::new(batch));
    }
    Ok(Arc::new(client))
}

/// `port` behind the response cache `cfg`'s `[cache]` names, for `run` and
/// `validate` (never `bench` or `soak`). The scripted and modelled
/// providers, and a cache that is off or has no directory, give `port`
/// back. `counters` may be shared by the ports of one command.
pub fn with_response_cache(
    cfg: &Config,
    seed: u64,
    port: Arc<dyn engine::chat::ChatPort>,
    counters: &Arc<cache::CacheCounters>,
) -> Arc<dyn engine::chat::ChatPort> {
    match cache_directory(cfg) {
        Some(dir) => Arc::new(cache::CachedChat::new(port, &dir, response_cache_base(cfg, seed), Arc::clone(counters))),
        None => port,
    }
}

/// The response cache's directory for `cfg`: `None` when `[cache]` is off
/// or has none, or the provider never uses it (scripted, modelled, a GGUF
/// model whose SHA-256 was not read).
pub fn cache_directory(cfg: &Config) -> Option<std::path::PathBuf> {
    use engine::config::ChatProvider;
    let live = match cfg.raw.chat.provider {
        ChatProvider::Openai => true,
        // A model file not identified (its SHA-256 unread) has no identity
        // to key by.
        ChatProvider::Gguf => !cfg.raw.chat.gguf.sha256.trim().is_empty(),
        ChatProvider::Scripted | ChatProvider::Modelled => false,
    };
    cfg.raw.cache.directory().filter(|_| live)
}

/// What besides the request decides a live answer, as the response cache
/// keys it: the engine's version (how requests go on the wire); the run's
/// seed; every `[chat]` setting that can change a reply
/// (temperature, top_p, the layout, max tokens, structured output; the
/// operational ones left out, as [`Config::content`] leaves them); the
/// `[answers]` settings (the mode among them); how calls are sent (online
/// or batch) and their prices, which the kept spend carries; and the
/// provider's identity: the endpoints (without credentials) and model id,
/// or the GGUF file's SHA-256.
pub fn response_cache_base(cfg: &Config, seed: u64) -> engine::digest::Digest {
    let content = cfg.content();
    use engine::config::ChatProvider;
    let identity = match cfg.raw.chat.provider {
        ChatProvider::Gguf => format!("gguf sha256 {}", cfg.raw.chat.gguf.sha256),
        ChatProvider::Openai | ChatProvider::Scripted | ChatProvider::Modelled => {
            let urls: Vec<String> = cfg.raw.chat.http.endpoints().iter().map(|u| engine::chat::redact_url(u)).collect();
            format!("endpoints {}", urls.join(" "))
        }
    };
    engine::digest::DigestWriter::new("response cache base v1")
        // How requests go on the wire (the weighing's wording, the
        // schemas, the samplers) can change with the engine.
        .str(engine::store::trace::record::ENGINE_VERSION)
        .u64(seed)
        .str(&json(&content.chat))
        .str(&json(&content.answers))
        .str(&format!("{:?}", cfg.raw.chat.mode))
        .str(&json(&cfg.chat_price))
        .str(&json(&cfg.chat_batch_price))
        .str(&identity)
        .finish()
}

/// Canonical JSON of a setting, for [`response_cache_base`].
fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("config values serialise; this is a bug")
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
        Provider::Minilm => minilm_provider(e)?,
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
        identify_gguf(&mut c.gguf)?;
    }
    Ok(())
}

/// [`identify_models`] for the embedder alone, for a command that embeds
/// and never chats: a chat model's file is neither read nor needed.
pub fn identify_embedder(cfg: &mut Config) -> engine::Result<()> {
    let e = &mut cfg.raw.embedding;
    if e.provider == Provider::Minilm {
        identify_minilm(&mut e.minilm)?;
    }
    Ok(())
}

/// The GGUF model's upstream (`[chat] provider = "gguf"`).
#[cfg(feature = "local-models")]
fn gguf_chat(c: &engine::config::ChatSection) -> engine::Result<Arc<dyn chat::upstream::ChatUpstream>> {
    Ok(Arc::new(Arc::new(chat::gguf::GgufChat::new(chat::gguf::load_configured(&c.gguf)?, c))))
}

/// The MiniLM provider (`[embedding] provider = "minilm"`).
#[cfg(feature = "local-models")]
fn minilm_provider(e: &engine::config::EmbeddingSection) -> engine::Result<Arc<dyn EmbedProvider>> {
    let level = embed::minilm::level_for(&e.minilm)?;
    Ok(Arc::new(MiniLmProvider::new(embed::minilm::load_configured(&e.minilm)?).at_level(level)))
}

/// The GGUF file's SHA-256 and the kernel level that runs (`auto`
/// resolved), for the trace header.
#[cfg(feature = "local-models")]
fn identify_gguf(g: &mut engine::config::GgufSettings) -> engine::Result<()> {
    let model = chat::gguf::load_configured(g)?;
    g.sha256 = model.sha256().to_string();
    g.kernel = model.level().setting();
    Ok(())
}

/// The MiniLM weights' SHA-256 and the kernel level that runs (`auto`
/// resolved), for the trace header.
#[cfg(feature = "local-models")]
fn identify_minilm(m: &mut engine::config::MinilmSettings) -> engine::Result<()> {
    let level = embed::minilm::level_for(m)?;
    m.weights_sha256 = embed::minilm::load_configured(m)?.weights_sha256().to_string();
    m.kernel = level.setting();
    Ok(())
}

/// The kernel level a local model (GGUF or MiniLM) computes at on this CPU
/// with `auto` (`avx2` or `portable`); `None` in a build without local
/// models.
pub fn auto_kernel_level() -> Option<&'static str> {
    #[cfg(feature = "local-models")]
    return Some(kernel::Level::detect().name());
    #[cfg(not(feature = "local-models"))]
    None
}

#[cfg(not(feature = "local-models"))]
fn gguf_chat(c: &engine::config::ChatSection) -> engine::Result<Arc<dyn chat::upstream::ChatUpstream>> {
    Err(without_local_models("[chat]", "chat.provider", "gguf", &c.gguf.model_file))
}

#[cfg(not(feature = "local-models"))]
fn minilm_provider(e: &engine::config::EmbeddingSection) -> engine::Result<Arc<dyn EmbedProvider>> {
    Err(without_local_models("[embedding]", "embedding.provider", "minilm", &e.minilm.model_dir))
}

#[cfg(not(feature = "local-models"))]
fn identify_gguf(g: &mut engine::config::GgufSettings) -> engine::Result<()> {
    Err(without_local_models("[chat]", "chat.provider", "gguf", &g.model_file))
}

#[cfg(not(feature = "local-models"))]
fn identify_minilm(m: &mut engine::config::MinilmSettings) -> engine::Result<()> {
    Err(without_local_models("[embedding]", "embedding.provider", "minilm", &m.model_dir))
}

/// The refusal of a model (in `path`) this build cannot run.
#[cfg(not(feature = "local-models"))]
fn without_local_models(section: &str, field: &str, provider: &str, path: &str) -> engine::Error {
    engine::Error::Config {
        source_name: section.into(),
        field: field.into(),
        cause: format!(
            "\"{provider}\" runs the model in {path} in-process, and this build has no local models (it was built \
             without the `local-models` feature, as the slim build is); build sim-cli with its default features"
        ),
    }
}
