//! What a field context has seen: operation counts per agent, and a
//! timeline point after every phase. [`Telemetry::report`] turns them, with
//! the field's final state, into the JSON the CLI prints.

use crate::field::{ratio_of, Field, FieldError, Stability};
use engine::clock::SimTime;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Stability above this counts as converged (the source's 0.75).
pub const CONVERGED_ABOVE: f64 = 0.75;

/// Resonance is summarised over at most this many live patterns (the
/// strongest; pairs grow quadratically).
pub const RESONANCE_PATTERN_CAP: usize = 2000;

/// The field after one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelinePoint {
    /// Phase number, from 1.
    pub phase: u64,
    /// Simulated hours at the phase.
    pub hours: f64,
    /// Patterns not archived.
    pub live: usize,
    /// Patterns archived (kept, left out of queries).
    pub archived: usize,
    /// Sum of decayed strengths of live patterns.
    pub total_strength: f64,
    /// Stability at the phase.
    pub stability: Stability,
    /// Largest over smallest *effective* strength of the live patterns
    /// (decay, boost and amplification together: the source's watch on one
    /// pattern drowning out the rest); `None` while nothing is live.
    pub strength_ratio: Option<f64>,
    /// Whether the ratio is above the field's `ratio_alarm`.
    #[serde(default)]
    pub alarm: bool,
    /// The share of the window's answer slots held by its top N patterns
    /// (the field's `lock_in_top` and `lock_in_window`); `None` before any
    /// answer in the window.
    #[serde(default)]
    pub top_share: Option<f64>,
    /// The Gini coefficient of the window's answer counts over every
    /// pattern live at the phase or answering in the window (0: even, near
    /// 1: a few hold all); `None` before any answer in the window.
    #[serde(default)]
    pub gini: Option<f64>,
    /// Whether the phase is locked in: its window full, more than N
    /// patterns live, and `top_share` above `lock_in_alarm`.
    #[serde(default)]
    pub lock_in: bool,
    /// Every pattern's effective strength, by id (the decay picture;
    /// archived patterns included).
    pub strengths: Vec<(u64, f64)>,
}

/// Counters and timeline of one context.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Telemetry {
    injects: BTreeMap<String, u64>,
    queries: BTreeMap<String, u64>,
    /// Per pattern, the queries whose answer held it.
    answered: BTreeMap<u64, u64>,
    /// The same, per phase (the phase in progress last).
    phase_answers: Vec<BTreeMap<u64, u64>>,
    query_resonance: QueryResonance,
    timeline: Vec<TimelinePoint>,
}

/// Operation counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// All agents.
    pub total: u64,
    /// Per agent.
    pub by_agent: BTreeMap<String, u64>,
}

/// One bucket of the resonance histogram, `[lo, hi)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Lower bound.
    pub lo: f64,
    /// Upper bound (the last bucket is open).
    pub hi: f64,
    /// Pairs in it.
    pub count: u64,
}

/// The distribution of pairwise resonance among live patterns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResonanceSummary {
    /// Patterns the pairs were drawn from.
    pub patterns: usize,
    /// Pairs.
    pub pairs: u64,
    /// Mean resonance.
    pub mean: f64,
    /// Largest.
    pub max: f64,
    /// Pairs above 0.5 (the source's "strongly resonant").
    pub strongly_resonant_pairs: u64,
    /// Histogram.
    pub histogram: Vec<Bucket>,
}

/// A pattern that more than one agent accessed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedPattern {
    /// Id.
    pub id: u64,
    /// The agent that injected it.
    pub injected_by: String,
    /// Key.
    pub key: String,
    /// Accessing agents, sorted.
    pub accessed_by: Vec<String>,
    /// Accesses.
    pub accesses: u32,
}

/// The pattern that answered the most queries: the figure that shows one
/// pattern drowning out the rest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Busiest {
    /// Id.
    pub id: u64,
    /// Key.
    pub key: String,
    /// The agent that injected it.
    pub injected_by: String,
    /// Queries whose answer held it.
    pub answered: u64,
    /// `answered / queries`, in [0, 1].
    pub share: f64,
}

