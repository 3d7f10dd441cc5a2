//! `[chat] mode` and `[chat.batch]`: live chat through a provider's Batch
//! API (OpenAI's `/v1/batches`, and servers that speak it) at its batch
//! price, one batch per round of a tick.

use serde::{Deserialize, Serialize};

/// How live chat requests are sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatMode {
    /// One `/chat/completions` call per request, answered at once.
    #[default]
    Online,
    /// The requests of each round of a tick (the reactions, then the probes
    /// and reflections that follow them, then guardrail retries) go as one
    /// batch: a JSONL file uploaded to `/files` and submitted to
    /// `/batches`, polled until it ends, billed at the batch price.
    Batch,
}

impl ChatMode {
    /// True for the default, [`ChatMode::Online`].
    pub fn is_online(&self) -> bool {
        *self == ChatMode::Online
    }
}

/// The Batch API's limits on one input file.
pub const MAX_BATCH_LINES: usize = 50_000;
/// 200 MB.
pub const MAX_BATCH_BYTES: u64 = 200_000_000;

/// `[chat.batch]`: how batches are submitted and polled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BatchSettings {
    /// Milliseconds before the first poll of a submitted batch. Default
    /// 1000.
    pub poll_first_ms: u64,
    /// The wait between polls doubles up to this many milliseconds.
    /// Default 60000.
    pub poll_max_ms: u64,
    /// The completion window asked for. Default `24h` (OpenAI's only one).
    pub completion_window: String,
    /// A round of guardrail retries alone, of at most this many requests,
    /// is sent online (at the online price) rather than waiting for another
    /// batch. Default 16; 0 sends every round as a batch.
    pub direct_retries_at_most: usize,
    /// Lines per input file; a larger round is split. Default and most
    /// 50,000.
    pub max_lines: usize,
    /// Bytes per input file. Default and most 200,000,000.
    pub max_bytes: u64,
}

impl Default for BatchSettings {
    fn default() -> Self {
        BatchSettings {
            poll_first_ms: 1_000,
            poll_max_ms: 60_000,
            completion_window: "24h".into(),
            direct_retries_at_most: 16,
            max_lines: MAX_BATCH_LINES,
            max_bytes: MAX_BATCH_BYTES,
        }
    }
}

impl BatchSettings {
    /// True when every setting is its default (the section is then left out
    /// of the written config).
    pub fn is_default(&self) -> bool {
        *self == BatchSettings::default()
    }

    /// Why these settings cannot be used, naming the field.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        if self.poll_first_ms == 0 || self.poll_first_ms > self.poll_max_ms {
            return Some(("chat.batch.poll_first_ms", "must be at least 1 and at most poll_max_ms".into()));
        }
        if !(1..=MAX_BATCH_LINES).contains(&self.max_lines) {
            return Some(("chat.batch.max_lines", format!("must be from 1 to {MAX_BATCH_LINES} (the API's limit)")));
        }
        if !(1..=MAX_BATCH_BYTES).contains(&self.max_bytes) {
            return Some(("chat.batch.max_bytes", format!("must be from 1 to {MAX_BATCH_BYTES} (the API's limit)")));
        }
        if self.completion_window.trim().is_empty() {
            return Some(("chat.batch.completion_window", "must not be empty (OpenAI takes \"24h\")".into()));
        }
        None
    }
}
