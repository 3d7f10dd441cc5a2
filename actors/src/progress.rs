//! Live progress reporting from inside a run.

/// Receives progress from the coordinator. Implementations must be cheap:
/// they are called from the tick loop.
pub trait Progress: Send + Sync {
    /// `stage` of `tick` has processed `done` of `total` items.
    fn stage(&self, tick: u32, stage: &str, done: u64, total: u64);

    /// The run's chat port, given once before the first tick, for reporters
    /// that show its transport's activity (requests in flight, retries,
    /// spend). Ignored by default.
    fn watch_chat(&self, _chat: std::sync::Arc<dyn engine::chat::ChatPort>) {}

    /// A line for the person running it (a warning, what was resumed or
    /// cleared). On stderr by default, whether or not progress is shown.
    fn note(&self, text: &str) {
        eprintln!("{text}");
    }
}

/// Discards progress.
pub struct Silent;

impl Progress for Silent {
    fn stage(&self, _tick: u32, _stage: &str, _done: u64, _total: u64) {}
}
