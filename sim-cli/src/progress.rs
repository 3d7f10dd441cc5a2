//! Progress on a terminal, through indicatif: bars on stderr, drawn only
//! when stderr is a terminal and hidden when it is piped, so scripts that
//! read stdout (or stderr) see no control characters.

use actors::progress::Progress;
use engine::chat::ChatPort;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Set by `--quiet`: no bar is drawn, terminal or not.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Turns every bar off (`--quiet`).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether bars are drawn: stderr is a terminal and `--quiet` was not given.
fn drawn() -> bool {
    !QUIET.load(Ordering::Relaxed) && std::io::stderr().is_terminal()
}

/// A bar of `total` steps labelled `prefix`, or a hidden one when stderr is
/// not a terminal or `--quiet` was given.
pub fn bar(total: u64, prefix: &str) -> ProgressBar {
    if !drawn() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total).with_prefix(prefix.to_string());
    bar.set_style(style());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

fn style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:>12} {msg:<20} [{bar:30}] {pos}/{len} {elapsed} (eta {eta})")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

/// A run's progress: `tick 2/3 chat [=====>    ] 512/1000`, and with a
/// live chat transport `chat: 12 in flight, 3 retries, $0.0123`.
pub struct TerminalProgress {
    ticks: u32,
    bar: ProgressBar,
    chat: OnceLock<Arc<dyn ChatPort>>,
    /// The stage shown, for the refresher.
    stage: Arc<std::sync::Mutex<String>>,
}

impl TerminalProgress {
    /// A reporter of a run of `ticks` ticks (0: not known) when stderr is a
    /// terminal; `None` when piped or quiet.
    pub fn new(ticks: u32) -> Option<Self> {
        drawn().then(|| TerminalProgress {
            ticks,
            bar: bar(0, "setup"),
            chat: OnceLock::new(),
            stage: Arc::new(std::sync::Mutex::new(String::new())),
        })
    }

    /// Clears the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Progress for TerminalProgress {
    /// Shows `chat`'s requests in flight, retries and spend so far with the
    /// stages.
    fn watch_chat(&self, chat: Arc<dyn ChatPort>) {
        let _ = self.chat.set(Arc::clone(&chat));
        // The transport changes between stage updates (a batch runs for
        // hours): its line is refreshed twice a second until the bar ends.
        let (bar, stage) = (self.bar.clone(), Arc::clone(&self.stage));
        std::thread::spawn(move || {
            while !bar.is_finished() {
                std::thread::sleep(Duration::from_millis(500));
                if let Some(a) = chat.activity() {
                    let stage = stage.lock().map(|s| s.clone()).unwrap_or_default();
                    bar.set_message(message(&stage, &a));
                }
            }
        });
    }

    /// Printed above the bar, which is drawn again below it.
    fn note(&self, text: &str) {
        self.bar.suspend(|| eprintln!("{text}"));
    }

    fn stage(&self, tick: u32, stage: &str, done: u64, total: u64) {
        let head = match (tick, self.ticks) {
            (0, _) => "setup".to_string(),
            (_, 0) => format!("tick {tick}"),
            (_, n) => format!("tick {tick}/{n}"),
        };
        self.bar.set_prefix(head);
        if let Ok(mut s) = self.stage.lock() {
            *s = stage.to_string();
        }
        match self.chat.get().and_then(|c| c.activity()) {
            Some(a) => self.bar.set_message(message(stage, &a)),
            None => self.bar.set_message(stage.to_string()),
        }
        self.bar.set_length(total);
        self.bar.set_position(done);
    }
}

/// `chat: 12 in flight, 3 retries, $0.0123`, or with batches under way
/// `chat: 2 batches, 120 of 400 lines done, $0.0123`.
fn message(stage: &str, a: &engine::chat::ChatActivity) -> String {
    let usd = a.billed_nano_usd as f64 / engine::cost::NANO_PER_USD as f64;
    match a.batches_waiting {
        0 => format!("{stage}: {} in flight, {} retries, ${usd:.4}", a.in_flight, a.retries),
        n => format!(
            "{stage}: {n} batch{} under way, {} of {} lines done, ${usd:.4}",
            if n == 1 { "" } else { "es" },
            a.batch_lines.1,
            a.batch_lines.0
        ),
    }
}
