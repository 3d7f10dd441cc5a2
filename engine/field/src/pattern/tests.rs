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
    assert!((f.patterns()[&1].bonus - 0.06).abs() < 1e-12);
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
/// on reinforcement, amplified by `0.2 x resonance`; others are not.
#[test]
fn resonant_hits_are_flagged_and_amplified() {
    let mut f = Field::new(4, FieldConfig::default()).expect("field");
    let a = f.inject("a", "a", "v", &[1.0, 0.1, 0.0, 0.0], 1.0, h(0)).expect("inject").id;
    let b = f.inject("b", "b", "v", &[1.0, 0.0, 0.1, 0.0], 1.0, h(0)).expect("inject").id;
    let c = f.inject("c", "c", "v", &[0.0, 0.0, 0.0, 1.0], 1.0, h(0)).expect("inject").id;
    let hits = f.query(&[1.0, 1.0, 1.0, 1.0], 3, h(0)).expect("query");
    let flags = |id| hits.iter().find(|x| x.id == id).map(|x| (x.resonant, x.strongly_resonant));
    assert_eq!((flags(a), flags(b), flags(c)), (Some((true, true)), Some((true, true)), Some((false, false))));
    let r = f.resonance(a, b, h(0)).expect("both exist");
    f.reinforce_answer("d", &hits, h(0)).expect("reinforce");
    let bonus = |id| f.patterns()[&id].bonus;
    assert!((bonus(a) - (0.2 * r + 0.02)).abs() < 1e-12, "amplified and co-accessed");
    assert!((bonus(c) - 0.02).abs() < 1e-12, "co-accessed only");
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
    let r = f.resonance(0, 1, h(0)).expect("both exist");
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
