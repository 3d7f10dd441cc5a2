//! The versioned ledger and its operations.

pub use super::record_id::RecordId;
pub use super::tier::{ConsolidationConfig, Tier};
use crate::clock::SimTime;
use crate::embed::cosine;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One version of a record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    /// Version number, unique in the ledger, increasing.
    pub version: u64,
    /// The record this is a version of.
    pub record: RecordId,
    /// Tier.
    pub tier: Tier,
    /// Energy.
    pub energy: f64,
    /// When the record was created.
    pub created: SimTime,
    /// Last access. A promoted node was last accessed at its promotion, as
    /// the plan's is.
    pub last_accessed: SimTime,
    /// Accesses.
    pub access_count: u32,
    /// Highest energy reached.
    pub peak_energy: f64,
    /// Last decay; `None` until the first one (the plan's unset
    /// `lastDecay`), and again on a version opened by promotion, as the
    /// plan's promoted node has none. Decay measures from
    /// [`Version::decay_from`].
    pub last_decay: Option<SimTime>,
    /// Last promotion.
    pub last_promotion: Option<SimTime>,
    /// Times found ready for promotion.
    pub promotion_attempts: u32,
    /// Session, if any.
    pub session: Option<String>,
    /// The instance that made the record: `test-harness` for test records;
    /// none for a persona's own memories (the ledger's owner made them).
    pub instance_id: Option<String>,
    /// The decay rate per simulated hour last applied (0 before the first
    /// decay).
    pub decay_rate: f64,
    /// For an archived or expired version, the tier it was in (the plan's
    /// `'archived' + tier`).
    pub from_tier: Option<Tier>,
    /// Test records are isolated from real ones.
    pub is_test: bool,
    /// Queued for promotion at a session boundary.
    pub queued: bool,
    /// The version this one follows: the same record's before a reset or
    /// an expiry, or, for a promoted node's first version, the closed
    /// version of the node it was promoted from (the plan's `PROMOTED_TO`
    /// link, read backwards; [`Ledger::promoted_from`]).
    pub previous: Option<u64>,
    /// Start of validity.
    pub valid_from: SimTime,
    /// End of validity; `None` for the current version.
    pub valid_to: Option<SimTime>,
}

impl Version {
    /// Where the next decay measures from: the plan's
    /// `coalesce(lastDecay, lastAccessed)`. A record never decayed decays
    /// from its last access, not from its creation; once decayed, from its
    /// last decay.
    pub fn decay_from(&self) -> SimTime {
        self.last_decay.unwrap_or(self.last_accessed)
    }
}

/// Which records an operation touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every record.
    All,
    /// Test records only; real records are never touched.
    TestOnly,
}

impl Scope {
    fn admits(self, v: &Version) -> bool {
        match self {
            Scope::All => true,
            Scope::TestOnly => v.is_test,
        }
    }
}

/// What an operation did (or, in a dry run, would do).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, bincode::Encode)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    /// A record was created.
    Created {
        /// Record.
        record: RecordId,
        /// Version.
        version: u64,
    },
    /// Energy decayed.
    Decayed {
        /// Record.
        record: RecordId,
        /// Before.
        from: f64,
        /// After.
        to: f64,
    },
    /// An access raised energy.
    Accessed {
        /// Record.
        record: RecordId,
        /// Energy after.
        energy: f64,
    },
    /// Promoted to a higher tier: the record's current version is closed
    /// (archived) and a new node, [`Change::node`], opens in the tier.
    Promoted {
        /// The record promoted (now archived).
        record: RecordId,
        /// Its closed version.
        from_version: u64,
        /// The promoted node's first version.
        to_version: u64,
        /// New tier.
        tier: Tier,
        /// Energy at promotion.
        energy: f64,
    },
    /// Ready but over the batch size this run.
    PromotionBlocked {
        /// Record.
        record: RecordId,
        /// Energy.
        energy: f64,
    },
    /// Expired: a new version in the expired tier.
    Expired {
        /// Record.
        record: RecordId,
        /// Closed version.
        from_version: u64,
        /// New version.
        to_version: u64,
    },
    /// Energy set by hand: a new version.
    Reset {
        /// Record.
        record: RecordId,
        /// New version.
        to_version: u64,
        /// New energy.
        energy: f64,
    },
    /// Queued for promotion at a session boundary.
    Queued {
        /// Record.
        record: RecordId,
    },
    /// Current version closed with no successor (deleting a test record).
    Closed {
        /// Record.
        record: RecordId,
        /// Version.
        version: u64,
    },
    /// Two records joined a cluster.
    Clustered {
        /// One record.
        a: RecordId,
        /// The other.
        b: RecordId,
        /// Their cosine similarity.
        similarity: f64,
    },
}

