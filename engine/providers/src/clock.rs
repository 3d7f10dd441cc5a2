//! Time for the adapters, through a trait: the inference client's rate
//! limiter and backoff, and the modelled provider's latency, ask a
//! [`Sleeper`] for the time and for waits. [`TokioSleeper`] is the real
//! one; [`SimulatedSleeper`] advances a virtual clock instead of waiting,
//! so tests run rate limits and backoff in no wall time and can read how
//! long they waited.

use engine::BoxFuture;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;

/// A clock that can wait.
pub trait Sleeper: Send + Sync {
    /// Time since an arbitrary fixed start, monotonic.
    fn now(&self) -> Duration;
    /// Waits `d`.
    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()>;
}

/// Tokio's clock: real time inside a runtime.
#[derive(Debug, Clone, Copy)]
pub struct TokioSleeper {
    start: tokio::time::Instant,
}

impl TokioSleeper {
    /// A clock whose zero is now. Needs no runtime to build; waiting
    /// needs a tokio runtime with the time driver.
    pub fn new() -> Self {
        TokioSleeper { start: tokio::time::Instant::now() }
    }
}

impl Default for TokioSleeper {
    fn default() -> Self {
        TokioSleeper::new()
    }
}

impl Sleeper for TokioSleeper {
    fn now(&self) -> Duration {
        tokio::time::Instant::now().duration_since(self.start)
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// A virtual clock: `sleep` moves it forward at once and returns. Waits of
/// concurrent tasks add up, as if they ran one after another; tests use it
/// to count waiting, not to model overlap.
#[derive(Debug, Clone, Default)]
pub struct SimulatedSleeper {
    now: Arc<Mutex<Duration>>,
    waits: Arc<Mutex<Vec<Duration>>>,
}

impl SimulatedSleeper {
    /// A clock at zero.
    pub fn new() -> Self {
        SimulatedSleeper::default()
    }

    /// Every wait asked for, in order.
    pub fn waits(&self) -> Vec<Duration> {
        self.waits.lock().clone()
    }
}

impl Sleeper for SimulatedSleeper {
    fn now(&self) -> Duration {
        *self.now.lock()
    }

    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()> {
        *self.now.lock() += d;
        self.waits.lock().push(d);
        Box::pin(std::future::ready(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simulated_clock_moves_only_when_asked_to_wait() {
        let s = SimulatedSleeper::new();
        assert_eq!(s.now(), Duration::ZERO);
        engine::testing::block_on_ready(s.sleep(Duration::from_millis(250)));
        engine::testing::block_on_ready(s.sleep(Duration::from_millis(50)));
        assert_eq!(s.now(), Duration::from_millis(300));
        assert_eq!(s.waits(), vec![Duration::from_millis(250), Duration::from_millis(50)]);
    }
}
