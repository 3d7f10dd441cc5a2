use super::*;
use engine::rng::{Purpose, Stream};

fn h(x: u64) -> SimTime {
    SimTime(x * 3600)
}

fn random_vec(s: &mut Stream, dim: usize) -> Vec<f32> {
    (0..dim).map(|_| s.normal() as f32).collect()
}

/// Exactness: over many random fields, with strong but decayed
/// patterns close to the query, the top-k equals a brute-force ranking,
/// and a batch answers each query exactly as a single query does; also
/// after reinforcement rewrote rows and after a rebase.
#[test]
fn top_k_is_exact_against_brute_force() {
    let mut s = Stream::derive(5, 0, 0, Purpose::Testing);
    for case in 0..40 {
        let dim = 16;
        let mut f = Field::new(dim, FieldConfig::default()).expect("field");
        // Every third case lives 500 h in: the rows are rebased.
        let base = if case % 3 == 2 { 500 } else { 0 };
        let h = |x: u64| h(base + x);
        let q = random_vec(&mut s, dim);
        let n = 50 + s.below(200);
        for i in 0..n {
            // A third are near copies of the query, injected long ago.
            let (v, at) = if s.below(3) == 0 {
                (q.iter().map(|x| x + 0.05 * s.normal() as f32).collect::<Vec<_>>(), h(s.below(40) as u64))
            } else {
                (random_vec(&mut s, dim), h(40 + s.below(10) as u64))
            };
            f.inject("a", &format!("k{i}"), "v", &v, 0.2 + 3.0 * s.unit(), at).expect("inject");
            if s.below(5) == 0 {
                f.reinforce("a", &[i as u64], h(45)).expect("reinforce");
            }
        }
        let now = h(50);
        let k = 1 + s.below(10);
        let others: Vec<Vec<f32>> = (0..s.below(4)).map(|_| random_vec(&mut s, dim)).collect();
        let mut batch: Vec<&[f32]> = vec![&q];
        batch.extend(others.iter().map(Vec::as_slice));
        let answers = f.query_batch(&batch, k, now).expect("batch");
        for (b, query) in batch.iter().enumerate() {
            let qn = normalised(query).expect("nonzero");
            let mut brute: Vec<Hit> = f
                .patterns()
                .values()
                .filter(|p| !f.archived(p, now))
                .map(|p| {
                    let c = dot(&qn, &p.vector);
                    Hit {
                        id: p.id,
                        score: p.score(f.config(), now, c),
                        cosine: c,
                        resonant: false,
                        strongly_resonant: false,
                        query_resonant: c > RESONANT_COSINE && p.decayed(f.config(), now) > RESONANT_STRENGTH,
                    }
                })
                .collect();
            brute.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
            brute.truncate(k);
            f.flag_resonance(&mut brute, now);
            assert_eq!(answers[b], brute, "case {case}, query {b} (seed 5)");
            assert_eq!(f.query(query, k, now).expect("query"), answers[b], "batched = single, case {case}");
        }
    }
}

#[test]
fn decay_follows_the_closed_form_and_archives() {
    let cfg = FieldConfig::default();
    let mut f = Field::new(4, cfg.clone()).expect("field");
    f.inject("a", "k", "v", &[1.0, 0.0, 0.0, 0.0], 2.0, h(0)).expect("inject");
    let p = &f.patterns()[&0];
    for t in [0u64, 1, 7, 30] {
        let expected = 2.0 * (-0.1 * t as f64).exp();
        assert!((p.decayed(&cfg, h(t)) - expected).abs() < 1e-12);
    }
    // 2 e^(-0.1 t) < 0.05 from t = ln(40)/0.1 = 36.9 h.
    assert!(f.decay(h(36)).is_empty());
    assert_eq!(f.decay(h(37)), vec![0]);
    assert!(f.query(&[1.0, 0.0, 0.0, 0.0], 5, h(37)).expect("query").is_empty(), "archived patterns are left out");
}