impl Change {
    /// The node a promotion created: the promoted record's id with the
    /// tier it entered ([`RecordId::promoted`]).
    pub fn node(&self) -> Option<RecordId> {
        match self {
            Change::Promoted { record, tier, .. } => Some(record.promoted(*tier)),
            Change::Created { .. }
            | Change::Decayed { .. }
            | Change::Accessed { .. }
            | Change::PromotionBlocked { .. }
            | Change::Expired { .. }
            | Change::Reset { .. }
            | Change::Queued { .. }
            | Change::Closed { .. }
            | Change::Clustered { .. } => None,
        }
    }

    /// The record the change is about (the first one, for a cluster).
    pub fn record(&self) -> &RecordId {
        match self {
            Change::Created { record, .. }
            | Change::Decayed { record, .. }
            | Change::Accessed { record, .. }
            | Change::Promoted { record, .. }
            | Change::PromotionBlocked { record, .. }
            | Change::Expired { record, .. }
            | Change::Reset { record, .. }
            | Change::Queued { record }
            | Change::Closed { record, .. } => record,
            Change::Clustered { a, .. } => a,
        }
    }
}

/// Why an operation was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LedgerError {
    /// No record with that id.
    #[error("no memory record \"{0}\"")]
    UnknownRecord(RecordId),
    /// The record exists but has no current version (it was deleted).
    #[error("memory record \"{0}\" has no current version")]
    Closed(RecordId),
    /// An energy that is negative or not a number.
    #[error("energy must be a finite number >= 0, got {0}")]
    BadEnergy(f64),
    /// A record id already in use.
    #[error("memory record \"{0}\" already exists")]
    Exists(RecordId),
    /// Force-promotion of a record that has no tier above, or is closed.
    #[error("memory record \"{record}\" is {} and cannot be promoted", tier.as_str())]
    CannotPromote {
        /// The record.
        record: RecordId,
        /// Its tier.
        tier: Tier,
    },
    /// No test scenario of that name.
    #[error("no test scenario {0:?}")]
    UnknownScenario(String),
    /// A real record where the operation is for test records only.
    #[error("memory record \"{0}\" is not a test memory")]
    NotTest(RecordId),
    /// A new record named as a promoted node is (`….shortTerm`,
    /// `….longTerm`): promotion alone makes those.
    #[error("memory record \"{0}\" is named like a promoted node (only promotion makes ids ending in .shortTerm or .longTerm)")]
    NodeName(RecordId),
}

/// Every version of every record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    versions: Vec<Version>,
    current: BTreeMap<RecordId, usize>,
    /// Every record ever created, current or not.
    known: BTreeSet<RecordId>,
    coactivations: BTreeMap<(RecordId, RecordId), u32>,
    clusters: BTreeSet<(RecordId, RecordId)>,
    /// When the last promotion pass of a tick commit ran.
    last_promotion_pass: Option<SimTime>,
}

/// A record to create: [`NewRecord::new`] gives the defaults of a fresh
/// record (created and accessed now, once); the fields set the rest.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRecord {
    /// Its id.
    pub record: RecordId,
    /// Tier.
    pub tier: Tier,
    /// Energy.
    pub energy: f64,
    /// A test record.
    pub is_test: bool,
    /// Session, if any.
    pub session: Option<String>,
    /// The instance that made it.
    pub instance_id: Option<String>,
    /// Creation time.
    pub created: SimTime,
    /// Last access.
    pub last_accessed: SimTime,
    /// Accesses so far.
    pub access_count: u32,
}

impl NewRecord {
    /// A record created at `now` with `energy` in `tier`, accessed once.
    pub fn new(record: RecordId, now: SimTime, energy: f64, tier: Tier) -> NewRecord {
        NewRecord {
            record,
            tier,
            energy,
            is_test: false,
            session: None,
            instance_id: None,
            created: now,
            last_accessed: now,
            access_count: 1,
        }
    }

    /// The same, as a test record made by the test harness.
    pub fn test(mut self) -> NewRecord {
        self.is_test = true;
        self.instance_id = Some("test-harness".into());
        self
    }
}

