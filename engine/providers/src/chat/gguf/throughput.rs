//! What the local model did in this process: tokens run as prompt and
//! generated, their time, the passes and the sequences they held, and what
//! the prefix caches served ([`Throughput`], read with [`throughput`]).

/// The model's work in this process so far: tokens run as prompt (the
/// prompt, text put in place, the grammar's closes and the tokens it
/// forces, options' paths) and tokens generated (sampled), the time each took (a pass that ran both
/// splits its time by rows), the passes that generated and the sequences
/// they held, and what the prefix caches served.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Throughput {
    /// Prompt tokens run through the model (cached ones not included).
    pub prompt_tokens: u64,
    /// Nanoseconds spent on them.
    pub prompt_ns: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Nanoseconds spent on them.
    pub generate_ns: u64,
    /// Prefix cache lookups that hit.
    pub cache_hits: u64,
    /// Prompt tokens served from prefix caches.
    pub cached_tokens: u64,
    /// Constrained replies ended by the budget's close ([`super::close`]).
    pub closes: u64,
    /// Strings closed at their room in tokens.
    pub string_closes: u64,
    /// Forward passes that generated at least one token.
    pub decode_passes: u64,
    /// Sequences in those passes, summed (over `decode_passes`: the mean
    /// number of sequences that shared a decode pass).
    pub decode_sequences: u64,
    /// Tokens generated in passes that held a full batch (`[chat.gguf]
    /// batch` sequences; every pass of a batch of one).
    pub full_generated_tokens: u64,
    /// Nanoseconds spent on them (their rows' share of those passes).
    pub full_generate_ns: u64,
}

static COUNTERS: [std::sync::atomic::AtomicU64; 12] = [const { std::sync::atomic::AtomicU64::new(0) }; 12];

fn count(i: usize, v: u64) {
    COUNTERS[i].fetch_add(v, std::sync::atomic::Ordering::Relaxed);
}

/// A forward pass of `prompt` prompt rows and `generated` generated ones
/// over `sequences` sequences, which took `took`: its time is split
/// between the two by rows. `full`: the pass held as many sequences as its
/// batch allows.
pub(crate) fn count_pass(prompt: usize, generated: usize, sequences: usize, full: bool, took: std::time::Duration) {
    let rows = (prompt + generated) as u128;
    if rows == 0 {
        return;
    }
    let ns = took.as_nanos();
    let generate_ns = (ns * generated as u128 / rows) as u64;
    count(0, prompt as u64);
    count(1, (ns as u64).saturating_sub(generate_ns));
    count(2, generated as u64);
    count(3, generate_ns);
    if generated > 0 {
        count(8, 1);
        count(9, sequences as u64);
        if full {
            count(10, generated as u64);
            count(11, generate_ns);
        }
    }
}

pub(crate) fn count_cache_hit(tokens: usize) {
    count(4, 1);
    count(5, tokens as u64);
}

impl Throughput {
    /// The work done since `before` (an earlier reading).
    pub fn since(&self, before: &Throughput) -> Throughput {
        Throughput {
            prompt_tokens: self.prompt_tokens - before.prompt_tokens,
            prompt_ns: self.prompt_ns - before.prompt_ns,
            generated_tokens: self.generated_tokens - before.generated_tokens,
            generate_ns: self.generate_ns - before.generate_ns,
            cache_hits: self.cache_hits - before.cache_hits,
            cached_tokens: self.cached_tokens - before.cached_tokens,
            closes: self.closes - before.closes,
            string_closes: self.string_closes - before.string_closes,
            decode_passes: self.decode_passes - before.decode_passes,
            decode_sequences: self.decode_sequences - before.decode_sequences,
            full_generated_tokens: self.full_generated_tokens - before.full_generated_tokens,
            full_generate_ns: self.full_generate_ns - before.full_generate_ns,
        }
    }
}

pub(crate) fn count_close(whole: bool) {
    count(if whole { 6 } else { 7 }, 1);
}

/// [`Throughput`] so far in this process (take two and subtract for a span).
pub fn throughput() -> Throughput {
    let get = |i: usize| COUNTERS[i].load(std::sync::atomic::Ordering::Relaxed);
    Throughput {
        prompt_tokens: get(0),
        prompt_ns: get(1),
        generated_tokens: get(2),
        generate_ns: get(3),
        cache_hits: get(4),
        cached_tokens: get(5),
        closes: get(6),
        string_closes: get(7),
        decode_passes: get(8),
        decode_sequences: get(9),
        full_generated_tokens: get(10),
        full_generate_ns: get(11),
    }
}
