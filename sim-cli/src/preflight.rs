//! Before a live run: the user's go-ahead above a threshold. The estimate
//! and the connection check are the library's ([`runs::preflight`]).

use anyhow::{bail, Context, Result};
use engine::config::{ChatProvider, Config};
pub use runs::preflight::Estimate;
use std::io::{BufRead, IsTerminal, Write};

/// Prints the estimate of a live run and asks for a go-ahead above
/// `confirm_above_usd`: on a terminal by a question, when piped by `--yes`.
/// Other runs cost nothing to ask about, and `estimate` (which draws the
/// whole panel) is not called for them.
pub fn confirm(cfg: &Config, estimate: impl FnOnce() -> Estimate, confirm_above_usd: f64, yes: bool) -> Result<()> {
    if cfg.raw.chat.provider != ChatProvider::Openai {
        return Ok(());
    }
    let e = estimate();
    let batch = match cfg.raw.chat.mode {
        engine::config::ChatMode::Online => "",
        engine::config::ChatMode::Batch => {
            " (batch price); each round of a tick waits for its batch, up to the completion window"
        }
    };
    eprintln!(
        "live run: at least {} chat calls to {}, about ${:.4} at its {} chat price{batch}",
        e.calls,
        cfg.raw.chat.model,
        e.usd,
        cfg.chat_price_label.as_str()
    );
    if e.usd <= confirm_above_usd || yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        bail!(
            "the estimated cost ${:.2} is above --confirm-above-usd {confirm_above_usd:.2}: pass --yes to run it",
            e.usd
        );
    }
    eprint!("Proceed? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).context("cannot read the answer")?;
    if !matches!(answer.trim(), "y" | "Y" | "yes") {
        bail!("not confirmed; nothing was run");
    }
    Ok(())
}