impl Ledger {
    /// Every version, oldest first.
    pub fn versions(&self) -> &[Version] {
        &self.versions
    }

    /// The current version of a record's lineage: the record's own, or,
    /// once it was promoted, that of the node promotion made.
    pub fn current(&self, record: &RecordId) -> Option<&Version> {
        self.node_index(record).map(|i| &self.versions[i])
    }

    /// Where the current version of `record`'s lineage is. Only one node of
    /// a lineage is current at a time: promotion closes the old one.
    /// An id that never named a node finds nothing.
    fn node_index(&self, record: &RecordId) -> Option<usize> {
        if let Some(i) = self.current.get(record) {
            return Some(*i);
        }
        if !self.known.contains(record) {
            return None;
        }
        record.lineage().iter().find_map(|r| self.current.get(r).copied())
    }

    /// The current versions, by record id.
    pub fn currents(&self) -> impl Iterator<Item = &Version> {
        self.current.values().map(|i| &self.versions[*i])
    }

    /// A record's versions, oldest first.
    pub fn history(&self, record: &RecordId) -> Vec<&Version> {
        self.versions.iter().filter(|v| v.record == *record).collect()
    }

    /// The versions of every node of a record's lineage (the record it
    /// began as and the nodes promoted from it), oldest first.
    pub fn lineage(&self, record: &RecordId) -> Vec<&Version> {
        let origin = record.origin();
        self.versions.iter().filter(|v| v.record.origin() == origin).collect()
    }

    /// The node `v`'s node was promoted from (the plan's `promotedFrom`),
    /// when `v` is a promoted node's first version.
    pub fn promoted_from(&self, v: &Version) -> Option<&RecordId> {
        let before = &self.versions.get(usize::try_from(v.previous?).ok()?)?.record;
        (*before != v.record).then_some(before)
    }

    /// Cluster links of a record's lineage (clusters join the memories
    /// retrieved together, whatever node of theirs is current).
    pub fn cluster_links(&self, record: &RecordId) -> Vec<&RecordId> {
        let record = &record.origin();
        self.clusters
            .iter()
            .filter_map(|(a, b)| match (a == record, b == record) {
                (true, _) => Some(b),
                (_, true) => Some(a),
                _ => None,
            })
            .collect()
    }

    fn push(&mut self, mut v: Version) -> u64 {
        v.version = self.versions.len() as u64;
        let record = v.record.clone();
        self.versions.push(v);
        self.current.insert(record, self.versions.len() - 1);
        self.versions.len() as u64 - 1
    }

    fn current_index(&self, record: &RecordId) -> Result<usize, LedgerError> {
        match self.node_index(record) {
            Some(i) => Ok(i),
            None if self.known.contains(record) => Err(LedgerError::Closed(record.clone())),
            None => Err(LedgerError::UnknownRecord(record.clone())),
        }
    }

    /// Creates a record in `tier` with `energy`.
    pub fn create(
        &mut self,
        record: &RecordId,
        now: SimTime,
        energy: f64,
        tier: Tier,
        is_test: bool,
        session: Option<String>,
    ) -> Result<Change, LedgerError> {
        let new = NewRecord { is_test, session, ..NewRecord::new(record.clone(), now, energy, tier) };
        self.create_record(if is_test { new.test() } else { new })
    }

    /// Creates a record as `new` describes it (its version starts at its
    /// creation time).
    pub fn create_record(&mut self, new: NewRecord) -> Result<Change, LedgerError> {
        let NewRecord { record, tier, energy, is_test, session, instance_id, created, last_accessed, access_count } =
            new;
        if !(energy.is_finite() && energy >= 0.0) {
            return Err(LedgerError::BadEnergy(energy));
        }
        if record.origin() != record {
            return Err(LedgerError::NodeName(record));
        }
        if !self.known.insert(record.clone()) {
            return Err(LedgerError::Exists(record));
        }
        let version = self.push(Version {
            version: 0,
            record: record.clone(),
            tier,
            energy,
            created,
            last_accessed,
            access_count,
            peak_energy: energy,
            last_decay: None,
            last_promotion: None,
            promotion_attempts: 0,
            session,
            instance_id,
            decay_rate: 0.0,
            from_tier: None,
            is_test,
            queued: false,
            previous: None,
            valid_from: created,
            valid_to: None,
        });
        Ok(Change::Created { record, version })
    }

