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
}
