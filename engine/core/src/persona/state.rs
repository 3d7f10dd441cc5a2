//! What a persona owns, and the commit that changes it.
//!
//! A persona's state changes only at the tick boundary, through
//! [`PersonaState::apply`]. Its digest is chained: the digest after a commit
//! hashes the digest before it with the canonical content of the commit, so
//! it covers the whole state history at a cost proportional to the change.

use super::memory::{MemoryId, MemoryKind, MemoryRecord, MemoryStream};
use super::profile::Profile;
use crate::clock::SimTime;
use crate::digest::{Digest, DigestWriter};
use crate::embed::Embedding;
use crate::memory::{Change, ConsolidationConfig, Ledger, RecordId, Scope, Tier};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a persona currently believes about one stimulus.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Belief {
    /// Latest purchase intent, 1-5.
    pub intent: u8,
    /// Latest sentiment.
    pub sentiment: f32,
    /// Exposures so far.
    pub exposures: u32,
    /// Tick of the latest exposure.
    pub last_tick: u32,
}

/// A memory to be added at commit; its id is assigned then.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMemory {
    /// Observation or reflection.
    pub kind: MemoryKind,
    /// Text, shared between the personas that drafted the same one.
    pub description: Arc<str>,
    /// Importance 1-10.
    pub importance: u8,
    /// Sentiment.
    pub sentiment: f32,
    /// Where it came from.
    pub sources: Vec<Arc<str>>,
    /// Its embedding, if an embedding port is configured.
    pub vector: Option<Embedding>,
}

/// One job's contribution to a persona's commit.
#[derive(Debug, Clone, PartialEq)]
pub struct JobCommit {
    /// Memories retrieved by the job; their last access becomes `now`.
    pub touched: Vec<MemoryId>,
    /// New memories, in draft order.
    pub memories: Vec<NewMemory>,
    /// Belief update: (stimulus id, intent, sentiment).
    pub belief: Option<(String, u8, f32)>,
    /// Importance the job adds toward the next reflection.
    pub importance: u32,
    /// Whether the job reflected (resets the accumulator).
    pub reflected: bool,
}

/// A persona's commit for one tick: its jobs' parts, in job order.
#[derive(Debug, Clone, PartialEq)]
pub struct PersonaCommit {
    /// The tick.
    pub tick: u32,
    /// Its simulated time.
    pub now: SimTime,
    /// The parts of the persona's successful jobs, in job order.
    pub jobs: Vec<JobCommit>,
    /// The energy bookkeeping of accesses and new memories, which every
    /// commit keeps, consolidation on or off.
    pub energy: Energy,
    /// The automatic consolidation pass to run after the jobs are applied,
    /// if `[consolidation] enabled`.
    pub consolidation: Option<Consolidate>,
}

/// The energy bookkeeping of a commit, kept whether or not consolidation
/// runs: a retrieved memory's energy rises by `access_boost` (the plan's
/// test access, `energy + boostAmount`), and a new memory starts in the
/// working tier at `initial_energy`. This is what a later manual
/// consolidation (`sim-cli memory consolidate`) decays and promotes; the
/// plan asks for that pass to be run by hand before any is automatic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Energy {
    /// Energy an access adds.
    pub access_boost: f64,
    /// Energy of a new memory.
    pub initial_energy: f64,
}

impl Energy {
    /// The bookkeeping `rules` give.
    pub fn of(rules: &ConsolidationConfig) -> Energy {
        Energy { access_boost: rules.access_boost, initial_energy: rules.initial_energy }
    }
}

/// One consolidation pass at a commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Consolidate {
    /// Thresholds and rates.
    pub rules: ConsolidationConfig,
    /// Compute the changes without making them.
    pub dry_run: bool,
    /// This commit ends the session.
    pub end_session: bool,
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The new memories' ids, per job.
    pub ids: Vec<Vec<MemoryId>>,
    /// Consolidation changes, decays left out (they follow from the rates).
    pub changes: Vec<Change>,
    /// The state digest after the commit.
    pub digest: Digest,
}

/// What a commit carries from job to job: its digest writer, the changes so
/// far, the dry run's scratch ledger, and the commit's time and energies.
struct Pass {
    w: DigestWriter,
    changes: Vec<Change>,
    scratch: Option<crate::memory::Ledger>,
    now: SimTime,
    tick: u32,
    energy: Energy,
}

