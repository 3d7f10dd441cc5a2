//! Configuration, in two steps.
//!
//! [`RawConfig`] is what a TOML file (or the defaults) says, parsed with no
//! I/O and with unknown fields rejected. [`RawConfig::resolve`] validates it
//! into the [`Config`] the engine uses. A resolved config serialises
//! canonically and has a [`Config::hash`], which identifies a run.

use crate::cost::Price;
use crate::digest::{Digest, DigestWriter};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

mod answers;
mod batch_api;
mod chat;
mod kernel;
pub mod panel;
mod prices;

pub use crate::intent::{IntentMethod, IntentSection};
pub use answers::{AnswerMode, AnswerOrder, AnswersSection, ProbeCalibration, DEFAULT_MIN_OPTION_MASS};
pub use batch_api::{BatchSettings, ChatMode, MAX_BATCH_BYTES, MAX_BATCH_LINES};
pub use chat::{is_scripted_model, ChatProvider, ChatSection, GgufLayout, GgufSettings, StructuredOutput};
pub use kernel::KernelLevel;
pub use prices::{builtin_model_prices, local_price, ModelPrice, PriceLabel, PricesSection};

/// Simulated-time settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunSection {
    /// Simulated hours per tick. Default 1: memory consolidation's decay
    /// rates are per hour (working memories lose 40% of their energy an
    /// hour); with day-long ticks every unpromoted memory would expire
    /// between two ticks.
    pub hours_per_tick: u32,
    /// The most personas activated on hosts at once, per stage window.
    /// Default 8192. Operational, like `--threads`: it changes memory in
    /// flight and message counts, never a result, and stays out of every
    /// hash and digest.
    #[serde(skip_serializing_if = "RunSection::is_default_window")]
    pub max_active_personas: u32,
}

/// The default of `run.max_active_personas`.
pub const DEFAULT_MAX_ACTIVE_PERSONAS: u32 = 8192;

impl RunSection {
    fn is_default_window(n: &u32) -> bool {
        *n == DEFAULT_MAX_ACTIVE_PERSONAS
    }
}

impl Default for RunSection {
    fn default() -> Self {
        RunSection { hours_per_tick: 1, max_active_personas: DEFAULT_MAX_ACTIVE_PERSONAS }
    }
}

/// Memory consolidation during a run. Every default is off or zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsolidationSection {
    /// Run the automatic consolidation pass (decay, session boundary,
    /// promotion, clustering, expiry) at each tick commit. Default false:
    /// the consolidation plan runs consolidation by hand first
    /// (`sim-cli memory consolidate`) and schedules it only once the
    /// manual passes are understood. Energy bookkeeping (an access adds
    /// `access_boost`, a new memory starts at `initial_energy`) runs
    /// either way.
    pub enabled: bool,
    /// Play the automatic pass on a copy at each commit and record what it
    /// would do, changing nothing; it needs no `enabled`. Default false.
    pub dry_run: bool,
    /// The tick that ends the session (working memories above the session
    /// threshold are queued for promotion). Default 0: the run's last tick.
    pub session_end_tick: u32,
    /// Thresholds and rates, `[consolidation.rules]`.
    pub rules: crate::memory::ConsolidationConfig,
}

/// Memory retrieval: the recency, importance and relevance score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetrievalSection {
    /// Memories retrieved per job. Zero or less skips retrieval (and its
    /// embedding) entirely. Default 5.
    pub k: i64,
    /// Weight of the normalised recency component. Default 1.
    pub recency_weight: f64,
    /// Weight of the normalised importance component. Default 1.
    pub importance_weight: f64,
    /// Weight of the normalised relevance component. Default 1.
    pub relevance_weight: f64,
    /// Recency decay factor per simulated hour since last access. Default
    /// 0.995, as in the generative-agents memory stream.
    pub recency_decay_per_hour: f64,
}

impl Default for RetrievalSection {
    fn default() -> Self {
        RetrievalSection {
            k: 5,
            recency_weight: 1.0,
            importance_weight: 1.0,
            relevance_weight: 1.0,
            recency_decay_per_hour: 0.995,
        }
    }
}