/// The strength-ratio monitor over the whole timeline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Monitor {
    /// The alarm threshold (the field's `ratio_alarm`).
    pub ratio_alarm: f64,
    /// The largest max/min effective strength ratio of any phase, if any
    /// phase had live patterns.
    pub max_ratio: Option<f64>,
    /// The phase it was seen at.
    pub max_ratio_phase: Option<u64>,
    /// Phases whose ratio was above the alarm.
    pub alarm_phases: u64,
    /// The first of them.
    pub first_alarm_phase: Option<u64>,
}

impl LockIn {
    /// The monitor of a report written before it existed.
    fn empty() -> LockIn {
        let d = crate::FieldConfig::default();
        LockIn {
            top: d.lock_in_top,
            window: d.lock_in_window,
            alarm_share: d.lock_in_alarm,
            top_share: None,
            gini: None,
            max_top_share: None,
            alarm_phases: 0,
            first_alarm_phase: None,
        }
    }
}

impl Monitor {
    /// Whether the alarm fired in any phase.
    pub fn alarmed(&self) -> bool {
        self.alarm_phases > 0
    }
}

/// How many answers were resonant with their query, as the source's Q6
/// defines it (cosine above 0.7, decayed strength above 0.1).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueryResonance {
    /// Queries answered.
    pub queries: u64,
    /// Patterns returned, over all answers.
    pub hits: u64,
    /// Of which resonant with their query.
    pub resonant_hits: u64,
    /// Queries whose answer held at least one resonant pattern.
    pub queries_with_resonant: u64,
}

/// The lock-in monitor over the whole timeline: who holds the answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LockIn {
    /// N: the top patterns whose share is watched (`lock_in_top`).
    pub top: usize,
    /// The window, in phases (`lock_in_window`).
    pub window: u32,
    /// The alarm threshold on the share (`lock_in_alarm`).
    pub alarm_share: f64,
    /// The last phase's top-N share, if its window held an answer.
    pub top_share: Option<f64>,
    /// The last phase's Gini coefficient of answer counts.
    pub gini: Option<f64>,
    /// The largest top-N share of any phase with a full window.
    pub max_top_share: Option<f64>,
    /// Phases that were locked in.
    pub alarm_phases: u64,
    /// The first of them.
    pub first_alarm_phase: Option<u64>,
}

/// The share of `counts`' total held by its `top` largest, and their Gini
/// coefficient over `counts` (zeros included); `None` for no answers.
pub fn concentration(counts: &[u64], top: usize) -> Option<(f64, f64)> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let mut sorted = counts.to_vec();
    sorted.sort_unstable();
    let held: u64 = sorted.iter().rev().take(top).sum();
    let n = sorted.len() as f64;
    // G = 2 * sum(i * x_i) / (n * sum(x)) - (n + 1) / n, x ascending, i from 1.
    let weighted: f64 = sorted.iter().enumerate().map(|(i, x)| (i as f64 + 1.0) * *x as f64).sum();
    let gini = 2.0 * weighted / (n * total as f64) - (n + 1.0) / n;
    Some((held as f64 / total as f64, gini.max(0.0)))
}