fn write_change(w: &mut DigestWriter, c: &Change) {
    // A record id is hashed as the text it reads as, as it always was.
    let id = |w: &mut DigestWriter, r: &RecordId| {
        r.with_text(|t| w.str(t));
    };
    match c {
        Change::Created { record, version } => {
            id(w.u8(0), record);
            w.u64(*version)
        }
        Change::Decayed { record, from, to } => {
            id(w.u8(1), record);
            w.f64(*from).f64(*to)
        }
        Change::Accessed { record, energy } => {
            id(w.u8(2), record);
            w.f64(*energy)
        }
        Change::Promoted { record, from_version, to_version, tier, energy } => {
            id(w.u8(3), record);
            w.u64(*from_version).u64(*to_version).u8(tier.digest_code()).f64(*energy)
        }
        Change::PromotionBlocked { record, energy } => {
            id(w.u8(4), record);
            w.f64(*energy)
        }
        Change::Expired { record, from_version, to_version } => {
            id(w.u8(5), record);
            w.u64(*from_version).u64(*to_version)
        }
        Change::Reset { record, to_version, energy } => {
            id(w.u8(6), record);
            w.u64(*to_version).f64(*energy)
        }
        Change::Queued { record } => {
            id(w.u8(7), record);
            w
        }
        Change::Closed { record, version } => {
            id(w.u8(8), record);
            w.u64(*version)
        }
        Change::Clustered { a, b, similarity } => {
            id(w.u8(9), a);
            id(w, b);
            w.f64(*similarity)
        }
    };
}

/// Everything one persona owns.
#[derive(Debug, Clone, PartialEq)]
pub struct PersonaState {
    /// Who it is.
    pub profile: Profile,
    /// Its private memories.
    pub memory: MemoryStream,
    /// Beliefs by stimulus id, sorted by it: a persona holds a handful, so a
    /// sorted vector serves where a map's node would cost ten times more.
    pub beliefs: Vec<(String, Belief)>,
    /// Importance accumulated since the last reflection.
    pub importance_since_reflection: u32,
    /// Chained state digest.
    pub digest: Digest,
    /// The persona header of its prompts, rendered once and shared with
    /// the reflection plans that quote it.
    pub header: std::sync::Arc<str>,
    /// Tiers and energy of its memories, every version kept.
    pub ledger: Ledger,
    /// Per memory (by sequence number): whether retrieval may see it, i.e.
    /// its current version is in a live tier.
    pub visible: Vec<bool>,
}

impl PersonaState {
    /// A fresh persona with no memories.
    pub fn new(profile: Profile) -> Self {
        let mut w = DigestWriter::new("persona v1");
        w.u32(profile.id).str(&profile.name).u8(profile.age).str(&profile.city).str(&profile.occupation);
        w.str(&profile.income).f32(profile.price_sensitivity).str(&profile.bio);
        w.u32(profile.interests.len() as u32);
        for i in &profile.interests {
            w.str(i);
        }
        w.u32(profile.brand_attitudes.len() as u32);
        for (b, a) in &profile.brand_attitudes {
            w.str(b).f32(*a);
        }
        let header = super::prompt::persona_header(&profile).into();
        PersonaState {
            profile,
            memory: MemoryStream::default(),
            beliefs: Vec::new(),
            importance_since_reflection: 0,
            digest: w.finish(),
            header,
            ledger: Ledger::default(),
            visible: Vec::new(),
        }
    }

    /// Whether retrieval may see memory `seq` (beyond the table: yes).
    pub fn is_visible(&self, seq: u32) -> bool {
        self.visible.get(seq as usize).copied().unwrap_or(true)
    }

    /// The descriptions of the `n` most recent visible memories, oldest first.
    pub fn recent_visible(&self, n: usize) -> Vec<String> {
        let mut recent: Vec<String> = self
            .memory
            .records()
            .iter()
            .rev()
            .filter(|m| self.is_visible(m.id.seq))
            .take(n)
            .map(|m| m.description.to_string())
            .collect();
        recent.reverse();
        recent
    }

    /// True when retrieval can use a query vector: some visible memory has
    /// a vector.
    pub fn has_visible_vector(&self) -> bool {
        self.memory.records().iter().zip(&self.visible).any(|(r, v)| *v && r.vector.is_some())
    }