/// Who computes embedding vectors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    /// The embedded hashed embedder: no network, no key, answers at once.
    #[default]
    Local,
    /// The local vectors behind a modelled hosted API (latency,
    /// concurrency, seeded faults), for benches and tests.
    Modelled,
    /// An OpenAI-compatible `/embeddings` endpoint; see `[embedding.http]`.
    Openai,
    /// sentence-transformers all-MiniLM-L6-v2, run locally on the
    /// project's own kernels (the same bits on every CPU); see
    /// `[embedding.minilm]`. Its model name and dimension
    /// ([`MINILM_MODEL`], [`MINILM_DIM`]) follow from the provider.
    Minilm,
}

/// The model name of the `minilm` provider (also its price row).
pub const MINILM_MODEL: &str = "all-MiniLM-L6-v2";
/// The vector dimension of the `minilm` provider.
pub const MINILM_DIM: usize = 384;

/// Settings of the `minilm` provider.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MinilmSettings {
    /// The directory holding `model.safetensors`, `config.json` and
    /// `tokenizer.json`, as `bash scripts/fetch-minilm` fills it. In a
    /// config file, a relative path is relative to the file's directory.
    /// Stays out of [`Config::hash`]: the weights' digest names the model.
    pub model_dir: String,
    /// SHA-256 of `model.safetensors`, in hex: the model's identity,
    /// filled when the model is loaded and recorded in the trace header.
    /// When a config gives it, a model with other weights is refused.
    pub weights_sha256: String,
    /// Which compiled form of the kernels runs. Default
    /// [`KernelLevel::Auto`]; a run records the level that ran (`auto`
    /// resolved). Operational: every level gives the same bits.
    #[serde(skip_serializing_if = "KernelLevel::is_auto")]
    pub kernel: KernelLevel,
}

impl MinilmSettings {
    /// Whether nothing is set (the section is then left out of the
    /// canonical form, so configs without it hash as before).
    pub fn is_unset(&self) -> bool {
        self.model_dir.is_empty() && self.weights_sha256.is_empty() && self.kernel.is_auto()
    }
}

/// The embedding model and how work is sent to it: the inference client
/// (`providers::InferenceClient`) takes its settings from this section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EmbeddingSection {
    /// Model name; part of the embedding key. Default `local-hash-v1`, the
    /// embedded deterministic embedder; `none` runs without embeddings.
    pub model: String,
    /// Vector dimension. Default 256: enough buckets that hashed word
    /// features of short texts rarely collide, at 1 KiB per memory.
    pub dim: usize,
    /// Who computes the vectors. Default [`Provider::Local`].
    pub provider: Provider,
    /// Texts per physical request. Default 64.
    pub batch_size: usize,
    /// Estimated tokens per physical request; a single longer text goes
    /// alone. Default 8192, a common hosted limit.
    pub max_tokens_per_request: u64,
    /// Physical requests in flight at once. Default 4.
    pub concurrency: usize,
    /// Requests per minute, 0 for unlimited. Default 0.
    pub requests_per_minute: u32,
    /// Tokens per minute, 0 for unlimited. Default 0.
    pub tokens_per_minute: u64,
    /// Retries of a transient failure (429, 5xx, timeout). Default 3.
    pub max_retries: u32,
    /// First retry backoff in milliseconds; doubles per retry. Default 200.
    pub backoff_base_ms: u64,
    /// Longest backoff in milliseconds. Default 10000.
    pub backoff_max_ms: u64,
    /// Cache vectors by (model, dim, text) within a run. Default true.
    pub cache: bool,
    /// A file that keeps the cache across runs (warm-cache runs). Default
    /// empty: none.
    pub cache_file: String,
    /// Settings of the `modelled` provider.
    pub modelled: crate::embed::upstream::ModelledSettings,
    /// Settings of the `openai` provider (an OpenAI-compatible endpoint).
    pub http: crate::embed::upstream::HttpSettings,
    /// Settings of the `minilm` provider.
    #[serde(skip_serializing_if = "MinilmSettings::is_unset")]
    pub minilm: MinilmSettings,
}