#[test]
fn reinjection_reinforces_and_co_access_strengthens() {
    // Amplification off: this test is about the co-access bonus alone.
    let cfg = FieldConfig { permeability: 0.5, resonance_amplification: 0.0, ..Default::default() };
    let mut f = Field::new(4, cfg).expect("field");
    let a = f.inject("a", "k1", "v", &[1.0, 0.1, 0.0, 0.0], 2.0, h(0)).expect("inject");
    assert!((f.patterns()[&a.id].strength - 1.0).abs() < 1e-12, "strength x permeability");
    let again = f.inject("b", "k1", "v", &[0.0, 1.0, 0.0, 0.0], 2.0, h(1)).expect("inject");
    assert_eq!(again, Injected { id: a.id, reinforced: true });
    assert_eq!(f.patterns().len(), 1);
    f.inject("a", "k2", "v", &[1.0, 0.2, 0.0, 0.0], 2.0, h(1)).expect("inject");
    let before: f64 = f.patterns().values().map(|p| p.score(f.config(), h(2), 1.0)).sum();
    for t in 2..5 {
        let hits = f.query_and_reinforce("c", &[1.0, 0.15, 0.0, 0.0], 2, h(t)).expect("query");
        assert_eq!(hits.len(), 2);
    }
    let after: f64 = f.patterns().values().map(|p| p.score(f.config(), h(4), 1.0)).sum();
    assert!(after > before, "co-accessed patterns gain strength: {before} -> {after}");
    let p = &f.patterns()[&1];
    assert_eq!(p.co_accesses, 3);
    assert!((p.co_access(f.config()) - 0.06).abs() < 1e-12, "three co-accesses: +0.06 strength");
    assert!((p.base(f.config()) - (p.strength + 0.06)).abs() < 1e-12);
    assert!(p.extra(f.config()).abs() < 1e-12, "co-access is apart from the resonance share");
    // The bonus is bounded: after many more co-accesses it adds 1, no more.
    for t in 5..60 {
        f.query_and_reinforce("c", &[1.0, 0.15, 0.0, 0.0], 2, h(t)).expect("query");
    }
    let p = &f.patterns()[&1];
    assert_eq!(p.co_accesses, 58);
    assert!((p.co_access(f.config()) - MAX_CO_ACCESS).abs() < 1e-12);
    let plan = p.plan_strength(f.config(), h(60));
    assert!((p.score(f.config(), h(60), 0.5) - 0.5 * plan).abs() < 1e-12, "no amplification here");
}

/// The source, section 4.3: "next decay calculation uses new
/// last_accessed". With its lambda of 0.1, a pattern an agent queries
/// every three hours stays live for two days, while an untouched one
/// fades below 0.05 and is archived.
#[test]
fn re_access_resets_the_decay_clock() {
    let mut f = Field::new(4, FieldConfig::default()).expect("field");
    let used = f.inject("a", "used", "v", &[1.0, 0.0, 0.0, 0.0], 1.0, h(0)).expect("inject").id;
    let idle = f.inject("a", "idle", "v", &[0.0, 1.0, 0.0, 0.0], 1.0, h(0)).expect("inject").id;
    for t in (3..=48).step_by(3) {
        let hits = f.query_and_reinforce("b", &[1.0, 0.0, 0.0, 0.0], 1, h(t)).expect("query");
        assert_eq!(hits.iter().map(|x| x.id).collect::<Vec<_>>(), vec![used], "hour {t}");
    }
    let now = h(50);
    let p = &f.patterns()[&used];
    assert!((p.decayed(f.config(), now) - (-0.1f64 * 2.0).exp()).abs() < 1e-12, "decays from hour 48 with S0 = 1");
    assert_eq!(f.decay(now), vec![idle], "the idle pattern fades (e^-5 < 0.05), the used one does not");
}