    /// Whether a tick commit may run a promotion pass at `now`: the
    /// configured interval has passed since the last one (or none ran).
    pub fn promotion_due(&self, cfg: &ConsolidationConfig, now: SimTime) -> bool {
        self.last_promotion_pass.is_none_or(|last| now.0.saturating_sub(last.0) >= cfg.promotion_interval_seconds)
    }

    /// Records that a tick commit ran a promotion pass at `now`.
    pub fn mark_promotion_pass(&mut self, now: SimTime) {
        self.last_promotion_pass = Some(now);
    }

    /// Promotes one record a tier up whatever its energy (the operator's
    /// force-promote): working to short-term, short-term to long-term.
    pub fn force_promote(&mut self, record: &RecordId, now: SimTime) -> Result<Change, LedgerError> {
        let i = self.current_index(record)?;
        let old = self.versions[i].clone();
        let tier = match old.tier {
            Tier::Working => Tier::ShortTerm,
            Tier::ShortTerm => Tier::LongTerm,
            Tier::LongTerm | Tier::Archived | Tier::Expired => {
                return Err(LedgerError::CannotPromote { record: record.clone(), tier: old.tier })
            }
        };
        let to_version = self.promote_version(i, tier, now);
        Ok(Change::Promoted { record: old.record, from_version: old.version, to_version, tier, energy: old.energy })
    }

    /// The plan's promotion: closes the node of version `i` as archived
    /// (recording its tier, counting the attempt) and creates a new node in
    /// `tier`, [`RecordId::promoted`], linked to it through `previous`.
    /// Nothing is destroyed. As the plan's `CREATE (promoted:Memory {…})`,
    /// the new node carries the content (its id names the same memory),
    /// energy, creation time, access count and test flag (and the instance
    /// that made the record); it was last
    /// accessed and promoted now, has not decayed (its next decay measures
    /// from `now`), and starts with no session, no promotion attempts and
    /// its energy as its peak.
    fn promote_version(&mut self, i: usize, tier: Tier, now: SimTime) -> u64 {
        let old = self.versions[i].clone();
        let closed = &mut self.versions[i];
        closed.valid_to = Some(now);
        closed.from_tier = Some(old.tier);
        closed.tier = Tier::Archived;
        closed.promotion_attempts += 1;
        let node = old.record.promoted(tier);
        self.current.remove(&old.record);
        // New: no record is created under a node's name, and a lineage
        // enters each tier once.
        let fresh = self.known.insert(node.clone());
        debug_assert!(fresh, "{node} existed before its promotion; this is a bug");
        self.push(Version {
            version: 0,
            record: node,
            tier,
            energy: old.energy,
            created: old.created,
            last_accessed: now,
            access_count: old.access_count,
            peak_energy: old.energy,
            last_decay: None,
            last_promotion: Some(now),
            promotion_attempts: 0,
            session: None,
            instance_id: old.instance_id,
            decay_rate: 0.0,
            from_tier: None,
            is_test: old.is_test,
            queued: false,
            previous: Some(old.version),
            valid_from: now,
            valid_to: None,
        })
    }

    /// An access: energy rises by `amount` (the configured boost by default).
    pub fn access(&mut self, record: &RecordId, now: SimTime, amount: f64) -> Result<Change, LedgerError> {
        if !(amount.is_finite() && amount >= 0.0) {
            return Err(LedgerError::BadEnergy(amount));
        }
        let i = self.current_index(record)?;
        let v = &mut self.versions[i];
        v.energy += amount;
        v.peak_energy = v.peak_energy.max(v.energy);
        v.access_count += 1;
        v.last_accessed = v.last_accessed.max(now);
        Ok(Change::Accessed { record: v.record.clone(), energy: v.energy })
    }

    /// Gives back the room the version list grew into beyond what it holds.
    /// A persona's ledger grows a few versions a tick; with a million of
    /// them, the doubling slack alone is a gigabyte.
    pub fn shrink_to_fit(&mut self) {
        self.versions.shrink_to_fit();
    }

    /// Room for `versions` more versions, taken at once (a commit knows how
    /// many records it creates), rather than by doubling as they come.
    pub fn reserve(&mut self, versions: usize) {
        self.versions.reserve_exact(versions);
    }

