//! The field: its patterns in a FAISS index, and the five operations
//! (inject, query, decay, reinforce, measure_stability).

pub use crate::config::{FieldConfig, MAX_AMPLIFICATION, MAX_BOOST_CAP, MAX_CO_ACCESS, MAX_EXTRA, MAX_STRENGTH};
pub use crate::error::FieldError;
pub use crate::pattern::Pattern;
use crate::storage::{FlatMap, Rows};
use engine::clock::SimTime;
use engine::digest::{Digest, DigestWriter};
use faiss::index::flat::FlatIndexImpl;
use faiss::{IdMap, Idx, Index};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// A query hit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Pattern id.
    pub id: u64,
    /// Its score.
    pub score: f64,
    /// Its cosine similarity to the query.
    pub cosine: f64,
    /// It resonates with another hit of the same answer: their cosine is
    /// above 0.7 and both decayed strengths are above 0.1.
    pub resonant: bool,
    /// Its resonance with another hit of the same answer is above 0.5: the
    /// source's "strongly resonant" ([`strongly_resonant`]), the one
    /// definition the field and its telemetry share. It needs no cosine
    /// above 0.7, only `cos^2 x s_A x s_B > 0.5`.
    pub strongly_resonant: bool,
    /// It is resonant with the query, as the source's Q6 defines it: cosine
    /// above 0.7 and decayed strength above 0.1. Telemetry counts it; no
    /// answer is filtered by it.
    pub query_resonant: bool,
}

/// The source's thresholds: a pair resonates above this cosine...
pub const RESONANT_COSINE: f64 = 0.7;
/// ...when both decayed strengths are above this...
pub const RESONANT_STRENGTH: f64 = 0.1;
/// A pair is *strongly resonant* when its resonance is above this.
pub const STRONG_RESONANCE: f64 = 0.5;

/// The source's "strongly resonant": a resonance (`cos^2 x s_A x s_B`)
/// above [`STRONG_RESONANCE`]. The field's flags, [`Field::strongly_resonant`]
/// and the telemetry's count all use this one test.
pub fn strongly_resonant(resonance: f64) -> bool {
    resonance > STRONG_RESONANCE
}

/// What an injection did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Injected {
    /// The pattern.
    pub id: u64,
    /// True when the content was already there and was reinforced.
    pub reinforced: bool,
}

/// Field stability. *Attractor strength* is the share of the live field's
/// decayed strength held by attractors, patterns accessed at least twice;
/// *organisation* is one minus the normalised entropy of the live strength
/// distribution (1 when one pattern holds everything, 0 when all are
/// equal). `stability = 0.6 x attractor strength + 0.4 x organisation`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Stability {
    /// Attractor strength in [0, 1].
    pub attractor_strength: f64,
    /// Organisation in [0, 1].
    pub organisation: f64,
    /// The weighted sum.
    pub stability: f64,
}

/// The container format of `field.patterns`: one frame, the pattern table.
/// Version 2: patterns hold a co-access count and a bounded amplification
/// instead of version 1's self-feeding bonus (see CHANGELOG).
pub const FIELD_PATTERNS: engine::store::frame::Format =
    engine::store::frame::Format { magic: *b"SIMPATTS", version: 2, what: "field pattern table" };

/// Above this `lambda x hours` since the epoch the rows are rebased (their
/// scale factors would otherwise leave `f32`'s comfortable range).
const REBASE_ABOVE: f64 = 30.0;

