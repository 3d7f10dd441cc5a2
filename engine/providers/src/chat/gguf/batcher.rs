//! Continuous batching: the requests being decoded at once share each
//! forward pass.
//!
//! Each request decodes on its own blocking thread, as a plain loop (its
//! prompt, then token by token under its grammar, sampled from its own
//! seeded stream). Where it needs the model it hands its sequence and its
//! new tokens to the [`Batcher`] and waits. A pass runs when every request
//! that is decoding is waiting, or `bound` of them are: the thread whose
//! arrival completes the set runs the pass for all of them, on their
//! stacked rows ([`Transformer::forward`]), and hands each its logits. Requests
//! join as they start and leave as they finish, so the batch follows the
//! tick's concurrent requests with no clock and no timeout.
//!
//! A sequence's logits are the same bits whatever else is in its pass
//! ([`super::transformer`]), so the batch changes speed, never a reply. A
//! sequence the model cannot take (past the context) fails alone: it is
//! checked before the pass and left out of it.

use super::error::GgufError;
use super::transformer::{Sequence, Step, Transformer};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::{HashMap, VecDeque};
use toktrie::TokenId;

/// What a pass's rows are, for the throughput figures: prompt tokens
/// (the request's prompt, text put in place, an option's path, tokens the
/// grammar forced) or a generated token and what the grammar forced after
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rows {
    /// Tokens the model reads.
    Prompt,
    /// The token just sampled, first, then any tokens the grammar forced
    /// after it (prompt rows).
    Generated,
}

impl Rows {
    /// Of `tokens` rows, how many are prompt rows and how many generated.
    pub fn split(self, tokens: usize) -> (usize, usize) {
        match self {
            Rows::Prompt => (tokens, 0),
            Rows::Generated => (tokens.saturating_sub(1), tokens.min(1)),
        }
    }
}

/// A sequence's part of a pass, waiting.
struct Job {
    id: u64,
    seq: Sequence,
    tokens: Vec<TokenId>,
    rows: Rows,
}

type Done = (Sequence, Result<Vec<f32>, String>);

#[derive(Default)]
struct State {
    /// Requests decoding now.
    active: usize,
    pending: VecDeque<Job>,
    /// Whether a pass is running.
    running: bool,
    done: HashMap<u64, Done>,
    next: u64,
    /// Passes that held a generated row, and the sequences in them.
    decode_passes: u64,
    decode_sequences: u64,
}

/// The forward passes of one model, shared by the requests decoding on it.
pub struct Batcher {
    bound: usize,
    state: Mutex<State>,
    wake: Condvar,
}

impl std::fmt::Debug for Batcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher").field("bound", &self.bound).finish_non_exhaustive()
    }
}

/// A request's place among those decoding: it leaves when dropped.
pub struct Member<'a> {
    batcher: &'a Batcher,
}

impl Batcher {
    /// Passes of at most `bound` sequences (at least 1).
    pub fn new(bound: usize) -> Batcher {
        Batcher { bound: bound.max(1), state: Mutex::new(State::default()), wake: Condvar::new() }
    }

    /// The most sequences in one pass.
    pub fn bound(&self) -> usize {
        self.bound
    }

    /// The passes of this batcher that generated a token, and the
    /// sequences they held, summed: over the passes, the mean number of
    /// sequences that shared a decode pass.
    pub fn decode_passes(&self) -> (u64, u64) {
        let st = self.state.lock();
        (st.decode_passes, st.decode_sequences)
    }

    /// A new request decoding: its passes are shared until the member is
    /// dropped.
    pub fn join(&self) -> Member<'_> {
        self.state.lock().active += 1;
        Member { batcher: self }
    }

    /// Whether the waiting jobs make a pass: all the requests decoding, or
    /// a full batch.
    fn ready(&self, st: &State) -> bool {
        !st.running && !st.pending.is_empty() && st.pending.len() >= st.active.min(self.bound)
    }
}

impl Drop for Member<'_> {
    fn drop(&mut self) {
        let mut st = self.batcher.state.lock();
        st.active -= 1;
        // The others may now make a pass without this one.
        self.batcher.wake.notify_all();
    }
}

