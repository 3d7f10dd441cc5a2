//! Metrics of a final report against a topic's gold findings.

use super::topic::{Finding, Topic};

/// Whether `report` carries `finding`: every key phrase, case-insensitive.
pub fn carries(report: &str, finding: &Finding) -> bool {
    let r = report.to_lowercase();
    finding.phrases.iter().all(|p| r.contains(&p.to_lowercase()))
}

/// The ids of the findings a report carries.
pub fn present(report: &str, topic: &Topic) -> Vec<String> {
    topic.findings.iter().filter(|f| carries(report, f)).map(|f| f.id.clone()).collect()
}

/// Information retention: findings carried over all findings, in [0, 1].
pub fn retention(report: &str, topic: &Topic) -> f64 {
    present(report, topic).len() as f64 / topic.findings.len() as f64
}

/// Quality on a 1 to 5 scale: `1 + 4 x` the importance-weighted share of
/// the rubric (the gold findings) the report covers.
pub fn quality(report: &str, topic: &Topic) -> f64 {
    let got: u32 = topic.findings.iter().filter(|f| carries(report, f)).map(|f| f.importance).sum();
    1.0 + 4.0 * f64::from(got) / f64::from(topic.total_importance().max(1))
}

/// The cosine at which a report sentence counts as stating a finding, in
/// [`semantic_present`]. Paraphrases by a sentence model (MiniLM) score
/// about 0.7 to 0.9 against their source; unrelated sentences of one topic
/// about 0.2 to 0.5. The local hash embedder is lexical: there only near
/// copies cross it.
pub const SEMANTIC_THRESHOLD: f32 = 0.8;

/// The texts semantic retention embeds: each finding's home sentence (the
/// sentence of its passage that holds its key phrases), then each sentence
/// of the report.
pub fn semantic_texts(report: &str, topic: &Topic) -> (Vec<String>, Vec<String>) {
    let homes = topic.findings.iter().map(|f| super::judge::home_sentence(topic, f)).collect();
    (homes, super::topic::sentences(report))
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let n = norm(a) * norm(b);
    if n > 0.0 {
        dot / n
    } else {
        0.0
    }
}

/// The findings a report carries by key phrase or by meaning: a finding
/// counts when the report holds all its key phrases, or a sentence whose
/// vector is within [`SEMANTIC_THRESHOLD`] cosine of the finding's home
/// sentence. `homes` and `sentences` are the vectors of
/// [`semantic_texts`], in order.
pub fn semantic_present(report: &str, topic: &Topic, homes: &[Vec<f32>], sentences: &[Vec<f32>]) -> Vec<String> {
    topic
        .findings
        .iter()
        .zip(homes)
        .filter(|(f, h)| carries(report, f) || sentences.iter().any(|s| cosine(h, s) >= SEMANTIC_THRESHOLD))
        .map(|(f, _)| f.id.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-made reports against the grid-storage topic (importances 3, 2,
    /// 2, 3, 2, 1; total 13).
    #[test]
    fn metrics_on_hand_made_reports() {
        let t = Topic::builtin("grid-storage").expect("built in").expect("valid");
        let empty = "";
        let full = "Pack prices fell by about 90 percent. Four-hour batteries. Under one second. Interconnection queues take five years. Three quarters of battery cells. Fire safety rules.";
        let partial = "PACK PRICES FELL 90 PERCENT; fire safety rules matter; queues take five years";
        assert_eq!((retention(empty, &t), quality(empty, &t)), (0.0, 1.0));
        assert_eq!((retention(full, &t), quality(full, &t)), (1.0, 5.0));
        assert_eq!(present(partial, &t), vec!["f1", "f6"], "f4 needs both of its phrases");
        assert!((retention(partial, &t) - 2.0 / 6.0).abs() < 1e-12);
        assert!((quality(partial, &t) - (1.0 + 4.0 * 4.0 / 13.0)).abs() < 1e-12);
    }

    /// A finding counts by meaning when a report sentence's vector is near
    /// its home sentence's, and by key phrase as before.
    #[test]
    fn semantic_retention_counts_near_sentences_and_key_phrases() {
        let t = Topic::builtin("grid-storage").expect("built in").expect("valid");
        let report = "Battery packs now cost a tenth of what they did. Fire safety rules add cost.";
        let (homes, sentences) = semantic_texts(report, &t);
        assert_eq!((homes.len(), sentences.len()), (6, 2));
        assert!(homes[0].contains("90 percent"), "{}", homes[0]);
        let unit = |i: usize| {
            let mut v = vec![0.0f32; 8];
            v[i] = 1.0;
            v
        };
        // The first report sentence lies near f1's home; nothing else is near.
        let home_vecs: Vec<Vec<f32>> = (0..6).map(unit).collect();
        let mut near = unit(0);
        near[7] = 0.3;
        let found = semantic_present(report, &t, &home_vecs, &[near, unit(7)]);
        assert_eq!(found, vec!["f1", "f6"], "f1 by meaning, f6 by its key phrase");
        assert_eq!(semantic_present(report, &t, &home_vecs, &[unit(7), unit(7)]), vec!["f6"]);
    }
}