    /// Applies a tick's commit: the jobs' accesses and new memories with
    /// their energy, and, when the automatic pass is enabled, decay up to
    /// now before them and the session boundary, promotion, clustering and
    /// expiry after.
    pub fn apply(&mut self, commit: PersonaCommit) -> Applied {
        let mut w = DigestWriter::new("persona commit v1");
        w.digest(&self.digest).u32(commit.tick).u64(commit.now.0);
        let mut ids = Vec::with_capacity(commit.jobs.len());
        let scope = Scope::All;
        // A dry run plays the whole pass on a copy and reports the copy's
        // changes; the real ledger only records accesses and new memories.
        let mut scratch = commit.consolidation.as_ref().filter(|c| c.dry_run).map(|_| self.ledger.clone());
        let mut changes = Vec::new();
        if let Some(c) = &commit.consolidation {
            changes.extend(scratch.as_mut().unwrap_or(&mut self.ledger).decay(&c.rules, commit.now, scope, false));
        }
        let mut pass = Pass { w, changes, scratch, now: commit.now, tick: commit.tick, energy: commit.energy };
        let added: usize = commit.jobs.iter().map(|j| j.memories.len()).sum();
        self.memory.reserve_exact(added);
        self.visible.reserve_exact(added);
        self.ledger.reserve(added);
        for job in commit.jobs {
            ids.push(self.apply_job(job, &mut pass));
        }
        let Pass { mut w, mut changes, mut scratch, .. } = pass;
        if let Some(c) = &commit.consolidation {
            let ledger = scratch.as_mut().unwrap_or(&mut self.ledger);
            if c.end_session {
                changes.extend(ledger.end_session(&c.rules, None, scope, false));
            }
            if ledger.promotion_due(&c.rules, commit.now) {
                ledger.mark_promotion_pass(commit.now);
                changes.extend(ledger.promote(&c.rules, commit.now, scope, false));
            }
            let records = self.memory.records();
            let vector =
                |r: &RecordId| r.memory().and_then(|m| records.get(m.seq as usize)).and_then(|m| m.vector.as_deref());
            changes.extend(ledger.cluster(&c.rules, scope, false, vector));
            changes.extend(ledger.expire(&c.rules, commit.now, scope, false));
        }
        for c in &changes {
            write_change(&mut w, c);
        }
        // Only expiry takes a memory out of retrieval (promotion keeps it
        // live); a dry run's expiries happened on the copy.
        if scratch.is_none() {
            for c in &changes {
                if let Change::Expired { record, .. } = c {
                    if let Some(v) = record.memory().and_then(|m| self.visible.get_mut(m.seq as usize)) {
                        *v = false;
                    }
                }
            }
        }
        self.digest = w.finish();
        changes.retain(|c| !matches!(c, Change::Decayed { .. } | Change::Accessed { .. } | Change::Created { .. }));
        // The tick keeps every persona's changes until its frame is written:
        // not the room the decays took.
        changes.shrink_to_fit();
        // State rests until the next tick: without the lists' doubling slack.
        self.ledger.shrink_to_fit();
        self.memory.shrink_to_fit();
        self.visible.shrink_to_fit();
        Applied { ids, changes, digest: self.digest }
    }