impl Member<'_> {
    /// The next-token logits after running `tokens` on `seq`, in a pass
    /// shared with the other members' waiting sequences.
    pub fn forward(
        &self,
        model: &Transformer,
        seq: &mut Sequence,
        tokens: &[TokenId],
        rows: Rows,
    ) -> Result<Vec<f32>, GgufError> {
        let b = self.batcher;
        let mut st = b.state.lock();
        let id = st.next;
        st.next += 1;
        st.pending.push_back(Job { id, seq: std::mem::take(seq), tokens: tokens.to_vec(), rows });
        loop {
            if let Some((back, logits)) = st.done.remove(&id) {
                *seq = back;
                return logits.map_err(GgufError::Decode);
            }
            if b.ready(&st) {
                lead(b, model, &mut st);
                continue;
            }
            b.wake.wait(&mut st);
        }
    }
}

/// Takes a batch of the waiting jobs, runs it with the lock released, and
/// hands out the results.
fn lead(b: &Batcher, model: &Transformer, st: &mut MutexGuard<'_, State>) {
    st.running = true;
    let take = st.pending.len().min(b.bound);
    let mut jobs: Vec<Job> = st.pending.drain(..take).collect();
    if jobs.iter().any(|j| j.rows == Rows::Generated) {
        st.decode_passes += 1;
        st.decode_sequences += jobs.len() as u64;
    }
    let results = MutexGuard::unlocked(st, || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pass(model, &mut jobs, b.bound)))
            .unwrap_or_else(|_| vec![Err("the forward pass panicked; this is a bug".to_string()); jobs.len()])
    });
    for (job, result) in jobs.into_iter().zip(results) {
        st.done.insert(job.id, (job.seq, result));
    }
    st.running = false;
    b.wake.notify_all();
}

/// One forward pass over `jobs`, each checked first so that one the model
/// cannot take fails alone. Counted in [`super::throughput`] (as full when
/// it holds `bound` sequences).
fn pass(model: &Transformer, jobs: &mut [Job], bound: usize) -> Vec<Result<Vec<f32>, String>> {
    let checked: Vec<Result<(), String>> =
        jobs.iter().map(|j| model.check(&j.seq, &j.tokens).map_err(|e| e.to_string())).collect();
    let mut steps: Vec<Step<'_>> = jobs
        .iter_mut()
        .zip(&checked)
        .filter(|(_, ok)| ok.is_ok())
        .map(|(j, _)| Step { seq: &mut j.seq, tokens: &j.tokens, logits: true })
        .collect();
    let started = std::time::Instant::now();
    let ran = model.forward(&mut steps).map_err(|e| format!("the model failed: {e}"));
    drop(steps);
    let (mut prompt, mut generated) = (0, 0);
    for (j, ok) in jobs.iter().zip(&checked) {
        if ok.is_ok() {
            let (p, g) = j.rows.split(j.tokens.len());
            prompt += p;
            generated += g;
        }
    }
    let sequences = checked.iter().filter(|c| c.is_ok()).count();
    super::throughput::count_pass(prompt, generated, sequences, sequences >= bound, started.elapsed());
    let mut logits = match ran {
        Ok(out) => out.into_iter().map(Ok).collect::<Vec<_>>(),
        Err(e) => vec![Err(e); sequences],
    }
    .into_iter();
    checked
        .into_iter()
        .map(|ok| match ok {
            Ok(()) => logits.next().unwrap_or_else(|| Err("a pass lost a sequence's logits; this is a bug".into())),
            Err(e) => Err(e),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Batcher, State};

    #[test]
    fn a_pass_waits_for_every_member_or_a_full_batch() {
        let b = Batcher::new(3);
        let mut st = State { active: 2, ..State::default() };
        assert!(!b.ready(&st), "nothing waiting");
        st.pending.push_back(super::Job { id: 0, seq: Default::default(), tokens: vec![1], rows: super::Rows::Prompt });
        assert!(!b.ready(&st), "one of two members waiting");
        st.active = 1;
        assert!(b.ready(&st), "the only member waiting");
        st.running = true;
        assert!(!b.ready(&st), "a pass is running");
        let b = Batcher::new(1);
        st.running = false;
        st.active = 5;
        assert!(b.ready(&st), "a full batch of one");
    }
}