/// The telemetry report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TelemetryReport {
    /// Injections.
    pub injects: Counts,
    /// Queries.
    pub queries: Counts,
    /// Patterns in the field.
    pub patterns: usize,
    /// Of which archived at the end.
    pub archived: usize,
    /// Resonance among live patterns at the end.
    pub resonance: ResonanceSummary,
    /// Patterns accessed by more than one agent (cross-agent resonance).
    pub multi_agent_patterns: Vec<SharedPattern>,
    /// The pattern that answered the most queries (ties: lowest id);
    /// `None` before any query returned anything.
    #[serde(default)]
    pub busiest: Option<Busiest>,
    /// The strength-ratio figure and its threshold.
    pub monitor: Monitor,
    /// The lock-in monitor.
    #[serde(default = "LockIn::empty")]
    pub lock_in: LockIn,
    /// Answers' resonance with their queries (Q6).
    #[serde(default)]
    pub query_resonance: QueryResonance,
    /// Final stability.
    pub stability: Stability,
    /// The first phase at which stability exceeded 0.75, if any.
    pub convergence_phase: Option<u64>,
    /// One point per phase.
    pub timeline: Vec<TimelinePoint>,
    /// Why the event log stopped, if it did (the field itself is intact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_error: Option<String>,
    /// Each pattern accessed at least once: its strength at injection and
    /// the simulated hours from injection to its last access (for the
    /// experiment's lambda calibration; left out of JSON outputs).
    #[serde(skip)]
    pub accessed_lifetimes: Vec<(f64, f64)>,
}

fn counts(m: &BTreeMap<String, u64>) -> Counts {
    Counts { total: m.values().sum(), by_agent: m.clone() }
}

impl Telemetry {
    /// Counts an injection.
    pub fn count_inject(&mut self, agent: &str) {
        *self.injects.entry(agent.to_string()).or_default() += 1;
    }

    /// Counts a query and the patterns its answer held.
    pub fn count_query(&mut self, agent: &str, answer: &[crate::Hit]) {
        *self.queries.entry(agent.to_string()).or_default() += 1;
        if self.phase_answers.len() <= self.timeline.len() {
            self.phase_answers.resize_with(self.timeline.len() + 1, BTreeMap::new);
        }
        let phase = &mut self.phase_answers[self.timeline.len()];
        for h in answer {
            *self.answered.entry(h.id).or_default() += 1;
            *phase.entry(h.id).or_default() += 1;
        }
        let resonant = answer.iter().filter(|h| h.query_resonant).count() as u64;
        let q = &mut self.query_resonance;
        q.queries += 1;
        q.hits += answer.len() as u64;
        q.resonant_hits += resonant;
        q.queries_with_resonant += u64::from(resonant > 0);
    }

    /// The top-N share and Gini of the answers of the `window` phases up to
    /// the phase in progress, over the patterns in `live` and those
    /// answering.
    fn window_concentration(&self, live: &[u64], top: usize, window: u32) -> Option<(f64, f64)> {
        let end = self.timeline.len() + 1;
        let start = end.saturating_sub(window as usize);
        let mut counts: BTreeMap<u64, u64> = live.iter().map(|id| (*id, 0)).collect();
        for phase in self.phase_answers.iter().take(end).skip(start) {
            for (id, n) in phase {
                *counts.entry(*id).or_default() += n;
            }
        }
        concentration(&counts.into_values().collect::<Vec<_>>(), top)
    }

    /// The timeline so far.
    pub fn timeline(&self) -> &[TimelinePoint] {
        &self.timeline
    }

    /// Takes the timeline point after a phase. A strength that is not
    /// finite is an error naming the pattern.
    pub fn observe(&mut self, field: &Field, now: SimTime) -> Result<&TimelinePoint, FieldError> {
        let cfg = field.config();
        let effective = field.effective_strengths(now)?;
        let decayed_live: Vec<f64> =
            field.patterns().values().filter(|p| !field.archived(p, now)).map(|p| p.decayed(cfg, now)).collect();
        let strength_ratio = ratio_of(effective.iter().filter(|(_, _, live)| *live).map(|(_, s, _)| *s));
        let live_ids: Vec<u64> = effective.iter().filter(|(_, _, live)| *live).map(|(id, _, _)| *id).collect();
        let held = self.window_concentration(&live_ids, cfg.lock_in_top, cfg.lock_in_window);
        // A young field is concentrated by being young: only a full window,
        // with more than N live patterns, can be locked in.
        let full = self.timeline.len() + 1 >= cfg.lock_in_window as usize;
        let lock_in =
            full && live_ids.len() > cfg.lock_in_top && held.is_some_and(|(share, _)| share > cfg.lock_in_alarm);
        self.timeline.push(TimelinePoint {
            phase: self.timeline.len() as u64 + 1,
            hours: now.0 as f64 / 3600.0,
            live: decayed_live.len(),
            archived: effective.len() - decayed_live.len(),
            total_strength: decayed_live.iter().sum(),
            stability: field.measure_stability(now),
            strength_ratio,
            alarm: strength_ratio.is_some_and(|r| r > cfg.ratio_alarm),
            top_share: held.map(|h| h.0),
            gini: held.map(|h| h.1),
            lock_in,
            strengths: effective.iter().map(|(id, s, _)| (*id, *s)).collect(),
        });
        Ok(&self.timeline[self.timeline.len() - 1])
    }