    /// One job of a commit: its accesses, its new memories and its belief.
    fn apply_job(&mut self, job: JobCommit, pass: &mut Pass) -> Vec<MemoryId> {
        pass.w.u32(job.touched.len() as u32);
        for t in &job.touched {
            pass.w.u32(t.seq);
        }
        self.memory.touch(&job.touched, pass.now);
        let touched: Vec<RecordId> = job.touched.iter().map(|t| RecordId::Memory(*t)).collect();
        // In a dry run the real ledger is kept exactly as with the automatic
        // pass off (the bookkeeping alone); the scratch copy plays the pass
        // and its changes are the ones reported.
        let boost = pass.energy.access_boost;
        for t in &touched {
            let real = self.ledger.access(t, pass.now, boost);
            let reported = match pass.scratch.as_mut() {
                Some(l) => l.access(t, pass.now, boost),
                None => real,
            };
            if let Ok(c) = reported {
                pass.changes.push(c);
            }
        }
        self.ledger.coactivate(&touched);
        if let Some(l) = pass.scratch.as_mut() {
            l.coactivate(&touched);
        }
        let mut job_ids = Vec::with_capacity(job.memories.len());
        for m in job.memories {
            let id = MemoryId { persona: self.profile.id, seq: self.memory.next_seq() };
            pass.w.u32(id.seq).u8(m.kind.digest_code()).str(&m.description).u8(m.importance).f32(m.sentiment);
            pass.w.u32(m.sources.len() as u32);
            for s in &m.sources {
                pass.w.str(s);
            }
            match &m.vector {
                Some(e) => pass.w.u8(1).digest(&e.digest),
                None => pass.w.u8(0),
            };
            self.memory.push(MemoryRecord {
                id,
                kind: m.kind,
                description: m.description,
                importance: m.importance,
                sentiment: m.sentiment,
                tick: pass.tick,
                created: pass.now,
                last_access: pass.now,
                sources: m.sources,
                vector: m.vector.map(|e| e.vector),
            });
            let record = RecordId::Memory(id);
            let initial = pass.energy.initial_energy;
            let real = self.ledger.create(&record, pass.now, initial, Tier::Working, false, None);
            let reported = match pass.scratch.as_mut() {
                Some(l) => l.create(&record, pass.now, initial, Tier::Working, false, None),
                None => real,
            };
            if let Ok(c) = reported {
                pass.changes.push(c);
            }
            self.visible.push(true);
            job_ids.push(id);
        }
        if let Some((stimulus, intent, sentiment)) = job.belief {
            pass.w.str(&stimulus).u8(intent).f32(sentiment);
            let at = match self.beliefs.binary_search_by(|(id, _)| id.as_str().cmp(&stimulus)) {
                Ok(at) => at,
                Err(at) => {
                    let fresh = Belief { intent, sentiment, exposures: 0, last_tick: pass.tick };
                    self.beliefs.insert(at, (stimulus, fresh));
                    at
                }
            };
            let b = &mut self.beliefs[at].1;
            b.intent = intent;
            b.sentiment = sentiment;
            b.exposures += 1;
            b.last_tick = pass.tick;
        }
        self.importance_since_reflection += job.importance;
        if job.reflected {
            self.importance_since_reflection = 0;
        }
        pass.w.u32(self.importance_since_reflection);
        job_ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persona::{generate, Traits};

    fn commit(tick: u32, touched: Vec<MemoryId>, consolidation: Option<Consolidate>) -> PersonaCommit {
        let memory = NewMemory {
            kind: MemoryKind::Observation,
            description: format!("tick {tick}").into(),
            importance: 5,
            sentiment: 0.0,
            sources: Vec::new(),
            vector: None,
        };
        let job = JobCommit { touched, memories: vec![memory], belief: None, importance: 5, reflected: false };
        let rules = consolidation.as_ref().map_or_else(ConsolidationConfig::default, |c| c.rules.clone());
        PersonaCommit {
            tick,
            now: SimTime(u64::from(tick) * 3600),
            jobs: vec![job],
            energy: Energy::of(&rules),
            consolidation,
        }
    }

    /// With `consolidation.dry_run`, the real ledger is exactly that of a
    /// run with consolidation off, and each commit reports what a real pass
    /// would do to the current state.
    #[test]
    fn a_dry_run_changes_nothing_and_reports_a_pass_on_the_current_state() {
        let rules = ConsolidationConfig { expire_below: 0.5, ..Default::default() };
        let pass = |dry_run| Some(Consolidate { rules: rules.clone(), dry_run, end_session: false });
        let mut dry = PersonaState::new(generate(&Traits::builtin(), 1, 0));
        let mut off = dry.clone();
        let mut reported = 0;
        for tick in 1..=6 {
            // The first memory is recalled at each tick; the others fade.
            let touched: Vec<MemoryId> = dry.memory.records().iter().take(1).map(|m| m.id).collect();
            let mut enabled_now = dry.clone();
            let expected = enabled_now.apply(commit(tick, touched.clone(), pass(false))).changes;
            let got = dry.apply(commit(tick, touched.clone(), pass(true))).changes;
            assert_eq!(got, expected, "tick {tick}: the report is a real pass on the current state");
            reported += got.len();
            off.apply(commit(tick, touched, None));
        }
        assert!(reported > 0, "the passes had something to report");
        assert_eq!(dry.ledger.versions(), off.ledger.versions(), "real tiers and energies as with consolidation off");
        assert_eq!(dry.memory, off.memory);
    }

    /// A tick commit runs a promotion pass only when
    /// `promotion_interval_seconds` have passed since the last one.
    #[test]
    fn promotion_passes_keep_their_interval() {
        let rules = ConsolidationConfig {
            promotion_interval_seconds: 7200,
            working_decay: 0.0,
            initial_energy: 3.0,
            ..Default::default()
        };
        let pass = Some(Consolidate { rules, dry_run: false, end_session: false });
        let mut state = PersonaState::new(generate(&Traits::builtin(), 1, 0));
        let promoted: Vec<usize> = (1..=3)
            .map(|tick| {
                let applied = state.apply(commit(tick, Vec::new(), pass.clone()));
                applied.changes.iter().filter(|c| matches!(c, Change::Promoted { .. })).count()
            })
            .collect();
        assert_eq!(promoted, vec![1, 0, 2], "hour 1 runs a pass, hour 2 is too soon, hour 3 catches up");
    }
}
