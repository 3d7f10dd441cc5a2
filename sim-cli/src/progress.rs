//! Progress on a terminal: one line on stderr, rewritten in place, shown
//! only when stderr is a terminal.

use actors::progress::Progress;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Prints `[tick 2/3] chat 512/1000` on stderr, at most ten times a second.
pub struct TerminalProgress {
    ticks: u32,
    last: Mutex<Option<(Instant, String)>>,
}

impl TerminalProgress {
    /// A reporter when stderr is a terminal; `None` when piped.
    pub fn new(ticks: u32) -> Option<Self> {
        std::io::stderr().is_terminal().then(|| TerminalProgress { ticks, last: Mutex::new(None) })
    }

    /// Clears the progress line.
    pub fn finish(&self) {
        eprint!("\r\x1b[2K");
    }
}

impl Progress for TerminalProgress {
    fn stage(&self, tick: u32, stage: &str, done: u64, total: u64) {
        let Ok(mut last) = self.last.lock() else { return };
        let stage_changed = last.as_ref().is_none_or(|(_, s)| s != stage);
        if !stage_changed && last.as_ref().is_some_and(|(t, _)| t.elapsed() < Duration::from_millis(100)) {
            return;
        }
        *last = Some((Instant::now(), stage.to_string()));
        let head = if tick == 0 { "[setup]".to_string() } else { format!("[tick {tick}/{}]", self.ticks) };
        let count = if total > 0 { format!(" {done}/{total}") } else { String::new() };
        eprint!("\r\x1b[2K{head} {stage}{count}");
        let _ = std::io::stderr().flush();
    }
}