    /// The monitor over the timeline so far.
    pub fn monitor(&self, ratio_alarm: f64) -> Monitor {
        let max = self.timeline.iter().filter_map(|p| p.strength_ratio.map(|r| (r, p.phase))).fold(
            None,
            |best: Option<(f64, u64)>, (r, phase)| match best {
                Some((b, _)) if b >= r => best,
                _ => Some((r, phase)),
            },
        );
        let alarms: Vec<u64> = self.timeline.iter().filter(|p| p.alarm).map(|p| p.phase).collect();
        Monitor {
            ratio_alarm,
            max_ratio: max.map(|m| m.0),
            max_ratio_phase: max.map(|m| m.1),
            alarm_phases: alarms.len() as u64,
            first_alarm_phase: alarms.first().copied(),
        }
    }

    /// The lock-in monitor over the timeline so far.
    pub fn lock_in(&self, cfg: &crate::FieldConfig) -> LockIn {
        let alarms: Vec<u64> = self.timeline.iter().filter(|p| p.lock_in).map(|p| p.phase).collect();
        let last = self.timeline.last();
        LockIn {
            top: cfg.lock_in_top,
            window: cfg.lock_in_window,
            alarm_share: cfg.lock_in_alarm,
            top_share: last.and_then(|p| p.top_share),
            gini: last.and_then(|p| p.gini),
            max_top_share: self
                .timeline
                .iter()
                .filter(|p| p.phase >= u64::from(cfg.lock_in_window))
                .filter_map(|p| p.top_share)
                .reduce(f64::max),
            alarm_phases: alarms.len() as u64,
            first_alarm_phase: alarms.first().copied(),
        }
    }

    /// The pattern that answered the most queries.
    fn busiest(&self, field: &Field) -> Option<Busiest> {
        let total: u64 = self.queries.values().sum();
        let (id, answered) = self.answered.iter().fold(None, |best: Option<(u64, u64)>, (id, n)| match best {
            Some((_, b)) if b >= *n => best,
            _ => Some((*id, *n)),
        })?;
        let p = field.patterns().get(&id)?;
        Some(Busiest {
            id,
            key: p.key.clone(),
            injected_by: p.agent.clone(),
            answered,
            share: if total == 0 { 0.0 } else { answered as f64 / total as f64 },
        })
    }

