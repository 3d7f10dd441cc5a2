//! Simulated time. State never sees the wall clock; a tick maps to a fixed
//! number of simulated seconds.

use serde::{Deserialize, Serialize};

/// A point in simulated time, in whole seconds since the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct SimTime(pub u64);

impl SimTime {
    /// Hours elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn hours_since(self, earlier: SimTime) -> f64 {
        self.0.saturating_sub(earlier.0) as f64 / 3600.0
    }
}

/// Maps ticks to simulated time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Clock {
    /// Simulated seconds per tick.
    pub seconds_per_tick: u64,
}

impl Clock {
    /// A clock whose ticks are `hours` long.
    pub fn with_hours_per_tick(hours: u32) -> Self {
        Clock { seconds_per_tick: u64::from(hours) * 3600 }
    }

    /// The simulated time at which `tick` (1-based) happens. Tick 1 starts at
    /// one tick past zero, so that memories of tick 1 already have an age at
    /// tick 2.
    pub fn at(&self, tick: u32) -> SimTime {
        SimTime(u64::from(tick) * self.seconds_per_tick)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_map_to_hours() {
        let c = Clock::with_hours_per_tick(24);
        assert!((c.at(2).hours_since(c.at(1)) - 24.0).abs() < 1e-12);
        assert!(c.at(1).hours_since(c.at(2)).abs() < 1e-12);
    }
}