/// The source, section 4.4: "decayed patterns can be resurrected if
/// re-accessed". Re-injecting a faded pattern's content brings back the
/// strength it carries and resets the clock.
#[test]
fn re_injection_resurrects_a_faded_pattern() {
    let mut f = Field::new(4, FieldConfig::default()).expect("field");
    let id = f.inject("a", "k", "v", &[1.0, 0.0, 0.0, 0.0], 1.0, h(0)).expect("inject").id;
    assert_eq!(f.decay(h(40)), vec![id], "faded after 40 hours");
    assert!(f.query(&[1.0, 0.0, 0.0, 0.0], 1, h(40)).expect("query").is_empty());
    let again = f.inject("b", "k", "v", &[1.0, 0.0, 0.0, 0.0], 0.8, h(40)).expect("inject");
    assert_eq!(again, Injected { id, reinforced: true });
    assert!(f.decay(h(40)).is_empty(), "live again");
    let p = &f.patterns()[&id];
    assert!((p.decayed(f.config(), h(40)) - 1.0).abs() < 1e-12, "the larger S0 (1, not 0.8), from hour 40");
    assert_eq!(f.query(&[1.0, 0.0, 0.0, 0.0], 1, h(41)).expect("query")[0].id, id);
}

/// Hits that resonate with each other in one answer are flagged and,
/// on reinforcement, amplified by `0.2 x resonance`; others are not. The
/// amplification is replaced at each answer, never summed.
#[test]
fn resonant_hits_are_flagged_and_amplified() {
    let mut f = Field::new(4, FieldConfig::default()).expect("field");
    let a = f.inject("a", "a", "v", &[1.0, 0.1, 0.0, 0.0], 1.0, h(0)).expect("inject").id;
    let b = f.inject("b", "b", "v", &[1.0, 0.0, 0.1, 0.0], 1.0, h(0)).expect("inject").id;
    let c = f.inject("c", "c", "v", &[0.0, 0.0, 0.0, 1.0], 1.0, h(0)).expect("inject").id;
    let hits = f.query(&[1.0, 1.0, 1.0, 1.0], 3, h(0)).expect("query");
    let flags = |id| hits.iter().find(|x| x.id == id).map(|x| (x.resonant, x.strongly_resonant));
    assert_eq!((flags(a), flags(b), flags(c)), (Some((true, true)), Some((true, true)), Some((false, false))));
    let r = f.resonance(a, b, h(0)).expect("finite").expect("both exist");
    f.reinforce_answer("d", &hits, h(0)).expect("reinforce");
    let amp = |f: &Field, id| f.patterns()[&id].amplification;
    assert!((amp(&f, a) - 0.2 * r).abs() < 1e-12, "amplified by 0.2 x resonance");
    assert!(amp(&f, c).abs() < f64::MIN_POSITIVE && f.patterns()[&c].co_accesses == 1, "co-accessed only");
    assert!((f.patterns()[&a].extra(f.config()) - MAX_EXTRA.min(0.2 * r)).abs() < 1e-12, "resonance alone");
    assert!((f.patterns()[&a].co_access(f.config()) - 0.02).abs() < 1e-12, "and one co-access, apart");
    // The same answer a hundred times: amplification stays what one
    // answer gives (its resonance grows only with the access boost and the
    // co-access bonus, both bounded), and the extra share stays capped at
    // 0.2.
    for _ in 0..100 {
        let hits = f.query(&[1.0, 1.0, 1.0, 1.0], 3, h(0)).expect("query");
        f.reinforce_answer("d", &hits, h(0)).expect("reinforce");
    }
    let r_now = f.resonance(a, b, h(0)).expect("finite").expect("both exist");
    // Strength 1 + co-access 1 (capped), times the boost 2 (capped): 4 for
    // each pattern, 16 for the pair.
    assert!((r_now - 16.0 * r).abs() < 1e-9, "only the bounded boost and bonus grew it: {r} -> {r_now}");
    assert!((amp(&f, a) - 0.2 * r_now).abs() < 1e-12, "one answer's amplification, not a hundred's");
    assert!((f.patterns()[&a].extra(f.config()) - MAX_EXTRA).abs() < 1e-12);
    // An answer in which `a` resonates with nothing replaces its
    // amplification by 0.
    let alone = f.query(&[1.0, 0.1, 0.0, 0.0], 1, h(1)).expect("query");
    assert_eq!(alone.iter().map(|x| x.id).collect::<Vec<_>>(), vec![a]);
    f.reinforce_answer("d", &alone, h(1)).expect("reinforce");
    assert!(amp(&f, a).abs() < f64::MIN_POSITIVE, "{}", amp(&f, a));
    assert!(matches!(
        Field::new(4, FieldConfig { resonance_amplification: 0.3, ..Default::default() }),
        Err(FieldError::Config { .. })
    ));
}

