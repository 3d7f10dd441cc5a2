//! Live progress reporting from inside a run.

/// Receives progress from the coordinator. Implementations must be cheap:
/// they are called from the tick loop.
pub trait Progress: Send + Sync {
    /// `stage` of `tick` has processed `done` of `total` items.
    fn stage(&self, tick: u32, stage: &str, done: u64, total: u64);
}

/// Discards progress.
pub struct Silent;

impl Progress for Silent {
    fn stage(&self, _tick: u32, _stage: &str, _done: u64, _total: u64) {}
}