/// Whether a run embeds at all, and with which model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmbeddingModel<'a> {
    /// `model = "none"`: no embeddings; relevance is zero and both
    /// embedding stages are skipped.
    Disabled,
    /// The named model.
    Named(&'a str),
}

impl EmbeddingSection {
    /// The `model` value that turns embeddings off.
    pub const DISABLED: &'static str = "none";

    /// The model, or that embeddings are off.
    pub fn model(&self) -> EmbeddingModel<'_> {
        match self.model.as_str() {
            Self::DISABLED => EmbeddingModel::Disabled,
            name => EmbeddingModel::Named(name),
        }
    }
}

impl Default for EmbeddingSection {
    fn default() -> Self {
        EmbeddingSection {
            model: "local-hash-v1".into(),
            dim: 256,
            provider: Provider::Local,
            batch_size: 64,
            max_tokens_per_request: 8192,
            concurrency: 4,
            requests_per_minute: 0,
            tokens_per_minute: 0,
            max_retries: 3,
            backoff_base_ms: 200,
            backoff_max_ms: 10_000,
            cache: true,
            cache_file: String::new(),
            modelled: Default::default(),
            http: Default::default(),
            minilm: Default::default(),
        }
    }
}

/// When personas reflect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReflectionSection {
    /// Accumulated importance (1-10 per memory) that triggers a reflection.
    /// Default 20: a persona reflects every three or four strong reactions.
    pub importance_threshold: u32,
    /// Insights kept from one reflection. Default 3.
    pub max_insights: usize,
    /// Recent memories shown in a reflection prompt. Default 8.
    pub recent_memories: usize,
}

impl Default for ReflectionSection {
    fn default() -> Self {
        ReflectionSection { importance_threshold: 20, max_insights: 3, recent_memories: 8 }
    }
}

/// A persona handler panic injected at one tick, for failure-isolation
/// tests and demonstrations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PanicFault {
    /// Persona index.
    pub persona: u32,
    /// Tick (1-based) at which its handler panics.
    pub tick: u32,
}

/// Injected faults. Empty by default.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FaultsSection {
    /// Persona handlers that panic.
    pub panic: Vec<PanicFault>,
}

/// A configuration as written: every section optional, unknown fields are
/// errors.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RawConfig {
    /// `[run]`
    pub run: RunSection,
    /// `[retrieval]`
    pub retrieval: RetrievalSection,
    /// `[embedding]`
    pub embedding: EmbeddingSection,
    /// `[chat]`
    pub chat: ChatSection,
    /// `[reflection]`
    pub reflection: ReflectionSection,
    /// `[prices]`
    pub prices: PricesSection,
    /// `[intent]`
    #[serde(skip_serializing_if = "IntentSection::is_default")]
    pub intent: IntentSection,
    /// `[consolidation]`
    pub consolidation: ConsolidationSection,
    /// `[faults]`
    pub faults: FaultsSection,
    /// `[panel]`: personas given by data (`run --panel`); absent, they are
    /// drawn from the trait table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub panel: Option<panel::PanelSection>,
    /// `[answers]`: how closed questions are answered.
    #[serde(skip_serializing_if = "AnswersSection::is_default")]
    pub answers: AnswersSection,
    /// `[cache]`: the response cache across runs. Operational: out of every
    /// hash and digest.
    #[serde(skip_serializing_if = "CacheSection::is_default")]
    pub cache: CacheSection,
}

/// `[cache]`: where `run` and `validate` keep a live model's replies and
/// weighings, to serve them again with no call (the providers crate's
/// `CachedChat`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheSection {
    /// Whether they do (default true; `--no-cache` turns it off for one
    /// command). The scripted and modelled providers never use it.
    pub enabled: bool,
    /// The directory; empty (the default) for `sim-engine/responses` under
    /// `$XDG_CACHE_HOME`, else under `$HOME/.cache`. A relative path is
    /// relative to the config file's directory.
    pub dir: String,
}

impl Default for CacheSection {
    fn default() -> Self {
        CacheSection { enabled: true, dir: String::new() }
    }
}

impl CacheSection {
    fn is_default(&self) -> bool {
        *self == CacheSection::default()
    }

