//! The chat stage's task pool: at most `chat.concurrency` tasks, each
//! taking the next job of the window when it is done with one. As many
//! conversations are in flight as one task per job under that bound would
//! allow, without a task per job.

use crate::progress::Progress;
use crate::shared::RunShared;
use engine::turn::{converse, Prepared};
use futures::FutureExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use engine::tick::Finished;

/// Holds `ready`'s conversations for tick `tick` and returns each job's
/// result by its place in `ready`, with why a pool task failed if one did
/// (the jobs it held are then `None`). `progress` hears of every 1,024th
/// job, counted from `done` of `total`.
pub async fn converse_all(
    shared: &Arc<RunShared>,
    progress: &Arc<dyn Progress>,
    tick: u32,
    ready: Vec<Prepared>,
    (done, total): (u64, u64),
) -> (Vec<Option<Finished>>, Option<String>) {
    progress.stage(tick, "chat", done, total);
    let jobs = ready.len();
    let queue = Arc::new(parking_lot::Mutex::new(ready.into_iter().enumerate()));
    // Each job's result, by its place in the window, written by whichever
    // pool task ran it.
    let slots: Vec<Option<Finished>> = std::iter::repeat_with(|| None).take(jobs).collect();
    let slots = Arc::new(parking_lot::Mutex::new(slots));
    let done = Arc::new(AtomicU64::new(done));
    // Through a Batch API every job talks at once: a round goes out when
    // every conversation waits on it.
    let workers = match shared.config.raw.chat.mode {
        engine::config::ChatMode::Online => shared.config.raw.chat.concurrency.clamp(1, jobs.max(1)),
        engine::config::ChatMode::Batch => jobs.max(1),
    };
    // Every job's conversation counts from the start, so that a round is
    // never sent before each job has asked its first question.
    for _ in 0..jobs {
        shared.chat.conversation_started();
    }
    let pool: Vec<_> = (0..workers)
        .map(|_| {
            let (shared, queue, slots, done) =
                (Arc::clone(shared), Arc::clone(&queue), Arc::clone(&slots), Arc::clone(&done));
            let progress = Arc::clone(progress);
            tokio::spawn(async move {
                loop {
                    let next = queue.lock().next();
                    let Some((i, mut p)) = next else { break };
                    let talk = converse(&*shared.chat, &p, &shared.config, &shared.scenario, tick);
                    let c = std::panic::AssertUnwindSafe(talk).catch_unwind().await;
                    shared.chat.conversation_ended();
                    p.release_prompts();
                    slots.lock()[i] = Some((p, c.map_err(|panic| crate::persona::panic_message(&*panic))));
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if n % 1024 == 0 {
                        progress.stage(tick, "chat", n, total);
                    }
                }
            })
        })
        .collect();
    let mut lost = None;
    for task in pool {
        if let Err(e) = task.await {
            lost = Some(e.to_string());
        }
    }
    // Every pool task has ended: the slots hold all they will.
    let slots = std::mem::take(&mut *slots.lock());
    (slots, lost)
}
