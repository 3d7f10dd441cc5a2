//! `[prices]`: a default row and rows per model, each with its label.

use super::MINILM_MODEL;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What a price is: a nominal hosted price shown for scale, a price the
/// user configured, or the price of a model run locally (zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PriceLabel {
    /// A default hosted-provider price: what a run would have cost there.
    #[default]
    Nominal,
    /// Set in the config.
    Configured,
    /// The model runs on this machine; nothing is billed.
    Local,
}

impl PriceLabel {
    /// Its name, as configs and summaries spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            PriceLabel::Nominal => "nominal",
            PriceLabel::Configured => "configured",
            PriceLabel::Local => "local",
        }
    }
}

/// One model's row of the price table.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// USD per million input tokens.
    pub input_usd_per_mtok: f64,
    /// USD per million output tokens (chat models). Default 0.
    #[serde(default)]
    pub output_usd_per_mtok: f64,
    /// What the price is. Default `configured`.
    #[serde(default = "configured")]
    pub label: PriceLabel,
    /// USD per million input tokens the provider served from its prompt
    /// cache (chat models that report `cached_tokens`). Default: the input
    /// price, so that a cache hit is billed in full until a price is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_usd_per_mtok: Option<f64>,
    /// The share of each price a Batch API call is billed
    /// (`[chat] mode = "batch"`). Default 0.5, OpenAI's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_discount: Option<f64>,
    /// USD per million input tokens of a batch call; default: the input
    /// price times `batch_discount`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_input_usd_per_mtok: Option<f64>,
    /// USD per million output tokens of a batch call; default: the output
    /// price times `batch_discount`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_output_usd_per_mtok: Option<f64>,
}

/// OpenAI's Batch API price: half the online one.
pub const DEFAULT_BATCH_DISCOUNT: f64 = 0.5;

impl ModelPrice {
    /// The price of one online call.
    pub fn online(&self) -> crate::cost::Price {
        crate::cost::Price::from_usd_per_mtok(self.input_usd_per_mtok, self.output_usd_per_mtok)
            .with_cached_usd_per_mtok(self.cached_input_usd_per_mtok.unwrap_or(self.input_usd_per_mtok))
    }

    /// The price of one call through the Batch API: the explicit batch
    /// prices, else the online ones times the discount. Cached input costs
    /// its online price times the discount, or the batch input price when
    /// the row sets no cached price (never more than fresh input).
    pub fn batch(&self) -> crate::cost::Price {
        let d = self.batch_discount.unwrap_or(DEFAULT_BATCH_DISCOUNT);
        let input = self.batch_input_usd_per_mtok.unwrap_or(self.input_usd_per_mtok * d);
        let output = self.batch_output_usd_per_mtok.unwrap_or(self.output_usd_per_mtok * d);
        let cached = self.cached_input_usd_per_mtok.map_or(input, |c| (c * d).min(input));
        crate::cost::Price::from_usd_per_mtok(input, output).with_cached_usd_per_mtok(cached)
    }
}

fn configured() -> PriceLabel {
    PriceLabel::Configured
}

/// Rows every price table has unless a config overrides them: local models
/// cost nothing.
pub fn builtin_model_prices() -> BTreeMap<String, ModelPrice> {
    BTreeMap::from([(MINILM_MODEL.to_string(), local_price())])
}

/// The price of a model run on this machine: 0 USD, labelled `local`
/// (MiniLM, and any chat model of the `gguf` provider without a row of
/// its own).
pub fn local_price() -> ModelPrice {
    ModelPrice {
        input_usd_per_mtok: 0.0,
        output_usd_per_mtok: 0.0,
        label: PriceLabel::Local,
        cached_input_usd_per_mtok: None,
        batch_discount: None,
        batch_input_usd_per_mtok: None,
        batch_output_usd_per_mtok: None,
    }
}

/// The price table: a default row (the top-level keys) and rows per model
/// name (`[prices.models."NAME"]`). The default row holds nominal
/// hosted-provider prices: the embedded models cost nothing, but every run
/// shows what it would have cost and exercises the cost accounting. A model
/// with its own row (built in: all-MiniLM-L6-v2 at 0, `local`) is billed
/// by it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PricesSection {
    /// Shown next to every cost figure.
    pub label: String,
    /// USD per million embedding input tokens. Default 0.02.
    pub embedding_usd_per_mtok: f64,
    /// USD per million chat prompt tokens. Default 0.15.
    pub chat_input_usd_per_mtok: f64,
    /// USD per million chat completion tokens. Default 0.60.
    pub chat_output_usd_per_mtok: f64,
    /// Rows per model name; they win over the default row and the built-in
    /// rows.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, ModelPrice>,
}

impl Default for PricesSection {
    fn default() -> Self {
        PricesSection {
            label: "simulated nominal prices (no provider was billed)".into(),
            embedding_usd_per_mtok: 0.02,
            chat_input_usd_per_mtok: 0.15,
            chat_output_usd_per_mtok: 0.60,
            models: BTreeMap::new(),
        }
    }
}

impl PricesSection {
    /// The row that bills `model`: its own row, else a built-in one, else
    /// the default row (`default_row` picks the embedding or the chat
    /// prices from it), labelled nominal while it holds the defaults.
    pub fn row(&self, model: &str, default_row: fn(&PricesSection) -> (f64, f64)) -> ModelPrice {
        if let Some(p) = self.models.get(model).or(builtin_model_prices().get(model)) {
            return *p;
        }
        let (input, output) = default_row(self);
        let nominal = default_row(&PricesSection::default()) == (input, output);
        let label = if nominal { PriceLabel::Nominal } else { PriceLabel::Configured };
        ModelPrice {
            input_usd_per_mtok: input,
            output_usd_per_mtok: output,
            label,
            cached_input_usd_per_mtok: None,
            batch_discount: None,
            batch_input_usd_per_mtok: None,
            batch_output_usd_per_mtok: None,
        }
    }

    /// The embedding prices of the default row.
    pub fn embedding_default(&self) -> (f64, f64) {
        (self.embedding_usd_per_mtok, 0.0)
    }

    /// The chat model's price of cached input, as summaries and reports
    /// state it: its own row's, or the input price when none is set.
    pub fn cached_input_description(&self, model: &str) -> String {
        let row = self.row(model, PricesSection::chat_default);
        match row.cached_input_usd_per_mtok {
            Some(usd) => format!("{usd} USD per million cached input tokens"),
            None => "the input price (no cached_input_usd_per_mtok is set for this model)".into(),
        }
    }

    /// The chat prices of the default row.
    pub fn chat_default(&self) -> (f64, f64) {
        (self.chat_input_usd_per_mtok, self.chat_output_usd_per_mtok)
    }
}
