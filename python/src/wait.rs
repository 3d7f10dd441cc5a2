//! Running an operation with the GIL released, on a thread of its own,
//! while the calling thread keeps Python responsive.

use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

/// How often the calling thread takes the GIL back to check for signals
/// and show progress: often enough that Ctrl-C feels immediate, rarely
/// enough to cost nothing beside a tick.
const POLL: Duration = Duration::from_millis(50);

/// The newest progress event, kept until the calling thread reads it.
/// Written by the engine's threads, read only by the calling thread: no
/// engine thread ever touches Python.
/// The engine's notes (what was resumed, a warning) wait here too, and are
/// written to Python's `sys.stderr`, which a notebook shows.
#[derive(Default)]
pub struct Latest {
    event: parking_lot::Mutex<Option<(u32, String, u64, u64)>>,
    notes: parking_lot::Mutex<Vec<String>>,
}

impl actors::progress::Progress for Latest {
    fn stage(&self, tick: u32, stage: &str, done: u64, total: u64) {
        *self.event.lock() = Some((tick, stage.to_string(), done, total));
    }

    fn note(&self, text: &str) {
        self.notes.lock().push(text.to_string());
    }
}

impl Latest {
    /// Hands what waits to Python: the notes to `sys.stderr`, the newest
    /// event to `progress`.
    fn deliver(&self, py: Python<'_>, progress: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let notes = std::mem::take(&mut *self.notes.lock());
        if !notes.is_empty() {
            let stderr = py.import("sys")?.getattr("stderr")?;
            for note in notes {
                stderr.call_method1("write", (format!("{note}\n"),))?;
            }
        }
        // Taken first, so that the engine's threads never wait on the lock
        // while Python runs the callback.
        let event = self.event.lock().take();
        if let (Some(callback), Some((tick, stage, done, total))) = (progress, event) {
            callback.call1((tick, stage, done, total))?;
        }
        Ok(())
    }
}

/// What [`drive`] did with a Ctrl-C.
pub struct Outcome<T> {
    /// The operation's result.
    pub result: T,
    /// Whether a signal handler raised (Ctrl-C) while it ran: the
    /// interrupt flag was set and the operation stopped at its next tick
    /// boundary.
    pub interrupted: Option<PyErr>,
}

/// Runs `work` on a new thread and waits for it with the GIL released,
/// taking the GIL back every [`POLL`] to run Python's signal handlers and
/// pass the newest progress event to `progress`. A signal handler's
/// exception (Ctrl-C's `KeyboardInterrupt`) sets `interrupt`, and the
/// wait goes on until the work stops at its next tick boundary; a second
/// one returns it at once, leaving the work's thread to finish alone.
pub fn drive<T: Send + 'static>(
    py: Python<'_>,
    latest: &Latest,
    progress: Option<&Bound<'_, PyAny>>,
    interrupt: &Arc<AtomicBool>,
    work: impl FnOnce() -> T + Send + 'static,
) -> PyResult<Outcome<T>> {
    let (tx, rx) = mpsc::channel();
    // Waited on with the GIL released, from whichever thread holds it.
    let rx = parking_lot::Mutex::new(rx);
    let worker = std::thread::Builder::new()
        .name("simengine".into())
        .spawn(move || {
            // A panic is caught here and reported as an error, never
            // unwound into Python.
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
            let _ = tx.send(result);
        })
        .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(format!("cannot start the engine's thread: {e}")))?;
    let mut interrupted: Option<PyErr> = None;
    let mut failed = None;
    let result = loop {
        match py.detach(|| rx.lock().recv_timeout(POLL)) {
            Ok(result) => break result,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                break Err(Box::new("the engine's thread ended without a result") as Box<dyn std::any::Any + Send>)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        // A Ctrl-C raised in a signal handler, or inside the progress
        // callback (a KeyboardInterrupt), sets the interrupt flag: a run
        // stops at its next tick boundary. A second one stops the wait at
        // once; the engine's thread is left to finish on its own (what a
        // run committed is kept, and it resumes).
        let signal = py.check_signals().err();
        let delivered = if failed.is_none() { latest.deliver(py, progress).err() } else { None };
        let (signal, delivered) = match delivered {
            Some(e) if e.is_instance_of::<pyo3::exceptions::PyKeyboardInterrupt>(py) => (signal.or(Some(e)), None),
            other => (signal, other),
        };
        if let Some(e) = signal {
            interrupt.store(true, Ordering::Relaxed);
            if interrupted.is_some() {
                return Err(e);
            }
            interrupted = Some(e);
        }
        if let Some(e) = delivered {
            // The caller's progress callback raised: the run stops at its
            // next tick boundary, and the callback's exception is raised
            // once it has.
            interrupt.store(true, Ordering::Relaxed);
            failed = Some(e);
        }
    };
    let _ = worker.join();
    // The last event too, so that a run shorter than one poll is seen.
    if failed.is_none() {
        latest.deliver(py, progress)?;
    }
    if let Some(e) = failed {
        return Err(e);
    }
    match result {
        Ok(result) => Ok(Outcome { result, interrupted }),
        Err(panic) => Err(panicked(py, &*panic)),
    }
}

/// A panic of the engine's as `simengine.SimEngineError`.
fn panicked(py: Python<'_>, panic: &(dyn std::any::Any + Send)) -> PyErr {
    let what = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into());
    crate::errors::internal(py, &format!("the engine failed (this is a bug): {what}"))
}

/// `work` with the GIL released on this thread (a short operation: a
/// summary, a table, a report), a panic caught and raised as
/// `simengine.SimEngineError`.
pub fn guarded<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| std::panic::catch_unwind(std::panic::AssertUnwindSafe(work))).map_err(|panic| panicked(py, &*panic))
}