/// The field.
///
/// The index does not hold the unit vectors but *score rows*: pattern `p`
/// is stored as `w_p v_p` with `w_p = S0 x e^(lambda (t_p - t0)) x boost_p
/// x (1 + extra_p)` (`t_p` its last access, `t0` the field's epoch), and a
/// query `q` at time `t` is sent as `e^(-lambda (t - t0)) q`. Their inner
/// product is exactly the pattern's score, decay, boost and the bounded
/// extra share included, so FAISS ranks by score in one scan; the candidates are then
/// re-scored in `f64` and the over-fetch bound only has to absorb FAISS's
/// `f32` rounding. Reinforcement rewrites the touched rows in place.
pub struct Field {
    cfg: FieldConfig,
    dim: usize,
    patterns: BTreeMap<u64, Pattern>,
    by_hash: BTreeMap<Digest, u64>,
    /// The time the row scales are relative to.
    epoch: SimTime,
    /// Each pattern's row scale `w_p`, by id (= position in the index).
    weights: Vec<f64>,
    /// Largest `w_p` and last access: what the over-fetch bound and the
    /// choice of path need, kept up to date on every write (`max_w` only
    /// grows between rebases, so it stays an upper bound).
    max_w: f64,
    latest: SimTime,
    /// FAISS writes are not thread-safe; searches take the same lock.
    index: Mutex<FlatMap>,
}

fn normalised(v: &[f32]) -> Option<Vec<f32>> {
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    (norm.is_finite() && norm > 0.0).then(|| v.iter().map(|x| (f64::from(*x) / norm) as f32).collect())
}

/// Dot product in a fixed order, in f64: the one kernel every score uses,
/// whatever kernel FAISS picked for the candidate search. Eight running
/// sums (lane `i` takes elements `i, i + 8, ...`) let the compiler
/// vectorise; they are combined in one fixed tree, so the result is the
/// same on every run and thread.
/// Margin of the f32 cosine screen: the f32 dot of two unit vectors of up
/// to 65,536 dimensions is within 65,536 x 2^-23 ~ 0.008 of the exact one,
/// so nothing above the threshold is screened out.
const COSINE_SCREEN: f64 = 0.01;

/// A fast f32 dot product in a fixed order (16 lanes), for screening only.
fn dot32(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += x[i] * y[i];
        }
    }
    acc.iter().sum::<f32>() + tail
}

fn dot(a: &[f32], b: &[f32]) -> f64 {
    let mut acc = [0.0f64; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = ca.remainder().iter().zip(cb.remainder()).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += f64::from(x[i]) * f64::from(y[i]);
        }
    }
    (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) + tail
}

fn faiss_err(e: faiss::error::Error) -> FieldError {
    FieldError::Faiss(e.to_string())
}

fn new_index(dim: usize) -> Result<FlatMap, FieldError> {
    IdMap::new(FlatIndexImpl::new_ip(dim as u32).map_err(faiss_err)?).map_err(faiss_err)
}

/// Whether a held strength is usable: finite, non-negative, at most
/// [`MAX_STRENGTH`].
fn strength_ok(s: f64) -> bool {
    s.is_finite() && (0.0..=MAX_STRENGTH).contains(&s)
}

/// Signed hours from `from` to `to`.
fn hours(from: SimTime, to: SimTime) -> f64 {
    (to.0 as f64 - from.0 as f64) / 3600.0
}

impl Field {
    /// An empty field of dimension `dim`.
    pub fn new(dim: usize, cfg: FieldConfig) -> Result<Field, FieldError> {
        Self::from_patterns(dim, cfg, Vec::new())
    }

    /// A field holding `patterns`, whose ids must be `0, 1, 2, ...` in
    /// order (as the field assigns them).
    pub fn from_patterns(dim: usize, cfg: FieldConfig, patterns: Vec<Pattern>) -> Result<Field, FieldError> {
        cfg.validate()?;
        let epoch = SimTime(patterns.iter().map(|p| p.last_access.0).min().unwrap_or(0));
        Self::assemble(dim, cfg, patterns, epoch, new_index(dim)?, true)
    }