/// An index whose rows match the table but whose metric is L2 would
/// rank by distance; loading refuses it rather than answer wrongly.
#[test]
fn load_refuses_an_l2_index() {
    let mut f = Field::new(4, FieldConfig::default()).expect("field");
    f.inject("a", "k", "v", &[1.0, 0.0, 0.0, 0.0], 1.0, h(0)).expect("inject");
    let dir = std::env::temp_dir().join(format!("field-l2-{}", std::process::id()));
    f.save(&dir).expect("save");
    let ip = faiss::read_index(dir.join("field.index").to_str().expect("utf-8")).expect("read");
    let mut rows = vec![0.0f32; ip.d() as usize];
    rows.copy_from_slice(&Rows::guard(&mut f.index.lock(), ip.d() as usize).expect("guard").all()[..ip.d() as usize]);
    let mut l2 = IdMap::new(FlatIndexImpl::new_l2(ip.d()).expect("flat")).expect("id map");
    l2.add_with_ids(&rows, &[Idx::new(0)]).expect("add");
    faiss::write_index(&l2, dir.join("field.index").to_str().expect("utf-8")).expect("write");
    let err = Field::load(&dir).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.contains("L2") && err.contains("inner product"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn save_and_load_round_trip() {
    let mut s = Stream::derive(8, 0, 0, Purpose::Testing);
    let mut f = Field::new(8, FieldConfig::default()).expect("field");
    for i in 0..40 {
        f.inject("a", &format!("k{i}"), "v", &random_vec(&mut s, 8), 1.0 + s.unit(), h(i)).expect("inject");
    }
    let q = random_vec(&mut s, 8);
    f.query_and_reinforce("b", &q, 5, h(41)).expect("query");
    let dir = std::env::temp_dir().join(format!("field-save-{}", std::process::id()));
    f.save(&dir).expect("save");
    let g = Field::load(&dir).expect("load");
    assert_eq!(g.digest(), f.digest());
    assert_eq!(g.query(&q, 7, h(42)).expect("query"), f.query(&q, 7, h(42)).expect("query"));
    // A flipped byte of the table is a typed error naming the file,
    // the frame and its offset.
    let mut bytes = std::fs::read(dir.join("field.patterns")).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(dir.join("field.patterns"), &bytes).expect("damage");
    let Err(FieldError::Stored(e)) = Field::load(&dir) else { panic!("a damaged table must be a stored-file error") };
    let engine::Error::Corrupt { file, frame: 0, offset: 12, .. } = &*e else {
        panic!("expected a corrupt frame 0, got {e}")
    };
    assert!(file.ends_with("field.patterns"), "{file}");
}

#[test]
fn resonance_stability_and_bad_input() {
    let mut f = Field::new(2, FieldConfig::default()).expect("field");
    f.inject("a", "x", "1", &[1.0, 0.0], 1.0, h(0)).expect("inject");
    f.inject("a", "y", "1", &[0.9, 0.1], 1.0, h(0)).expect("inject");
    let r = f.resonance(0, 1, h(0)).expect("finite").expect("both exist");
    assert!((r - 0.9f64.powi(2) / (0.81f64 + 0.01)).abs() < 1e-6, "{r}");
    assert!(f.strongly_resonant(0, 1, h(0)));
    let s0 = f.measure_stability(h(0));
    assert!((s0.stability - (0.6 * s0.attractor_strength + 0.4 * s0.organisation)).abs() < 1e-12);
    f.reinforce("a", &[0], h(0)).expect("reinforce");
    f.reinforce("b", &[0], h(0)).expect("reinforce");
    assert!(f.measure_stability(h(0)).attractor_strength > 0.4);
    assert_eq!(
        f.inject("a", "z", "1", &[1.0, 0.0, 0.0], 1.0, h(0)),
        Err(FieldError::WrongDimension { expected: 2, got: 3 })
    );
    assert_eq!(f.query(&[1.0], 1, h(0)), Err(FieldError::WrongDimension { expected: 2, got: 1 }));
    assert_eq!(f.inject("a", "z", "1", &[0.0, 0.0], 1.0, h(0)), Err(FieldError::BadVector));
    assert_eq!(f.inject("a", "z", "1", &[1.0, 0.0], -1.0, h(0)), Err(FieldError::BadStrength(-1.0)));
}

/// The documented score, computed plainly from a reference model that
/// replays the same history by the rules of the module docs: accesses,
/// co-accesses (+0.02 strength each, at most 1), amplification as `0.2 x`
/// the strongest resonance in the
/// answer (replaced, never summed), the decay clock reset by access.
struct Reference {
    s0: f64,
    v: Vec<f32>,
    last: f64,
    accesses: u32,
    co: u32,
    amp: f64,
}

impl Reference {
    fn decayed(&self, now: f64) -> f64 {
        (self.s0 + (0.02 * f64::from(self.co)).min(1.0)) * (-0.1 * (now - self.last)).exp()
    }
    fn plan(&self, now: f64) -> f64 {
        self.decayed(now) * (1.0 + 0.05 * f64::from(self.accesses)).min(2.0)
    }
    fn score(&self, cos: f64, now: f64) -> f64 {
        cos * self.plan(now) * (1.0 + self.amp.min(0.2))
    }
}

fn cos(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum()
}

/// The reference answer to `q` at `now`: `(id, score)`, best first, ties
/// by id, archived patterns left out.
fn reference_top(refs: &[Reference], q: &[f32], k: usize, now: f64) -> Vec<(u64, f64)> {
    let mut all: Vec<(u64, f64)> = refs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.decayed(now) >= 0.05)
        .map(|(i, r)| (i as u64, r.score(cos(q, &r.v), now)))
        .collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(k);
    all
}

/// Applies the documented reinforcement of an answer to the reference.
fn reference_reinforce(refs: &mut [Reference], answer: &[u64], now: f64) {
    let ids: Vec<usize> = answer.iter().map(|i| *i as usize).collect();
    let qualifies = |a: usize, b: usize, refs: &[Reference]| {
        cos(&refs[a].v, &refs[b].v) > 0.7 && refs[a].decayed(now) > 0.1 && refs[b].decayed(now) > 0.1
    };
    let amps: Vec<f64> = ids
        .iter()
        .map(|a| {
            ids.iter()
                .filter(|b| *b != a && qualifies(*a, **b, refs))
                .map(|b| 0.2 * cos(&refs[*a].v, &refs[*b].v).powi(2) * refs[*a].plan(now) * refs[*b].plan(now))
                .fold(0.0, f64::max)
        })
        .collect();
    for (a, amp) in ids.iter().zip(amps) {
        let r = &mut refs[*a];
        r.amp = amp;
        r.accesses += 1;
        r.last = now;
        r.co += u32::from(ids.len() > 1);
    }
}

/// Property: over random fields, queries and reinforcement histories
/// (amplification and co-access on), every answer's top-k equals the
/// reference model's, id for id, score for score, and no pattern passes
/// the bound the co-access cap and the resonance cap set.
#[test]
fn top_k_matches_a_plain_recomputation_of_the_formula() {
    let mut s = Stream::derive(27, 0, 0, Purpose::Testing);
    for case in 0..30 {
        let dim = 8;
        let mut f = Field::new(dim, FieldConfig::default()).expect("field");
        let mut refs: Vec<Reference> = Vec::new();
        // A few topic centres, so that answers hold resonant pairs.
        let centres: Vec<Vec<f32>> = (0..3).map(|_| random_vec(&mut s, dim)).collect();
        let near = |s: &mut Stream, c: &[f32]| c.iter().map(|x| x + 0.3 * s.normal() as f32).collect::<Vec<f32>>();
        for step in 0..60u64 {
            let now = step as f64 / 2.0;
            let at = SimTime(step * 1800);
            if s.below(2) == 0 {
                let c = s.below(3);
                let v = near(&mut s, &centres[c]);
                let s0 = 0.1 + 2.0 * s.unit();
                let id = f.inject("a", &format!("k{}", refs.len()), "v", &v, s0, at).expect("inject").id;
                assert_eq!(id as usize, refs.len());
                let unit = normalised(&v).expect("nonzero");
                refs.push(Reference { s0, v: unit, last: now, accesses: 0, co: 0, amp: 0.0 });
            } else {
                let q = if s.below(4) == 0 {
                    random_vec(&mut s, dim)
                } else {
                    let c = s.below(3);
                    near(&mut s, &centres[c])
                };
                let k = 1 + s.below(6);
                let hits = f.query_and_reinforce("b", &q, k, at).expect("query");
                let qn = normalised(&q).expect("nonzero");
                let expected = reference_top(&refs, &qn, k, now);
                let got: Vec<u64> = hits.iter().map(|x| x.id).collect();
                let want: Vec<u64> = expected.iter().map(|x| x.0).collect();
                assert_eq!(got, want, "case {case}, step {step} (seed 27)");
                for (hit, (_, score)) in hits.iter().zip(&expected) {
                    assert!((hit.score - score).abs() <= 1e-9 * score.abs().max(1.0), "case {case}, step {step}");
                }
                reference_reinforce(&mut refs, &got, now);
            }
        }
        for (id, r) in refs.iter().enumerate() {
            let p = &f.patterns()[&(id as u64)];
            assert_eq!((p.accesses, p.co_accesses), (r.accesses, r.co), "case {case}, pattern {id}");
            assert!((p.amplification - r.amp).abs() < 1e-9, "case {case}, pattern {id}");
            // The bound: however often it was accessed and co-accessed, a
            // pattern is never stronger than (S0 + 1) x boost cap x 1.2,
            // its strength at its last access being its largest.
            let bound = (p.strength + MAX_CO_ACCESS) * f.config().boost_cap * (1.0 + MAX_EXTRA);
            assert!(p.effective(f.config(), p.last_access) <= bound * (1.0 + 1e-12), "case {case}, pattern {id}");
        }
    }
}

/// One pattern cannot answer every query across unrelated topics: with
/// amplification and co-access at their defaults and hundreds of
/// reinforcing queries, each answer holds only its own topic's patterns,
/// and the busiest pattern answers no more than its topic's share.
#[test]
fn no_pattern_dominates_unrelated_topics() {
    let topics = 4;
    let dim = 16;
    let mut s = Stream::derive(28, 0, 0, Purpose::Testing);
    let mut f = Field::new(dim, FieldConfig::default()).expect("field");
    let axis = |t: usize, s: &mut Stream| -> Vec<f32> {
        (0..dim).map(|i| if i == t { 1.0 } else { 0.05 * s.normal() as f32 }).collect()
    };
    let mut topic_of = Vec::new();
    for i in 0..24 {
        let t = i % topics;
        f.inject("a", &format!("k{i}"), "v", &axis(t, &mut s), 0.5 + s.unit(), h(0)).expect("inject");
        topic_of.push(t);
    }
    let mut answered = vec![0u32; topic_of.len()];
    let queries = 400;
    for n in 0..queries {
        let t = n % topics;
        let at = SimTime(n as u64 * 360);
        let hits = f.query_and_reinforce("b", &axis(t, &mut s), 3, at).expect("query");
        assert_eq!(hits.len(), 3);
        for x in &hits {
            assert_eq!(topic_of[x.id as usize], t, "query {n} on topic {t} answered by pattern {} of another", x.id);
            answered[x.id as usize] += 1;
        }
    }
    let busiest = answered.iter().copied().max().unwrap_or(0);
    assert!(busiest as usize <= queries / topics, "busiest answered {busiest} of {queries}");
    assert!(f.strength_ratio(SimTime(queries as u64 * 360)).expect("finite").is_some_and(|r| r.is_finite()));
}

/// A strength that is not finite, or beyond the field's bound, is refused
/// at injection; a pattern table that holds one is refused naming the
/// pattern, so no score, resonance or ratio can be inf or NaN.
#[test]
fn non_finite_strengths_are_refused_by_name() {
    let mut f = Field::new(2, FieldConfig::default()).expect("field");
    for bad in [f64::INFINITY, f64::NAN, 2.0 * MAX_STRENGTH] {
        let err = f.inject("a", "x", "1", &[1.0, 0.0], bad, h(0)).expect_err("refused");
        assert!(matches!(err, FieldError::BadStrength(_)));
        assert!(err.to_string().contains(&format!("from 0 to {MAX_STRENGTH:e}")), "{err}");
    }
    f.inject("a", "x", "1", &[1.0, 0.0], MAX_STRENGTH, h(0)).expect("the bound itself is fine");
    f.inject("a", "y", "1", &[1.0, 0.1], MAX_STRENGTH, h(0)).expect("inject");
    let r = f.resonance(0, 1, h(0)).expect("finite").expect("both");
    assert!(r.is_finite() && r > 1e11);
    let mut patterns: Vec<Pattern> = f.patterns().values().cloned().collect();
    patterns[1].strength = f64::INFINITY;
    let err = Field::from_patterns(2, FieldConfig::default(), patterns.clone()).err().expect("refused");
    assert_eq!(err.to_string(), "field pattern 1 (key \"y\"): its strength is inf, not a finite number in range");
    patterns[1].strength = 1.0;
    patterns[1].amplification = f64::NAN;
    let err = Field::from_patterns(2, FieldConfig::default(), patterns).err().expect("refused");
    assert!(matches!(err, FieldError::NonFinite { id: 1, what: "amplification", .. }), "{err}");
    // The boost cap is bounded too: with it, strength and resonance stay
    // far from overflow.
    let huge = FieldConfig { boost_cap: 1e200, ..FieldConfig::default() };
    assert!(matches!(Field::new(2, huge), Err(FieldError::Config { field: "boost_cap", .. })));
}

/// The monitor's ratio is over effective strength, and its alarm fires
/// when one pattern outweighs another by more than the threshold.
#[test]
fn the_strength_ratio_is_effective_and_alarms() {
    let cfg = FieldConfig { ratio_alarm: 10.0, ..FieldConfig::default() };
    let mut f = Field::new(2, cfg).expect("field");
    f.inject("a", "big", "1", &[1.0, 0.0], 1.0, h(0)).expect("inject");
    f.inject("a", "small", "1", &[0.0, 1.0], 0.2, h(0)).expect("inject");
    let mut t = crate::telemetry::Telemetry::default();
    let point = t.observe(&f, h(0)).expect("finite");
    assert!((point.strength_ratio.expect("live") - 5.0).abs() < 1e-12);
    assert!(!point.alarm);
    // Twenty accesses double the big one's boost while the small one only
    // decays: about 2 x 1 / (0.2 e^-0.2) = 12.2 > 10 at hour 2.
    for i in 0..20 {
        f.query_and_reinforce("b", &[1.0, 0.0], 1, SimTime(2 * 3600 + i)).expect("query");
    }
    let at = SimTime(2 * 3600 + 20);
    let point = t.observe(&f, at).expect("finite").clone();
    let big = f.patterns()[&0].effective(f.config(), at);
    let small = f.patterns()[&1].effective(f.config(), at);
    assert!((point.strength_ratio.expect("live") - big / small).abs() < 1e-9);
    assert!(point.alarm, "{:?}", point.strength_ratio);
    let m = t.monitor(10.0);
    assert_eq!((m.alarm_phases, m.first_alarm_phase, m.max_ratio_phase), (1, Some(2), Some(2)));
    assert!(m.alarmed());
}

/// The source's Q6: a pattern is resonant with a query when their cosine is
/// above 0.7 and its decayed strength above 0.1. The flag marks hits; it
/// filters nothing.
#[test]
fn a_hit_is_resonant_with_its_query_as_q6_defines_it() {
    let mut f = Field::new(2, FieldConfig::default()).expect("field");
    let near = [1.0f32, 0.2];
    let far = [0.2f32, 1.0];
    f.inject("a", "strong-near", "v", &near, 1.0, h(0)).expect("inject");
    f.inject("a", "weak-near", "v", &near, 0.08, h(0)).expect("inject");
    f.inject("a", "strong-far", "v", &far, 1.0, h(0)).expect("inject");
    let hits = f.query(&[1.0, 0.0], 3, h(0)).expect("query");
    assert_eq!(hits.len(), 3, "nothing is filtered");
    let flag = |key: &str| {
        let id = f.patterns().values().find(|p| p.key == key).expect("pattern").id;
        hits.iter().find(|x| x.id == id).expect("returned").query_resonant
    };
    assert!(flag("strong-near"), "cosine 0.98, strength 1");
    assert!(!flag("weak-near"), "cosine 0.98, but strength 0.08 is not above 0.1");
    assert!(!flag("strong-far"), "cosine 0.20");
    // Decay alone takes it below: 1.0 x e^(-0.1 x 24) = 0.09.
    let later = f.query(&[1.0, 0.0], 3, h(24)).expect("query");
    assert!(later.iter().all(|x| !x.query_resonant), "{later:?}");
}

/// "Strongly resonant" is the source's resonance > 0.5, one definition:
/// a pair with cosine 0.6 (not resonant: that needs 0.7) at strength 1.5
/// each has resonance 0.36 x 2.25 = 0.81 and is strongly resonant, in the
/// answer's flags, in the field's test and in the telemetry's count; at
/// strength 1 (resonance 0.36) it is neither.
#[test]
fn strongly_resonant_is_resonance_above_one_half_everywhere() {
    for (strength, strong) in [(1.5, true), (1.0, false)] {
        let mut f = Field::new(4, FieldConfig::default()).expect("field");
        let a = f.inject("a", "a", "v", &[1.0, 0.0, 0.0, 0.0], strength, h(0)).expect("inject").id;
        let b = f.inject("b", "b", "v", &[0.6, 0.8, 0.0, 0.0], strength, h(0)).expect("inject").id;
        let r = f.resonance(a, b, h(0)).expect("finite").expect("both exist");
        assert!((r - 0.36 * strength * strength).abs() < 1e-6, "{r}");
        let hits = f.query(&[1.0, 1.0, 0.0, 0.0], 2, h(0)).expect("query");
        assert!(hits.iter().all(|x| !x.resonant && x.strongly_resonant == strong), "{hits:?}");
        assert_eq!(f.strongly_resonant(a, b, h(0)), strong);
        let report = crate::telemetry::Telemetry::default().report(&f, h(0)).expect("report");
        assert_eq!(report.resonance.strongly_resonant_pairs, u64::from(strong));
    }
}
