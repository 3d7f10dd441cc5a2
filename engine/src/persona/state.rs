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
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    /// Text.
    pub description: String,
    /// Importance 1-10.
    pub importance: u8,
    /// Sentiment.
    pub sentiment: f32,
    /// Where it came from.
    pub sources: Vec<String>,
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
}

/// Everything one persona owns.
#[derive(Debug, Clone, PartialEq)]
pub struct PersonaState {
    /// Who it is.
    pub profile: Profile,
    /// Its private memories.
    pub memory: MemoryStream,
    /// Beliefs by stimulus id.
    pub beliefs: BTreeMap<String, Belief>,
    /// Importance accumulated since the last reflection.
    pub importance_since_reflection: u32,
    /// Chained state digest.
    pub digest: Digest,
    /// The persona header of its prompts, rendered once.
    pub header: String,
}

impl PersonaState {
    /// A fresh persona with no memories.
    pub fn new(profile: Profile) -> Self {
        let mut w = DigestWriter::new("persona v1");
        w.u32(profile.id).str(&profile.name).u8(profile.age).str(&profile.city).str(&profile.occupation);
        w.str(&profile.income).f32(profile.price_sensitivity).str(&profile.bio);
        for i in &profile.interests {
            w.str(i);
        }
        for (b, a) in &profile.brand_attitudes {
            w.str(b).f32(*a);
        }
        let header = super::prompt::persona_header(&profile);
        PersonaState {
            profile,
            memory: MemoryStream::default(),
            beliefs: BTreeMap::new(),
            importance_since_reflection: 0,
            digest: w.finish(),
            header,
        }
    }

    /// Applies a tick's commit; returns the ids of the new memories, per job.
    pub fn apply(&mut self, commit: PersonaCommit) -> Vec<Vec<MemoryId>> {
        let mut w = DigestWriter::new("persona commit v1");
        w.digest(&self.digest).u32(commit.tick).u64(commit.now.0);
        let mut ids = Vec::with_capacity(commit.jobs.len());
        for job in commit.jobs {
            w.u32(job.touched.len() as u32);
            for t in &job.touched {
                w.u32(t.seq);
            }
            self.memory.touch(&job.touched, commit.now);
            let mut job_ids = Vec::with_capacity(job.memories.len());
            for m in job.memories {
                let id = MemoryId { persona: self.profile.id, seq: self.memory.next_seq() };
                w.u32(id.seq).u8(m.kind as u8).str(&m.description).u8(m.importance).f32(m.sentiment);
                for s in &m.sources {
                    w.str(s);
                }
                match &m.vector {
                    Some(e) => w.u8(1).digest(&e.digest),
                    None => w.u8(0),
                };
                self.memory.push(MemoryRecord {
                    id,
                    kind: m.kind,
                    description: m.description,
                    importance: m.importance,
                    sentiment: m.sentiment,
                    tick: commit.tick,
                    created: commit.now,
                    last_access: commit.now,
                    sources: m.sources,
                    vector: m.vector.map(|e| e.vector),
                });
                job_ids.push(id);
            }
            if let Some((stimulus, intent, sentiment)) = job.belief {
                w.str(&stimulus).u8(intent).f32(sentiment);
                let b = self.beliefs.entry(stimulus).or_insert(Belief {
                    intent,
                    sentiment,
                    exposures: 0,
                    last_tick: commit.tick,
                });
                b.intent = intent;
                b.sentiment = sentiment;
                b.exposures += 1;
                b.last_tick = commit.tick;
            }
            self.importance_since_reflection += job.importance;
            if job.reflected {
                self.importance_since_reflection = 0;
            }
            w.u32(self.importance_since_reflection);
            ids.push(job_ids);
        }
        self.digest = w.finish();
        ids
    }
}
