//! How a caller watches an operation: where it reports ([`Watch`]), what
//! stops a run at a tick boundary ([`Interrupt`]), and who confirms a live
//! run ([`Confirm`]).

use crate::error::{Error, Result};
use crate::preflight::Estimate;
use actors::progress::Progress;
use engine::config::{ChatProvider, Config};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// What stops a run at its next tick boundary, keeping it resumable.
#[derive(Debug, Clone, Default)]
pub enum Interrupt {
    /// Nothing: the run goes to its end.
    #[default]
    Never,
    /// The caller's flag: set it and the run stops after the tick in
    /// progress (a binding polling for its own signals sets it).
    Flag(Arc<AtomicBool>),
    /// Ctrl-C (SIGINT) for this process: the first stops the run after the
    /// tick in progress; a second at once exits with status 130. Either way
    /// the committed ticks are kept.
    CtrlC,
}

impl Interrupt {
    /// The flag the run polls, registering the Ctrl-C handler on `runtime`
    /// before it returns, so that no Ctrl-C after it is missed. `dir` is
    /// named in the message of a second Ctrl-C.
    pub(crate) fn install(&self, runtime: &tokio::runtime::Runtime, dir: &Path) -> Result<Option<Arc<AtomicBool>>> {
        match self {
            Interrupt::Never => Ok(None),
            Interrupt::Flag(f) => Ok(Some(f.clone())),
            Interrupt::CtrlC => ctrl_c(runtime, dir).map(Some),
        }
    }
}

fn ctrl_c(runtime: &tokio::runtime::Runtime, dir: &Path) -> Result<Arc<AtomicBool>> {
    use tokio::signal::unix::{signal, SignalKind};
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    let dir = dir.display().to_string();
    let mut interrupts = {
        let _context = runtime.enter();
        signal(SignalKind::interrupt()).map_err(Error::io("cannot watch for Ctrl-C"))?
    };
    runtime.spawn(async move {
        if interrupts.recv().await.is_some() {
            set.store(true, std::sync::atomic::Ordering::Relaxed);
            eprintln!("\ninterrupted: stopping after this tick (Ctrl-C again stops at once; the run stays resumable)");
            if interrupts.recv().await.is_some() {
                eprintln!("stopped at once; resume with `sim-cli run --resume {dir}`");
                std::process::exit(130);
            }
        }
    });
    Ok(flag)
}

/// The go-ahead for a run: given its configuration and its estimate
/// (made only when called: for a live model, the connection check and a
/// billed pilot of the first jobs, which the run then reuses), an error
/// stops it with nothing written.
pub type Confirm<'a> = dyn Fn(&Config, &dyn Fn() -> Result<Estimate>) -> Result<()> + 'a;

/// Where a run reports and how it is stopped.
pub struct Watch<'a> {
    /// Tokio worker threads (default one per core); results do not depend on it.
    pub threads: Option<u32>,
    /// Progress and notes.
    pub progress: Arc<dyn Progress>,
    /// What stops the run at a tick boundary.
    pub interrupt: Interrupt,
    /// Asked before a live run is started, with its estimate (made only
    /// when called); an error stops it with nothing written.
    pub confirm: &'a Confirm<'a>,
}

impl Watch<'_> {
    /// Silent, never interrupted, live runs refused unconfirmed.
    pub fn quiet() -> Watch<'static> {
        Watch {
            threads: None,
            progress: Arc::new(actors::progress::Silent),
            interrupt: Interrupt::Never,
            confirm: &|cfg, _| {
                if cfg.raw.chat.provider == ChatProvider::Openai {
                    return Err(Error::NotConfirmed("a live run needs a confirmation; nothing was run".into()));
                }
                Ok(())
            },
        }
    }
}
