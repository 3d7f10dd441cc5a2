//! Before a live run: its estimate printed, and the user's go-ahead above
//! a threshold. The connection check, the pilot and the estimate are the
//! library's ([`runs::preflight`]).

use engine::config::{ChatProvider, Config};
pub use runs::preflight::Estimate;
use std::io::{BufRead, IsTerminal, Write};

/// Prints the estimate of a run on a live or local model (its range and
/// assumptions) and, for a billed one, asks for a go-ahead when the range's
/// high end is above `confirm_above_usd`: on a terminal by a question, when
/// piped by `--yes`. A scripted model costs nothing to ask about, and
/// `estimate` (which checks the connection and runs the pilot) is not
/// called for it.
pub fn confirm(
    cfg: &Config,
    estimate: &dyn Fn() -> runs::Result<Estimate>,
    confirm_above_usd: f64,
    yes: bool,
) -> runs::Result<()> {
    if cfg.raw.chat.provider == ChatProvider::Scripted {
        return Ok(());
    }
    let e = estimate()?;
    let batch = match cfg.raw.chat.mode {
        engine::config::ChatMode::Online => String::new(),
        engine::config::ChatMode::Batch => {
            "; at the batch price, each round of a tick waiting for its batch, up to the completion window".into()
        }
    };
    eprintln!("estimate ({} chat price{batch}): {}", cfg.chat_price_label.as_str(), e.line(&cfg.raw.chat.model));
    for a in &e.assumptions {
        eprintln!("  assumes {a}");
    }
    // A local model is not billed: its estimate is in tokens.
    if cfg.raw.chat.provider != ChatProvider::Openai || e.high_usd <= confirm_above_usd || yes {
        return Ok(());
    }
    let refused = |why: String| runs::Error::NotConfirmed(why);
    // What was bought for the estimate is said, since a refusal keeps it.
    let paid = match &e.pilot {
        Some(p) => format!(
            " (the pilot's {} calls, ${:.4}, were billed{})",
            p.calls,
            p.spend.nano_usd as f64 / engine::cost::NANO_PER_USD as f64,
            if providers::cache_directory(cfg).is_some() {
                "; the response cache keeps their answers for the next try"
            } else {
                ""
            }
        ),
        None => String::new(),
    };
    if !std::io::stdin().is_terminal() {
        return Err(refused(format!(
            "the estimate's high end ${:.2} is above --confirm-above-usd {confirm_above_usd:.2}: pass --yes to run it{paid}",
            e.high_usd
        )));
    }
    eprint!("Proceed? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer).map_err(|e| refused(format!("cannot read the answer: {e}")))?;
    if !matches!(answer.trim(), "y" | "Y" | "yes") {
        return Err(refused(format!("not confirmed; nothing was run{paid}")));
    }
    Ok(())
}