    /// Records retrieved together; each pair's co-activation count rises.
    pub fn coactivate(&mut self, records: &[RecordId]) {
        let mut sorted: Vec<&RecordId> = records.iter().collect();
        sorted.sort();
        sorted.dedup();
        for (i, a) in sorted.iter().enumerate() {
            for b in &sorted[i + 1..] {
                *self.coactivations.entry(((*a).clone(), (*b).clone())).or_default() += 1;
            }
        }
    }

    /// Exponential decay of every live record in scope over the whole
    /// simulated hours since [`Version::decay_from`] (its last decay, else
    /// its last access, as the plan's `coalesce(lastDecay, lastAccessed)`):
    /// `energy * e^(-rate * hours)`, the hours counted whole as the plan's
    /// `duration.between(…).hours` counts them.
    ///
    /// Where the plan then sets `lastDecay` to now, the record's last decay
    /// moves on by the whole hours decayed only, keeping the part hour for
    /// the next pass. Dropping it would make a memory's energy depend on how
    /// often passes run (a pass every 30 minutes would never decay
    /// anything); kept, passes at any times decay as one pass over the same
    /// span, up to rounding.
    pub fn decay(&mut self, cfg: &ConsolidationConfig, now: SimTime, scope: Scope, dry_run: bool) -> Vec<Change> {
        let mut out = Vec::new();
        let idx: Vec<usize> = self.current.values().copied().collect();
        for i in idx {
            let v = &self.versions[i];
            if !v.tier.live() || !scope.admits(v) {
                continue;
            }
            let rate = cfg.decay_rate(v.tier);
            let from = v.decay_from();
            let hours = now.0.saturating_sub(from.0) / 3600;
            let to = v.energy * (-rate * hours as f64).exp();
            out.push(Change::Decayed { record: v.record.clone(), from: v.energy, to });
            if !dry_run {
                let v = &mut self.versions[i];
                v.energy = to;
                v.decay_rate = rate;
                v.last_decay = Some(SimTime(from.0 + hours * 3600));
            }
        }
        out
    }

    /// Promotes ready records (working above `working_to_short`, or queued
    /// and above `session_threshold`; short-term above `short_to_long`), at
    /// most `promotion_batch_size` per run, highest energy first (ties by
    /// record id). The rest are reported as blocked.
    pub fn promote(&mut self, cfg: &ConsolidationConfig, now: SimTime, scope: Scope, dry_run: bool) -> Vec<Change> {
        self.promote_tier(cfg, now, scope, None, dry_run)
    }

    /// [`Ledger::promote`], only for records in `only` when it is set.
    pub fn promote_tier(
        &mut self,
        cfg: &ConsolidationConfig,
        now: SimTime,
        scope: Scope,
        only: Option<Tier>,
        dry_run: bool,
    ) -> Vec<Change> {
        let mut ready: Vec<usize> = self
            .current
            .values()
            .copied()
            .filter(|i| {
                let v = &self.versions[*i];
                scope.admits(v)
                    && only.is_none_or(|t| t == v.tier)
                    && match v.tier {
                        Tier::Working => {
                            v.energy > cfg.working_to_short || (v.queued && v.energy > cfg.session_threshold)
                        }
                        Tier::ShortTerm => v.energy > cfg.short_to_long,
                        Tier::LongTerm | Tier::Archived | Tier::Expired => false,
                    }
            })
            .collect();
        ready.sort_by(|a, b| {
            let (va, vb) = (&self.versions[*a], &self.versions[*b]);
            vb.energy.total_cmp(&va.energy).then(va.record.cmp(&vb.record))
        });
        let mut out = Vec::new();
        for (n, i) in ready.into_iter().enumerate() {
            let old = self.versions[i].clone();
            if n >= cfg.promotion_batch_size {
                out.push(Change::PromotionBlocked { record: old.record.clone(), energy: old.energy });
                if !dry_run {
                    self.versions[i].promotion_attempts += 1;
                }
                continue;
            }
            let tier = if old.tier == Tier::Working { Tier::ShortTerm } else { Tier::LongTerm };
            let to_version =
                if dry_run { self.versions.len() as u64 + n as u64 } else { self.promote_version(i, tier, now) };
            out.push(Change::Promoted {
                record: old.record,
                from_version: old.version,
                to_version,
                tier,
                energy: old.energy,
            });
        }
        out
    }