    /// The report at `now`. A strength or resonance that is not finite is
    /// an error naming the pattern: no report holds inf or NaN.
    pub fn report(&self, field: &Field, now: SimTime) -> Result<TelemetryReport, FieldError> {
        let cfg = field.config();
        let archived = field.decay(now).len();
        let mut live: Vec<(f64, u64)> = field
            .patterns()
            .values()
            .filter(|p| !field.archived(p, now))
            .map(|p| (p.decayed(cfg, now), p.id))
            .collect();
        live.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        live.truncate(RESONANCE_PATTERN_CAP);
        live.sort_by_key(|p| p.1);
        let edges = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 2.0];
        let mut histogram: Vec<Bucket> = edges
            .iter()
            .enumerate()
            .map(|(i, lo)| Bucket { lo: *lo, hi: edges.get(i + 1).copied().unwrap_or(f64::INFINITY), count: 0 })
            .collect();
        let (mut pairs, mut sum, mut max, mut strong) = (0u64, 0.0f64, 0.0f64, 0u64);
        for (i, (_, a)) in live.iter().enumerate() {
            for (_, b) in &live[i + 1..] {
                let r = field.resonance(*a, *b, now)?.unwrap_or(0.0);
                pairs += 1;
                sum += r;
                max = max.max(r);
                strong += u64::from(crate::field::strongly_resonant(r));
                if let Some(bucket) = histogram.iter_mut().rev().find(|b| r >= b.lo) {
                    bucket.count += 1;
                }
            }
        }
        // JSON has no infinity: the open bucket's bound is its lower one.
        if let Some(last) = histogram.last_mut() {
            last.hi = last.lo;
        }
        let multi_agent_patterns = field
            .patterns()
            .values()
            .filter(|p| p.accessed_by.len() > 1)
            .map(|p| SharedPattern {
                id: p.id,
                injected_by: p.agent.clone(),
                key: p.key.clone(),
                accessed_by: p.accessed_by.iter().cloned().collect(),
                accesses: p.accesses,
            })
            .collect();
        Ok(TelemetryReport {
            injects: counts(&self.injects),
            queries: counts(&self.queries),
            patterns: field.patterns().len(),
            archived,
            resonance: ResonanceSummary {
                patterns: live.len(),
                pairs,
                mean: if pairs == 0 { 0.0 } else { sum / pairs as f64 },
                max,
                strongly_resonant_pairs: strong,
                histogram,
            },
            multi_agent_patterns,
            busiest: self.busiest(field),
            monitor: self.monitor(cfg.ratio_alarm),
            lock_in: self.lock_in(cfg),
            query_resonance: self.query_resonance.clone(),
            stability: field.measure_stability(now),
            convergence_phase: self.timeline.iter().find(|p| p.stability.stability > CONVERGED_ABOVE).map(|p| p.phase),
            timeline: self.timeline.clone(),
            log_error: None,
            accessed_lifetimes: field
                .patterns()
                .values()
                .filter(|p| p.accesses > 0)
                .map(|p| (p.strength, p.last_access.hours_since(p.created)))
                .collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::concentration;

    /// The Gini coefficient by its other definition: the mean absolute
    /// difference over all pairs, over twice the mean.
    fn gini_by_pairs(x: &[u64]) -> f64 {
        let n = x.len() as f64;
        let mean = x.iter().sum::<u64>() as f64 / n;
        let diffs: f64 = x.iter().flat_map(|a| x.iter().map(move |b| (*a as f64 - *b as f64).abs())).sum();
        diffs / (2.0 * n * n * mean)
    }

    #[test]
    fn concentration_is_the_top_share_and_the_gini_of_the_counts() {
        assert_eq!(concentration(&[0, 0, 0], 2), None, "no answers, no figure");
        let (share, gini) = concentration(&[5, 5, 5, 5], 2).expect("answers");
        assert!((share - 0.5).abs() < 1e-12 && gini.abs() < 1e-12, "even: half in the top two, Gini 0");
        let (share, gini) = concentration(&[0, 0, 0, 12], 1).expect("answers");
        assert!((share - 1.0).abs() < 1e-12);
        assert!((gini - 0.75).abs() < 1e-12, "one of four holds all: 1 - 1/n = {gini}");
        for counts in [vec![3u64, 1, 4, 1, 5, 9, 2, 6], vec![0, 7, 0, 0, 1, 30, 2], vec![1, 2, 3]] {
            let (share, gini) = concentration(&counts, 3).expect("answers");
            assert!((gini - gini_by_pairs(&counts)).abs() < 1e-12, "{counts:?}: {gini}");
            let mut sorted = counts.clone();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            let top: u64 = sorted[..3.min(sorted.len())].iter().sum();
            assert!((share - top as f64 / counts.iter().sum::<u64>() as f64).abs() < 1e-12);
        }
    }
}