    /// Builds the field around `index`; `fill` adds the rows, otherwise the
    /// index's rows are checked against the patterns.
    fn assemble(
        dim: usize,
        cfg: FieldConfig,
        patterns: Vec<Pattern>,
        epoch: SimTime,
        mut index: FlatMap,
        fill: bool,
    ) -> Result<Field, FieldError> {
        crate::threads::apply(cfg.threads);
        for (i, p) in patterns.iter().enumerate() {
            if p.id != i as u64 {
                return Err(FieldError::Faiss(format!(
                    "pattern ids must run 0, 1, 2, ...; position {i} holds id {}",
                    p.id
                )));
            }
            if p.vector.len() != dim {
                return Err(FieldError::WrongDimension { expected: dim, got: p.vector.len() });
            }
            if !strength_ok(p.strength) {
                return Err(p.non_finite("strength", p.strength));
            }
            if !(p.amplification.is_finite() && p.amplification >= 0.0) {
                return Err(p.non_finite("amplification", p.amplification));
            }
        }
        let mut field = Field {
            cfg,
            dim,
            by_hash: patterns.iter().map(|p| (p.content_hash, p.id)).collect(),
            patterns: patterns.into_iter().map(|p| (p.id, p)).collect(),
            epoch,
            weights: Vec::new(),
            max_w: 0.0,
            latest: SimTime(0),
            index: Mutex::new(new_index(0)?),
        };
        field.weights = field.patterns.values().map(|p| field.weight(p)).collect();
        field.max_w = field.weights.iter().copied().fold(0.0, f64::max);
        field.latest = field.patterns.values().map(|p| p.last_access).max().unwrap_or(SimTime(0));
        let rows: Vec<f32> = field.patterns.values().flat_map(|p| field.row(p)).collect();
        if fill {
            let ids: Vec<Idx> = field.patterns.keys().map(|id| Idx::new(*id)).collect();
            if !ids.is_empty() {
                index.add_with_ids(&rows, &ids).map_err(faiss_err)?;
            }
        } else {
            let sequential = index.id_map().iter().enumerate().all(|(i, id)| id.get() == Some(i as u64));
            let same = Rows::guard(&mut index, dim)?.all() == rows.as_slice();
            if !sequential || !same {
                return Err(FieldError::Faiss("the index's rows do not match the pattern table".into()));
            }
        }
        field.index = Mutex::new(index);
        Ok(field)
    }

    /// `w_p`: the row scale of a pattern.
    fn weight(&self, p: &Pattern) -> f64 {
        p.base(&self.cfg)
            * (self.cfg.lambda * hours(self.epoch, p.last_access)).exp()
            * p.boost(&self.cfg)
            * (1.0 + p.extra(&self.cfg))
    }

    /// The stored row of a pattern.
    fn row(&self, p: &Pattern) -> Vec<f32> {
        let w = self.weight(p);
        p.vector.iter().map(|x| (f64::from(*x) * w) as f32).collect()
    }