    /// The cache's directory; `None` when it is off, or when no directory
    /// is set and neither `XDG_CACHE_HOME` nor `HOME` names one.
    pub fn directory(&self) -> Option<std::path::PathBuf> {
        if !self.enabled {
            return None;
        }
        if !self.dir.trim().is_empty() {
            return Some(self.dir.clone().into());
        }
        let env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(std::path::PathBuf::from);
        let root =
            env("XDG_CACHE_HOME").filter(|p| p.is_absolute()).or_else(|| env("HOME").map(|h| h.join(".cache")))?;
        Some(root.join("sim-engine").join("responses"))
    }
}

/// The resolved, validated configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// The sections as validated.
    pub raw: RawConfig,
    /// Embedding price, resolved to integers.
    pub embedding_price: Price,
    /// Chat price, resolved to integers.
    pub chat_price: Price,
    /// Chat price of a call through the Batch API (`[chat] mode = "batch"`).
    pub chat_batch_price: Price,
    /// What the embedding price is.
    pub embedding_price_label: PriceLabel,
    /// What the chat price is.
    pub chat_price_label: PriceLabel,
}

impl RawConfig {
    /// Parses TOML. `source_name` names the file in errors.
    pub fn from_toml(text: &str, source_name: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| Error::Parse { source_name: source_name.to_string(), source: Box::new(e) })
    }

    /// Validates and resolves. `source_name` names the file in errors.
    pub fn resolve(mut self, source_name: &str) -> Result<Config> {
        let e = &mut self.embedding;
        if e.provider == Provider::Minilm {
            let defaults = EmbeddingSection::default();
            // The provider decides the model and the dimension: the
            // defaults give way; anything else written is refused below.
            if e.model == defaults.model {
                e.model = MINILM_MODEL.into();
            }
            if e.dim == defaults.dim {
                e.dim = MINILM_DIM;
            }
        }
        if self.intent.ssr() && self.intent.anchor_sets.is_empty() {
            self.intent.anchor_sets = crate::intent::builtin_anchor_sets();
        }
        let checks = [
            Self::check_run,
            Self::check_embedding,
            Self::check_chat,
            Self::check_rules_and_prices,
            Self::check_intent,
            |c: &RawConfig| match c.panel.as_ref().and_then(panel::PanelSection::problem) {
                Some(cause) => Err(bad("panel", cause)),
                None => Ok(()),
            },
        ];
        if let Some((field, cause)) = checks.iter().find_map(|check| check(&self).err()) {
            return Err(Error::Config { source_name: source_name.to_string(), field: field.to_string(), cause });
        }
        let embedding = self.prices.row(&self.embedding.model, PricesSection::embedding_default);
        let chat = match (self.chat.provider, self.prices.models.get(&self.chat.model)) {
            (ChatProvider::Gguf, None) => prices::local_price(),
            _ => self.prices.row(&self.chat.model, PricesSection::chat_default),
        };
        Ok(Config {
            embedding_price: Price::from_usd_per_mtok(embedding.input_usd_per_mtok, 0.0),
            chat_price: chat.online(),
            chat_batch_price: chat.batch(),
            embedding_price_label: embedding.label,
            chat_price_label: chat.label,
            raw: self,
        })
    }

    /// `[run]` and `[retrieval]`.
    fn check_run(&self) -> std::result::Result<(), Bad> {
        if self.run.hours_per_tick == 0 {
            return Err(bad("run.hours_per_tick", "must be at least 1".into()));
        }
        if self.run.max_active_personas == 0 {
            return Err(bad("run.max_active_personas", "must be at least 1".into()));
        }
        let r = &self.retrieval;
        for (name, w) in [
            ("retrieval.recency_weight", r.recency_weight),
            ("retrieval.importance_weight", r.importance_weight),
            ("retrieval.relevance_weight", r.relevance_weight),
        ] {
            if !(w.is_finite() && w >= 0.0) {
                return Err(bad(name, format!("must be a finite number >= 0, got {w}")));
            }
        }
        if !(r.recency_decay_per_hour > 0.0 && r.recency_decay_per_hour <= 1.0) {
            return Err(bad(
                "retrieval.recency_decay_per_hour",
                format!("must be in (0, 1], got {}", r.recency_decay_per_hour),
            ));
        }
        Ok(())
    }

    /// `[embedding]` and its provider sections.
    fn check_embedding(&self) -> std::result::Result<(), Bad> {
        let e = &self.embedding;
        if !(8..=65_536).contains(&e.dim) {
            return Err(bad("embedding.dim", format!("must be between 8 and 65536, got {}", e.dim)));
        }
        if e.batch_size == 0 {
            return Err(bad("embedding.batch_size", "must be at least 1".into()));
        }
        if e.concurrency == 0 {
            return Err(bad("embedding.concurrency", "must be at least 1".into()));
        }
        if e.max_tokens_per_request == 0 {
            return Err(bad("embedding.max_tokens_per_request", "must be at least 1".into()));
        }
        if e.provider == Provider::Openai && e.http.base_url.trim().is_empty() {
            return Err(bad("embedding.http.base_url", "the openai provider needs a base URL".into()));
        }
        if e.provider == Provider::Minilm {
            if e.model != MINILM_MODEL {
                return Err(bad(
                    "embedding.model",
                    format!("the minilm provider runs {MINILM_MODEL}, not {:?}", e.model),
                ));
            }
            if e.dim != MINILM_DIM {
                return Err(bad(
                    "embedding.dim",
                    format!("{MINILM_MODEL} makes {MINILM_DIM}-dimensional vectors, not {}", e.dim),
                ));
            }
            if e.minilm.model_dir.trim().is_empty() {
                return Err(bad(
                    "embedding.minilm.model_dir",
                    "the minilm provider needs the model's directory; `bash scripts/fetch-minilm` fills models/all-MiniLM-L6-v2".into(),
                ));
            }
        }
        if e.backoff_base_ms > e.backoff_max_ms {
            return Err(bad("embedding.backoff_base_ms", "must not exceed embedding.backoff_max_ms".into()));
        }
        let m = &e.modelled;
        for (name, p) in [
            ("embedding.modelled.rate_limited", m.rate_limited),
            ("embedding.modelled.server_error", m.server_error),
            ("embedding.modelled.timeout", m.timeout),
            ("embedding.modelled.permanent", m.permanent),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return Err(bad(name, format!("must be a probability in [0, 1], got {p}")));
            }
        }
        if m.rate_limited + m.server_error + m.timeout + m.permanent > 1.0 {
            return Err(bad("embedding.modelled", "fault probabilities must sum to at most 1".into()));
        }
        if !(m.latency_ms.is_finite()
            && m.latency_ms >= 0.0
            && m.latency_per_token_us.is_finite()
            && m.latency_per_token_us >= 0.0)
        {
            return Err(bad("embedding.modelled.latency_ms", "latencies must be finite and non-negative".into()));
        }
        if m.concurrency == 0 {
            return Err(bad("embedding.modelled.concurrency", "must be at least 1".into()));
        }
        if e.model.trim().is_empty() {
            return Err(bad("embedding.model", "must not be empty".into()));
        }
        Ok(())
    }

    /// `[consolidation.rules]`, `[reflection]` and `[prices]`.
    fn check_rules_and_prices(&self) -> std::result::Result<(), Bad> {
        let c = &self.consolidation.rules;
        for (name, v) in [
            ("consolidation.rules.working_to_short", c.working_to_short),
            ("consolidation.rules.short_to_long", c.short_to_long),
            ("consolidation.rules.working_decay", c.working_decay),
            ("consolidation.rules.short_term_decay", c.short_term_decay),
            ("consolidation.rules.long_term_decay", c.long_term_decay),
            ("consolidation.rules.expire_below", c.expire_below),
            ("consolidation.rules.access_boost", c.access_boost),
            ("consolidation.rules.initial_energy", c.initial_energy),
            ("consolidation.rules.session_threshold", c.session_threshold),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(bad(name, format!("must be a finite number >= 0, got {v}")));
            }
        }
        if !(-1.0..=1.0).contains(&c.similarity_threshold) {
            return Err(bad(
                "consolidation.rules.similarity_threshold",
                format!("must be in [-1, 1], got {}", c.similarity_threshold),
            ));
        }
        if self.reflection.importance_threshold == 0 {
            return Err(bad("reflection.importance_threshold", "must be at least 1".into()));
        }
        let p = &self.prices;
        for (name, v) in [
            ("prices.embedding_usd_per_mtok", p.embedding_usd_per_mtok),
            ("prices.chat_input_usd_per_mtok", p.chat_input_usd_per_mtok),
            ("prices.chat_output_usd_per_mtok", p.chat_output_usd_per_mtok),
        ] {
            if !(v.is_finite() && (0.0..=1_000_000.0).contains(&v)) {
                return Err(bad(name, format!("must be between 0 and 1000000 USD, got {v}")));
            }
        }
        for (model, row) in &p.models {
            let optional = [row.cached_input_usd_per_mtok, row.batch_input_usd_per_mtok, row.batch_output_usd_per_mtok];
            for v in [row.input_usd_per_mtok, row.output_usd_per_mtok].into_iter().chain(optional.into_iter().flatten())
            {
                if !(v.is_finite() && (0.0..=1_000_000.0).contains(&v)) {
                    return Err(bad("prices.models", format!("{model:?}: must be between 0 and 1000000 USD, got {v}")));
                }
            }
            if let Some(d) = row.batch_discount.filter(|d| !(d.is_finite() && (0.0..=1.0).contains(d))) {
                return Err(bad("prices.models", format!("{model:?}: batch_discount must be in [0, 1], got {d}")));
            }
        }
        Ok(())
    }
}

