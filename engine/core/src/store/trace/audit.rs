//! An audit of a trace's books: every job has exactly one outcome, every
//! billed attempt is recorded once inside the call it belongs to, and what
//! the jobs were allocated adds up to what the providers billed, to the
//! nano-dollar. It reads only the trace, so it checks the run's own summary
//! from the outside (`sim-cli soak` runs it after every faulty run).

use super::record::{Header, TickFrame};
use crate::turn::Outcome;
use std::collections::HashSet;

/// What an audit counted and found.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Audit {
    /// Ticks audited.
    pub ticks: u32,
    /// Jobs (outcomes).
    pub jobs: u64,
    /// Chat calls the jobs made.
    pub chat_calls: u64,
    /// Their transport attempts (live and modelled providers).
    pub chat_attempts: u64,
    /// Physical embedding requests.
    pub embed_requests: u64,
    /// Their attempts.
    pub embed_attempts: u64,
    /// What the providers billed: chat attempts plus embedding requests.
    pub provider_nano_usd: u64,
    /// What the jobs were allocated.
    pub allocated_nano_usd: u64,
    /// The most any one tick cost.
    pub max_tick_nano_usd: u64,
    /// Every broken rule, with where it broke.
    pub problems: Vec<String>,
}

impl Audit {
    /// True when no rule broke.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Audits the committed ticks of a trace with `header`.
pub fn audit(header: &Header, ticks: &[TickFrame]) -> Audit {
    let mut a = Audit::default();
    for (i, t) in ticks.iter().enumerate() {
        if t.tick as usize != i + 1 {
            a.problems.push(format!("frame {} holds tick {}, not tick {}", i + 1, t.tick, i + 1));
        }
        let before = a.provider_nano_usd;
        audit_tick(header, t, &mut a);
        a.max_tick_nano_usd = a.max_tick_nano_usd.max(a.provider_nano_usd - before);
        a.ticks += 1;
    }
    if a.allocated_nano_usd != a.provider_nano_usd {
        a.problems.push(format!(
            "allocated {} nano-USD to jobs, but the providers billed {}",
            a.allocated_nano_usd, a.provider_nano_usd
        ));
    }
    a
}

fn audit_tick(header: &Header, t: &TickFrame, a: &mut Audit) {
    let tick = t.tick;
    let mut jobs = HashSet::with_capacity(t.outcomes.len());
    for (i, o) in t.outcomes.iter().enumerate() {
        let at = format!("tick {tick}, job {i}");
        if o.tick != tick || o.position as usize != i {
            a.problems.push(format!("{at}: the outcome says tick {}, position {}", o.tick, o.position));
        }
        if o.persona >= header.personas {
            a.problems.push(format!("{at}: persona {} is outside the panel of {}", o.persona, header.personas));
        }
        if !jobs.insert((o.persona, o.stimulus.as_str(), o.exposure)) {
            a.problems.push(format!(
                "{at}: a second outcome for persona {}, stimulus {}, exposure {}",
                o.persona, o.stimulus, o.exposure
            ));
        }
        audit_chat(o, &at, a);
        a.allocated_nano_usd += o.spend.total().nano_usd;
        a.jobs += 1;
    }
    for (n, e) in t.embeddings.iter().enumerate() {
        let calls = match &e.result {
            Ok((_, calls, _)) | Err((_, calls)) => calls,
        };
        for c in calls {
            if c.attempts == 0 {
                a.problems.push(format!("tick {tick}, embedding invocation {n}: a request with no attempt"));
            }
            a.embed_requests += 1;
            a.embed_attempts += u64::from(c.attempts);
            a.provider_nano_usd += c.spend.nano_usd;
        }
    }
}

/// A chat call's spend is the sum of its attempts', which are numbered
/// from 0 without a gap or a repeat; the provider billed the attempts.
fn audit_chat(o: &Outcome, at: &str, a: &mut Audit) {
    let mut billed = 0;
    for (n, c) in o.chat_calls.iter().enumerate() {
        a.chat_calls += 1;
        if c.attempts.is_empty() {
            // The scripted models bill the call itself.
            a.provider_nano_usd += c.spend.nano_usd;
            billed += c.spend.nano_usd;
            continue;
        }
        let mut sum = 0;
        for (k, t) in c.attempts.iter().enumerate() {
            if t.attempt as usize != k {
                a.problems.push(format!("{at}, chat call {n}: attempt {} recorded at place {k}", t.attempt));
            }
            sum += t.spend.nano_usd;
            a.chat_attempts += 1;
        }
        if sum != c.spend.nano_usd {
            a.problems.push(format!(
                "{at}, chat call {n}: its attempts were billed {sum} nano-USD, the call {}",
                c.spend.nano_usd
            ));
        }
        a.provider_nano_usd += sum;
        billed += c.spend.nano_usd;
    }
    if billed != o.spend.chat.nano_usd {
        a.problems
            .push(format!("{at}: its chat calls cost {billed} nano-USD, its spend says {}", o.spend.chat.nano_usd));
    }
}