    /// Rewrites the rows of `ids` after their patterns changed.
    /// The rows are written first, all or none; the cached weights and
    /// bounds change only once they are, so a failed refresh leaves the
    /// index and the bounds as they were.
    fn refresh(&mut self, ids: &[u64]) -> Result<(), FieldError> {
        let mut rows = Vec::with_capacity(ids.len());
        let mut weights = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(p) = self.patterns.get(id) {
                weights.push((*id as usize, self.weight(p), p.last_access));
                rows.push((*id as usize, self.row(p)));
            }
        }
        Rows::guard(self.index.get_mut(), self.dim)?.write(&rows)?;
        for (pos, w, last_access) in weights {
            self.weights[pos] = w;
            self.max_w = self.max_w.max(w);
            self.latest = self.latest.max(last_access);
        }
        Ok(())
    }

    /// Moves the epoch to `now` when the scales would grow too large.
    fn maybe_rebase(&mut self, now: SimTime) -> Result<(), FieldError> {
        if self.cfg.lambda * hours(self.epoch, now) <= REBASE_ABOVE {
            return Ok(());
        }
        self.epoch = now;
        self.max_w = 0.0;
        let ids: Vec<u64> = self.patterns.keys().copied().collect();
        self.refresh(&ids)
    }

    /// The vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The configuration.
    pub fn config(&self) -> &FieldConfig {
        &self.cfg
    }

    /// Every pattern, by id.
    pub fn patterns(&self) -> &BTreeMap<u64, Pattern> {
        &self.patterns
    }

    /// Injects a pattern with `strength x permeability`, or reinforces the
    /// pattern with the same key and value.
    pub fn inject(
        &mut self,
        agent: &str,
        key: &str,
        value: &str,
        vector: &[f32],
        strength: f64,
        now: SimTime,
    ) -> Result<Injected, FieldError> {
        if vector.len() != self.dim {
            return Err(FieldError::WrongDimension { expected: self.dim, got: vector.len() });
        }
        if !strength_ok(strength * self.cfg.permeability) {
            return Err(FieldError::BadStrength(strength * self.cfg.permeability));
        }
        let content_hash = DigestWriter::new("field content v1").str(key).str(value).finish();
        if let Some(id) = self.by_hash.get(&content_hash).copied() {
            // Resurrection: the re-injection brings its strength back (the
            // larger of the pattern's S0 and what it brings) and, as an
            // access, resets the decay clock, so a faded pattern is live again.
            let brought = strength * self.cfg.permeability;
            if let Some(p) = self.patterns.get_mut(&id) {
                p.strength = p.strength.max(brought);
            }
            self.reinforce(agent, &[id], now)?;
            return Ok(Injected { id, reinforced: true });
        }
        let vector = normalised(vector).ok_or(FieldError::BadVector)?;
        self.maybe_rebase(now)?;
        let id = self.patterns.len() as u64;
        let p = Pattern {
            id,
            agent: agent.into(),
            key: key.into(),
            value: value.into(),
            content_hash,
            strength: strength * self.cfg.permeability,
            created: now,
            last_access: now,
            accesses: 0,
            co_accesses: 0,
            amplification: 0.0,
            accessed_by: BTreeSet::new(),
            vector,
        };
        let row = self.row(&p);
        self.index.get_mut().add_with_ids(&row, &[Idx::new(id)]).map_err(faiss_err)?;
        let w = self.weight(&p);
        self.weights.push(w);
        self.max_w = self.max_w.max(w);
        self.latest = self.latest.max(now);
        self.by_hash.insert(content_hash, id);
        self.patterns.insert(id, p);
        Ok(Injected { id, reinforced: false })
    }

    /// A digest of the whole field: every pattern with its vector.
    pub fn digest(&self) -> Digest {
        let mut w = DigestWriter::new("field v2");
        w.u64(self.dim as u64);
        for p in self.patterns.values() {
            w.u64(p.id).str(&p.agent).str(&p.key).str(&p.value).digest(&p.content_hash).f64(p.strength);
            w.u64(p.created.0).u64(p.last_access.0).u32(p.accesses).u32(p.co_accesses).f64(p.amplification);
            w.u64(p.accessed_by.len() as u64);
            for a in &p.accessed_by {
                w.str(a);
            }
            w.floats(&p.vector);
        }
        w.finish()
    }

    /// Saves the field into `dir`: the index with FAISS's own writer
    /// (`field.index`) and the pattern table beside it (`field.patterns`).
    pub fn save(&self, dir: &std::path::Path) -> Result<(), FieldError> {
        let err = |cause: String| FieldError::Files { path: dir.display().to_string(), cause };
        std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
        let index_path = dir.join("field.index");
        let path = index_path.to_str().ok_or_else(|| err("the path is not valid UTF-8".into()))?;
        faiss::write_index(&*self.index.lock(), path).map_err(|e| err(format!("writing the index: {e}")))?;
        let table = (self.dim as u64, &self.cfg, self.epoch, self.patterns.values().collect::<Vec<_>>());
        let bytes = engine::store::codec::encode(&table).map_err(|e| err(format!("encoding the patterns: {e}")))?;
        engine::store::frame::write_file(&dir.join("field.patterns"), &FIELD_PATTERNS, [&bytes[..]])
            .map_err(|e| FieldError::Stored(std::sync::Arc::new(e)))
    }

    /// Loads a field saved by [`Field::save`], checking that the index and
    /// the pattern table agree row for row.
    pub fn load(dir: &std::path::Path) -> Result<Field, FieldError> {
        let err = |cause: String| FieldError::Files { path: dir.display().to_string(), cause };
        type Table = (u64, FieldConfig, SimTime, Vec<Pattern>);
        let tables = engine::store::frame::read_all(&dir.join("field.patterns"), &FIELD_PATTERNS, |f| {
            engine::store::codec::decode::<Table>(&f.payload)
        })
        .map_err(|e| FieldError::Stored(std::sync::Arc::new(e)))?;
        let Ok::<[Table; 1], _>([(dim, cfg, epoch, patterns)]) = tables.try_into() else {
            return Err(err("field.patterns must hold exactly one pattern table".into()));
        };
        let index_path = dir.join("field.index");
        let path = index_path.to_str().ok_or_else(|| err("the path is not valid UTF-8".into()))?;
        let index = faiss::read_index(path).map_err(|e| err(format!("reading the index: {e}")))?;
        if u64::from(index.d()) != dim || index.ntotal() != patterns.len() as u64 {
            return Err(err(format!(
                "the index holds {} rows of dimension {}, the table {} patterns of dimension {dim}",
                index.ntotal(),
                index.d(),
                patterns.len()
            )));
        }
        let index = index
            .into_id_map()
            .and_then(|m| m.try_cast_inner_index::<FlatIndexImpl>())
            .map_err(|e| err(format!("the index is not an ID map over a flat index: {e}")))?;
        Self::assemble(dim as usize, cfg, patterns, epoch, index, false).map_err(|e| err(e.to_string()))
    }

    /// Whether a pattern is archived at `now`.
    pub fn archived(&self, p: &Pattern, now: SimTime) -> bool {
        p.decayed(&self.cfg, now) < self.cfg.archive_below
    }

    /// The exact top-`k` live patterns for `query` at `now` (no side
    /// effects; see [`Field::query_and_reinforce`]).
    pub fn query(&self, query: &[f32], k: usize, now: SimTime) -> Result<Vec<Hit>, FieldError> {
        Ok(self.query_batch(&[query], k, now)?.pop().unwrap_or_default())
    }

    /// The exact top-`k` for each query, all against the same state: one
    /// FAISS search for the whole batch per over-fetch round. Each answer is
    /// identical to [`Field::query`] of that query alone (the candidates are
    /// re-scored in the same fixed-order kernel, whatever kernel FAISS used).
    /// Each hit carries its resonance flags within its answer.
    pub fn query_batch(&self, queries: &[&[f32]], k: usize, now: SimTime) -> Result<Vec<Vec<Hit>>, FieldError> {
        let mut answers = self.rank_batch(queries, k, now)?;
        for hits in &mut answers {
            self.flag_resonance(hits, now);
        }
        Ok(answers)
    }

    /// The ranking of [`Field::query_batch`], without the flags.
    fn rank_batch(&self, queries: &[&[f32]], k: usize, now: SimTime) -> Result<Vec<Vec<Hit>>, FieldError> {
        let mut normed = Vec::with_capacity(queries.len());
        for q in queries {
            if q.len() != self.dim {
                return Err(FieldError::WrongDimension { expected: self.dim, got: q.len() });
            }
            normed.push(normalised(q).ok_or(FieldError::BadVector)?);
        }
        let total = self.patterns.len();
        if k == 0 || total == 0 {
            return Ok(vec![Vec::new(); queries.len()]);
        }
        // Query rows: `[e^(-lambda (t - t0)) q, 1]`. When `now` is before a
        // pattern's last access (its decay clock is clamped, the row's is
        // not) or the factor is not a usable f32, rank exhaustively instead.
        let factor = (-self.cfg.lambda * hours(self.epoch, now)).exp();
        if now < self.latest || !(factor.is_finite() && (1e-30..1e30).contains(&factor)) {
            return normed.iter().map(|q| self.exhaustive(q, k, now)).collect();
        }
        // FAISS's f32 inner products are off by at most about `n u` of the
        // sum of absolute terms (n = dim products, u = 2^-24), plus the
        // rounding of the two rows; an unfetched pattern scores at most the
        // lowest fetched value plus twice that.
        let margin = (self.dim as f64 + 4.0) * f64::powi(2.0, -23) * self.max_w * factor + 1e-12;
        let rows: Vec<Vec<f32>> =
            normed.iter().map(|q| q.iter().map(|x| (f64::from(*x) * factor) as f32).collect()).collect();
        let mut answers: Vec<Option<Vec<Hit>>> = vec![None; queries.len()];
        let mut fetch = (k + 8).min(total);
        loop {
            let pending: Vec<usize> = (0..queries.len()).filter(|i| answers[*i].is_none()).collect();
            if pending.is_empty() {
                return Ok(answers.into_iter().map(Option::unwrap_or_default).collect());
            }
            let flat: Vec<f32> = pending.iter().flat_map(|i| rows[*i].iter().copied()).collect();
            let found = self.index.lock().search(&flat, fetch).map_err(faiss_err)?;
            for (row, i) in pending.iter().enumerate() {
                let span = row * fetch..(row + 1) * fetch;
                let mut hits: Vec<Hit> = Vec::with_capacity(fetch);
                let mut lowest = f64::INFINITY;
                for (label, d) in found.labels[span.clone()].iter().zip(&found.distances[span]) {
                    let Some(id) = label.get() else { continue };
                    lowest = lowest.min(f64::from(*d));
                    if let Some(p) = self.patterns.get(&id) {
                        hits.extend(self.hit(p, &normed[*i], now)?);
                    }
                }
                hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
                if fetch >= total || (hits.len() >= k && hits[k - 1].score > lowest + margin) {
                    hits.truncate(k);
                    answers[*i] = Some(hits);
                }
            }
            fetch = (fetch * 4).min(total);
        }
    }

    /// A live pattern's hit for a normalised query (`None` when archived);
    /// a score that is not finite is an error naming the pattern.
    fn hit(&self, p: &Pattern, q: &[f32], now: SimTime) -> Result<Option<Hit>, FieldError> {
        if self.archived(p, now) {
            return Ok(None);
        }
        let cosine = dot(q, &p.vector);
        let score = p.score(&self.cfg, now, cosine);
        if !score.is_finite() {
            return Err(p.non_finite("score", score));
        }
        let query_resonant = cosine > RESONANT_COSINE && p.decayed(&self.cfg, now) > RESONANT_STRENGTH;
        Ok(Some(Hit { id: p.id, score, cosine, resonant: false, strongly_resonant: false, query_resonant }))
    }

    /// Exhaustive exact ranking.
    fn exhaustive(&self, q: &[f32], k: usize, now: SimTime) -> Result<Vec<Hit>, FieldError> {
        let mut hits = Vec::new();
        for p in self.patterns.values() {
            hits.extend(self.hit(p, q, now)?);
        }
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
        hits.truncate(k);
        Ok(hits)
    }

    /// Queries, then reinforces what it returned.
    pub fn query_and_reinforce(
        &mut self,
        agent: &str,
        query: &[f32],
        k: usize,
        now: SimTime,
    ) -> Result<Vec<Hit>, FieldError> {
        let hits = self.query(query, k, now)?;
        self.reinforce_answer(agent, &hits, now)?;
        Ok(hits)
    }

    /// Reinforces an answer: amplification first (each hit's amplification
    /// becomes `resonance_amplification x` its strongest qualifying
    /// resonance in this answer, measured before this access, or 0; it
    /// replaces the last answer's value), then the accesses and the
    /// co-access count of [`Field::reinforce`].
    pub fn reinforce_answer(&mut self, agent: &str, hits: &[Hit], now: SimTime) -> Result<(), FieldError> {
        let factor = self.cfg.resonance_amplification;
        let mut amplified = Vec::with_capacity(hits.len());
        for h in hits {
            let gain =
                if factor > 0.0 && h.resonant { factor * self.strongest_resonance(h.id, hits, now)? } else { 0.0 };
            amplified.push((h.id, gain));
        }
        for (id, gain) in amplified {
            if let Some(p) = self.patterns.get_mut(&id) {
                p.amplification = gain;
            }
        }
        self.reinforce(agent, &hits.iter().map(|h| h.id).collect::<Vec<_>>(), now)
    }

    /// Whether two patterns qualify as resonant at `now`.
    fn resonate(&self, a: &Pattern, b: &Pattern, now: SimTime) -> Option<f64> {
        let cos = dot(&a.vector, &b.vector);
        let live = a.decayed(&self.cfg, now) > RESONANT_STRENGTH && b.decayed(&self.cfg, now) > RESONANT_STRENGTH;
        (cos > RESONANT_COSINE && live).then_some(cos)
    }

    /// The strongest resonance of `id` with another qualifying hit.
    fn strongest_resonance(&self, id: u64, hits: &[Hit], now: SimTime) -> Result<f64, FieldError> {
        let Some(a) = self.patterns.get(&id) else { return Ok(0.0) };
        let mut strongest = 0.0f64;
        for b in hits.iter().filter(|h| h.id != id).filter_map(|h| self.patterns.get(&h.id)) {
            if self.resonate(a, b, now).is_some() {
                strongest = strongest.max(self.resonance(a.id, b.id, now)?.unwrap_or(0.0));
            }
        }
        Ok(strongest)
    }

    /// Sets each hit's resonance flags against the other hits of its
    /// answer. Pairs are visited in rank order, so flags never depend on
    /// anything but the answer.
    fn flag_resonance(&self, hits: &mut [Hit], now: SimTime) {
        // Per hit once: the pattern, whether its decayed strength qualifies
        // it to resonate, and the strength resonance uses.
        let info: Vec<Option<(&Pattern, bool, f64)>> = hits
            .iter()
            .map(|h| {
                let p = self.patterns.get(&h.id)?;
                Some((p, p.decayed(&self.cfg, now) > RESONANT_STRENGTH, p.resonant_strength(&self.cfg, now)))
            })
            .collect();
        for (i, first) in info.iter().enumerate() {
            let Some((a, qa, sa)) = *first else { continue };
            for (j, second) in info.iter().enumerate().skip(i + 1) {
                let Some((b, qb, sb)) = *second else { continue };
                // Resonant needs a cosine above 0.7 with both qualifying;
                // strongly resonant needs cos^2 above 0.5 / (s_A s_B),
                // never reached when s_A s_B <= 0.5.
                let resonant_at = if qa && qb { RESONANT_COSINE } else { f64::INFINITY };
                let strong_at =
                    if sa * sb > STRONG_RESONANCE { (STRONG_RESONANCE / (sa * sb)).sqrt() } else { f64::INFINITY };
                let needed = resonant_at.min(strong_at);
                // A fast f32 screen; the exact f64 cosine decides whenever
                // the screen is within its error bound of the threshold.
                if !needed.is_finite() || f64::from(dot32(&a.vector, &b.vector)).abs() <= needed - COSINE_SCREEN {
                    continue;
                }
                let c = dot(&a.vector, &b.vector);
                let resonant = qa && qb && c > RESONANT_COSINE;
                let strong = strongly_resonant(c * c * sa * sb);
                for h in [i, j] {
                    hits[h].resonant |= resonant;
                    hits[h].strongly_resonant |= strong;
                }
            }
        }
    }

    /// Counts `agent`'s access to each pattern and resets its decay clock:
    /// decay runs again from this access, with the pattern's own S0 (the
    /// source: "next decay calculation uses new last_accessed"). When
    /// several are accessed together each gains the co-access bonus. Their
    /// index rows are rewritten in place.
    pub fn reinforce(&mut self, agent: &str, ids: &[u64], now: SimTime) -> Result<(), FieldError> {
        self.maybe_rebase(now)?;
        let together = ids.len() > 1;
        for id in ids {
            if let Some(p) = self.patterns.get_mut(id) {
                p.accesses += 1;
                p.last_access = now;
                if !p.accessed_by.contains(agent) {
                    p.accessed_by.insert(agent.to_string());
                }
                if together {
                    p.co_accesses = p.co_accesses.saturating_add(1);
                }
            }
        }
        self.refresh(ids)
    }

    /// Patterns archived at `now` (decay is applied at score time; nothing
    /// is removed).
    pub fn decay(&self, now: SimTime) -> Vec<u64> {
        self.patterns.values().filter(|p| self.archived(p, now)).map(|p| p.id).collect()
    }

    /// Resonance of two patterns at `now`: `cos^2 x s_A x s_B`, each
    /// strength the plan's, decay and boost included
    /// ([`Pattern::resonant_strength`]); `None` when either is unknown. A
    /// resonance that is not finite is an error naming the first pattern.
    pub fn resonance(&self, a: u64, b: u64, now: SimTime) -> Result<Option<f64>, FieldError> {
        let (Some(pa), Some(pb)) = (self.patterns.get(&a), self.patterns.get(&b)) else { return Ok(None) };
        let c = dot(&pa.vector, &pb.vector);
        let r = c * c * pa.resonant_strength(&self.cfg, now) * pb.resonant_strength(&self.cfg, now);
        if !r.is_finite() {
            return Err(pa.non_finite("resonance", r));
        }
        Ok(Some(r))
    }

    /// Two patterns are *strongly resonant* when their resonance exceeds
    /// 0.5 ([`strongly_resonant`]).
    pub fn strongly_resonant(&self, a: u64, b: u64, now: SimTime) -> bool {
        matches!(self.resonance(a, b, now), Ok(Some(r)) if strongly_resonant(r))
    }

    /// Every pattern's effective strength at `now` (decay, boost and the
    /// extra share together), by id, with whether it is live; a value that
    /// is not finite is an error naming the pattern.
    pub fn effective_strengths(&self, now: SimTime) -> Result<Vec<(u64, f64, bool)>, FieldError> {
        self.patterns
            .values()
            .map(|p| {
                let s = p.effective(&self.cfg, now);
                if s.is_finite() {
                    Ok((p.id, s, !self.archived(p, now)))
                } else {
                    Err(p.non_finite("effective strength", s))
                }
            })
            .collect()
    }

    /// The ratio of the largest to the smallest effective strength of the
    /// live patterns (`None` while nothing is live): the source's watch on
    /// one pattern drowning out the rest.
    pub fn strength_ratio(&self, now: SimTime) -> Result<Option<f64>, FieldError> {
        Ok(ratio_of(self.effective_strengths(now)?.iter().filter(|(_, _, live)| *live).map(|(_, s, _)| *s)))
    }

    /// Stability at `now` (see [`Stability`]).
    pub fn measure_stability(&self, now: SimTime) -> Stability {
        let live: Vec<(f64, u32)> = self
            .patterns
            .values()
            .filter(|p| !self.archived(p, now))
            .map(|p| (p.decayed(&self.cfg, now), p.accesses))
            .collect();
        let total: f64 = live.iter().map(|(s, _)| s).sum();
        if live.is_empty() || total <= 0.0 {
            return Stability { attractor_strength: 0.0, organisation: 0.0, stability: 0.0 };
        }
        let attractor_strength = live.iter().filter(|(_, a)| *a >= 2).map(|(s, _)| s).sum::<f64>() / total;
        let organisation = if live.len() < 2 {
            1.0
        } else {
            let h: f64 = live.iter().map(|(s, _)| s / total).filter(|p| *p > 0.0).map(|p| -p * p.ln()).sum();
            1.0 - h / (live.len() as f64).ln()
        };
        Stability { attractor_strength, organisation, stability: 0.6 * attractor_strength + 0.4 * organisation }
    }
}

/// Largest over smallest of `strengths` (`None` for none, or a zero).
pub fn ratio_of(strengths: impl Iterator<Item = f64>) -> Option<f64> {
    let (min, max) = strengths.fold((f64::INFINITY, 0.0f64), |(lo, hi), s| (lo.min(s), hi.max(s)));
    (min.is_finite() && min > 0.0).then(|| max / min)
}

#[cfg(test)]
mod tests;
