use super::*;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn same(a: [f64; POINTS], b: [f64; POINTS]) -> bool {
    a.iter().zip(b).all(|(x, y)| close(*x, y))
}

#[test]
fn the_pmf_sums_to_one_and_grows_with_similarity() {
    let g = [0.1, 0.2, 0.4, 0.3, 0.25];
    let p = set_pmf(&g, 0.0);
    assert!(close(p.iter().sum(), 1.0));
    assert!(close(p[0], 0.0), "the least similar point gets nothing without epsilon");
    // Denominator: 1.25 - 5 * 0.1 = 0.75.
    assert!(close(p[2], 0.3 / 0.75) && p[2] > p[3] && p[3] > p[4] && p[4] > p[1]);
    let eps = set_pmf(&g, 0.05);
    assert!(close(eps.iter().sum(), 1.0) && close(eps[0], 0.05 / 0.8), "epsilon goes to the least similar point");
    // Raising one similarity raises its probability.
    let mut higher = g;
    higher[3] = 0.35;
    assert!(set_pmf(&higher, 0.0)[3] > p[3]);
}

#[test]
fn ties_and_flat_similarities() {
    let flat = set_pmf(&[0.3; POINTS], 0.0);
    assert!(flat.iter().all(|p| close(*p, 0.2)), "{flat:?}");
    // Two points tie for least: the first takes epsilon.
    let p = set_pmf(&[0.1, 0.1, 0.5, 0.5, 0.3], 0.1);
    assert!(p[0] > 0.0 && close(p[1], 0.0) && close(p[2], p[3]));
}

#[test]
fn temperature_limits() {
    let p = set_pmf(&[0.1, 0.2, 0.4, 0.3, 0.25], 0.01);
    assert!(same(with_temperature(p, 1.0), p));
    let cold = with_temperature(p, 0.0);
    assert!(same(cold, [0.0, 0.0, 1.0, 0.0, 0.0]), "{cold:?}");
    let hot = with_temperature(p, 1e6);
    assert!(hot.iter().all(|x| (x - 0.2).abs() < 1e-3), "a high temperature flattens: {hot:?}");
    let sharper = with_temperature(p, 0.5);
    assert!(close(sharper.iter().sum(), 1.0) && sharper[2] > p[2]);
    assert!(same(with_temperature([0.2; POINTS], 0.0), [0.2; POINTS]));
}

#[test]
fn rate_averages_sets_and_expects() {
    let a: Vec<f32> = vec![1.0, 0.0];
    let anchors: Vec<Vec<f32>> = vec![vec![-1.0, 0.0], vec![0.0, 1.0], vec![0.5, 0.5], vec![0.8, 0.2], vec![1.0, 0.0]];
    let set: Vec<&[f32]> = anchors.iter().map(Vec::as_slice).collect();
    let (one, e1) = rate(&a, std::slice::from_ref(&set), 0.0, 1.0);
    let (two, e2) = rate(&a, &[set.clone(), set], 0.0, 1.0);
    assert!(same(one, two));
    // Cosines -1, 0, 0.707, 0.970, 1: less the minimum, 0, 1, 1.707, 1.970, 2 over 6.677.
    assert!(close(e1, e2) && (e1 - 25.0 / 6.677).abs() < 1e-3, "{e1}");
    assert!(one.windows(2).all(|w| w[0] < w[1]), "closer anchors get more: {one:?}");
    assert!(close(expected(&[0.0, 0.0, 1.0, 0.0, 0.0]), 3.0));
}

#[test]
fn ks_similarity_of_known_distributions() {
    let u = [0.2; POINTS];
    assert!(close(ks_similarity(&u, &u), 1.0));
    assert!(close(ks_similarity(&[1.0, 0.0, 0.0, 0.0, 0.0], &[0.0, 0.0, 0.0, 0.0, 1.0]), 0.0));
    // Cumulative 0.25, 0.5, 1.0 against 0.2, 0.4, 0.6: the largest gap is 0.4, after point 3.
    assert!(close(ks_similarity(&[0.25, 0.25, 0.5, 0.0, 0.0], &u), 0.6));
    assert!(same(pmf_of_counts(&[1, 1, 2, 0, 0]), [0.25, 0.25, 0.5, 0.0, 0.0]));
}

#[test]
fn anchor_sets_are_checked() {
    assert!(builtin_anchor_sets().len() >= 3);
    let four = "[[set]]\nname = \"x\"\nstatements = [\"a\", \"b\", \"c\", \"d\"]\n";
    let err = anchors::parse_anchor_sets(four, "four.toml").expect_err("four").to_string();
    assert!(err.contains("four.toml") && err.contains("has 4 statements"), "{err}");
    let dup = "[[set]]\nname = \"x\"\nstatements = [\"a\", \"b\", \"c\", \"b\", \"e\"]\n";
    let err = anchors::parse_anchor_sets(dup, "dup.toml").expect_err("dup").to_string();
    assert!(err.contains("statements 2 and 4 are the same"), "{err}");
    let empty = "[[set]]\nname = \"x\"\nstatements = [\"a\", \" \", \"c\", \"d\", \"e\"]\n";
    assert!(anchors::parse_anchor_sets(empty, "e.toml")
        .expect_err("empty")
        .to_string()
        .contains("statement 2 is empty"));
}