impl RawConfig {
    /// `[intent]`, and `[answers]`' share.
    fn check_intent(&self) -> std::result::Result<(), Bad> {
        let m = self.answers.min_option_mass;
        if !(m.is_finite() && (0.0..=1.0).contains(&m)) {
            return Err(bad("answers.min_option_mass", format!("must be a share in [0, 1], got {m}")));
        }
        let i = &self.intent;
        if !(i.epsilon.is_finite() && (0.0..=1.0).contains(&i.epsilon)) {
            return Err(bad("intent.epsilon", format!("must be in [0, 1], got {}", i.epsilon)));
        }
        if !(i.temperature.is_finite() && (0.0..=100.0).contains(&i.temperature)) {
            return Err(bad("intent.temperature", format!("must be in [0, 100], got {}", i.temperature)));
        }
        if let Some(problem) = i.anchor_sets.iter().find_map(crate::intent::AnchorSet::problem) {
            return Err(bad("intent.anchor_sets", problem));
        }
        if i.ssr() && self.embedding.model() == EmbeddingModel::Disabled {
            return Err(bad(
                "intent.method",
                "SSR embeds reactions, but embedding.model = \"none\" turns embeddings off".into(),
            ));
        }
        Ok(())
    }
}

/// A refused setting: its dotted path and what is wrong with it.
type Bad = (&'static str, String);

/// The refusal of `field`.
fn bad(field: &'static str, cause: String) -> Bad {
    (field, cause)
}

impl Config {
    /// The embedded defaults, resolved.
    pub fn defaults() -> Config {
        RawConfig::default().resolve("<defaults>").expect("the defaults are valid; this is a bug")
    }

    /// Canonical TOML of the resolved sections (what a run records).
    pub fn to_toml(&self) -> String {
        toml::to_string(&self.raw).expect("a resolved config serialises; this is a bug")
    }

    /// Hash of the canonical form; identifies the configuration of a run.
    /// The model's directory stays out (the weights' SHA-256 names the
    /// model, wherever it lies), and so do `run.max_active_personas`,
    /// `[cache]` and the kernel levels of the GGUF and MiniLM models (every level gives the
    /// same bits).
    pub fn hash(&self) -> Digest {
        let mut raw = self.raw.clone();
        raw.embedding.minilm.model_dir.clear();
        raw.chat.gguf.model_file.clear();
        raw.chat.gguf.kernel = KernelLevel::Auto;
        raw.embedding.minilm.kernel = KernelLevel::Auto;
        raw.run.max_active_personas = DEFAULT_MAX_ACTIVE_PERSONAS;
        raw.cache = CacheSection::default();
        let text = toml::to_string(&raw).expect("a resolved config serialises; this is a bug");
        DigestWriter::new(CONFIG_HASH_DOMAIN).str(&text).finish()
    }

    /// The settings that decide content: the whole configuration with the
    /// operational settings (below) put back to their defaults. A new
    /// setting therefore counts as content unless it is added here on
    /// purpose. Operational: how embedding work is sent (batching, token
    /// caps, concurrency, rate limits, retries and backoff, the cache and
    /// its file), the modelled provider's latency and faults, the HTTP
    /// endpoint's address, key variable and timeouts (the model name and
    /// `send_dimensions`, which decide the vectors, stay), the MiniLM
    /// model's directory (its weights' SHA-256 stays) and kernel level, how chat requests
    /// are sent (concurrency, per-minute limits, transport retries and
    /// backoff, the endpoints and their timeouts, the modelled provider's
    /// latency and faults), the GGUF model's file (its SHA-256 stays), its
    /// prefix cache, worker count and kernel level, prices, the response
    /// cache (`[cache]`) and the panel's file name. They change costs, timing and request grouping, never
    /// what a persona sees or says.
    pub fn content(&self) -> RawConfig {
        let mut c = self.raw.clone();
        let (e, d) = (&mut c.embedding, EmbeddingSection::default());
        e.batch_size = d.batch_size;
        e.max_tokens_per_request = d.max_tokens_per_request;
        e.concurrency = d.concurrency;
        e.requests_per_minute = d.requests_per_minute;
        e.tokens_per_minute = d.tokens_per_minute;
        e.max_retries = d.max_retries;
        e.backoff_base_ms = d.backoff_base_ms;
        e.backoff_max_ms = d.backoff_max_ms;
        e.cache = d.cache;
        e.cache_file = d.cache_file;
        e.modelled = d.modelled;
        e.http = crate::embed::upstream::HttpSettings { send_dimensions: e.http.send_dimensions, ..d.http };
        e.minilm.model_dir.clear();
        e.minilm.kernel = KernelLevel::Auto;
        c.run.max_active_personas = DEFAULT_MAX_ACTIVE_PERSONAS;
        let chat = ChatSection::default();
        c.chat.concurrency = chat.concurrency;
        c.chat.requests_per_minute = chat.requests_per_minute;
        c.chat.tokens_per_minute = chat.tokens_per_minute;
        c.chat.max_retries = chat.max_retries;
        c.chat.backoff_base_ms = chat.backoff_base_ms;
        c.chat.backoff_max_ms = chat.backoff_max_ms;
        c.chat.http = chat.http;
        c.chat.modelled = chat.modelled;
        c.chat.mode = chat.mode;
        c.chat.batch = chat.batch;
        c.chat.gguf.model_file.clear();
        c.chat.gguf.prefix_cache_mib = chat.gguf.prefix_cache_mib;
        c.chat.gguf.batch = chat.gguf.batch;
        // The canonical form as it was before `batch` replaced `workers`
        // (`workers = 1` wherever the section is written), so that digests
        // recorded before still verify.
        c.chat.gguf.workers = None;
        if !c.chat.gguf.is_unset() {
            c.chat.gguf.workers = Some(1);
        }
        c.chat.gguf.kernel = chat.gguf.kernel;
        c.prices = PricesSection::default();
        c.cache = CacheSection::default();
        // Where the panel was read from is not what it holds.
        if let Some(panel) = &mut c.panel {
            panel.source.clear();
        }
        c
    }

    /// Hash of [`Config::content`]: what `digest` starts from, so that
    /// batching, caching, limits and prices never move it.
    pub fn content_hash(&self) -> Digest {
        let text = serde_json::to_string(&self.content()).expect("config values serialise; this is a bug");
        DigestWriter::new("config content v2").str(&text).finish()
    }
}

/// The domain of [`Config::hash`]. Its version moves whenever the digest
/// encoding moves, so that a trace recorded before gets the "recorded by an
/// older engine" error rather than a bare digest mismatch.
pub const CONFIG_HASH_DOMAIN: &str = "config v2";

#[cfg(test)]
mod tests;