    /// Live records in scope below `expire_below` move to a new version in
    /// the expired tier. Nothing is deleted.
    pub fn expire(&mut self, cfg: &ConsolidationConfig, now: SimTime, scope: Scope, dry_run: bool) -> Vec<Change> {
        let due: Vec<usize> = self
            .current
            .values()
            .copied()
            .filter(|i| {
                let v = &self.versions[*i];
                v.tier.live() && scope.admits(v) && v.energy < cfg.expire_below
            })
            .collect();
        let mut out = Vec::new();
        let mut next = self.versions.len() as u64;
        for i in due {
            let old = self.versions[i].clone();
            let to_version = if dry_run {
                next += 1;
                next - 1
            } else {
                self.versions[i].valid_to = Some(now);
                self.push(Version {
                    tier: Tier::Expired,
                    from_tier: Some(old.tier),
                    previous: Some(old.version),
                    valid_from: now,
                    valid_to: None,
                    ..old.clone()
                })
            };
            out.push(Change::Expired { record: old.record, from_version: old.version, to_version });
        }
        out
    }

    /// Sets a record's energy: a new version.
    pub fn reset(&mut self, record: &RecordId, energy: f64, now: SimTime) -> Result<Change, LedgerError> {
        if !(energy.is_finite() && energy >= 0.0) {
            return Err(LedgerError::BadEnergy(energy));
        }
        let i = self.current_index(record)?;
        let old = self.versions[i].clone();
        self.versions[i].valid_to = Some(now);
        let node = old.record.clone();
        let to_version = self.push(Version {
            energy,
            peak_energy: old.peak_energy.max(energy),
            previous: Some(old.version),
            valid_from: now,
            valid_to: None,
            ..old
        });
        Ok(Change::Reset { record: node, to_version, energy })
    }

    /// Closes a test record's current version without a successor. Its
    /// versions stay readable; real records cannot be deleted.
    pub fn delete_test(&mut self, record: &RecordId, now: SimTime) -> Result<Change, LedgerError> {
        let i = self.current_index(record)?;
        if !self.versions[i].is_test {
            return Err(LedgerError::NotTest(record.clone()));
        }
        self.versions[i].valid_to = Some(now);
        let node = self.versions[i].record.clone();
        self.current.remove(&node);
        Ok(Change::Closed { record: node, version: i as u64 })
    }

    /// The session boundary: working records above `session_threshold`
    /// (in `session`, or all when `None`) are queued for promotion.
    pub fn end_session(
        &mut self,
        cfg: &ConsolidationConfig,
        session: Option<&str>,
        scope: Scope,
        dry_run: bool,
    ) -> Vec<Change> {
        let idx: Vec<usize> = self.current.values().copied().collect();
        let mut out = Vec::new();
        for i in idx {
            let v = &self.versions[i];
            let in_session = session.is_none_or(|s| v.session.as_deref() == Some(s));
            if v.tier == Tier::Working && in_session && scope.admits(v) && !v.queued && v.energy > cfg.session_threshold
            {
                out.push(Change::Queued { record: v.record.clone() });
                if !dry_run {
                    self.versions[i].queued = true;
                }
            }
        }
        out
    }

    /// Clusters pairs of live records co-activated at least
    /// `coactivation_threshold` times whose vectors have cosine similarity
    /// at least `similarity_threshold`. `vector(record)` gives a record's
    /// embedding.
    pub fn cluster<'v>(
        &mut self,
        cfg: &ConsolidationConfig,
        scope: Scope,
        dry_run: bool,
        vector: impl Fn(&RecordId) -> Option<&'v [f32]>,
    ) -> Vec<Change> {
        let mut out = Vec::new();
        // Only pairs past the threshold and not yet clustered are copied out.
        let pairs: Vec<(RecordId, RecordId)> = self
            .coactivations
            .iter()
            .filter(|(k, n)| **n >= cfg.coactivation_threshold && !self.clusters.contains(*k))
            .map(|(k, _)| k.clone())
            .collect();
        for (a, b) in pairs {
            let (Some(va), Some(vb)) = (self.current(&a), self.current(&b)) else { continue };
            if !(va.tier.live() && vb.tier.live() && scope.admits(va) && scope.admits(vb)) {
                continue;
            }
            let (Some(x), Some(y)) = (vector(&a), vector(&b)) else { continue };
            let similarity = cosine(x, y);
            if similarity >= cfg.similarity_threshold {
                out.push(Change::Clustered { a: a.clone(), b: b.clone(), similarity });
                if !dry_run {
                    self.clusters.insert((a, b));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
