//! `sim-cli experiment --sensitivity`: the scripted verdict as a function
//! of the scripted model's assumptions. The whole comparison is run again
//! (main lambda only) with the analyst condensing points to 6, 12, 24 and
//! 48 words or not at all, and with the writer's context at half, the
//! default and double. Each setting reports every criterion, and the sweep
//! says where the field stops winning on retention.

use super::charts::{plot_err, Plot};
use ::experiment::model::ANALYST_WORDS;
use ::experiment::summary::{summarise, Condition, Verdict};
use agents::experiment::{run_experiment, ExperimentSpec};
use anyhow::Result;
use plotters::prelude::*;
use serde::Serialize;
use std::path::Path;

/// The analyst's words per point swept (`None`: whole points).
pub const ANALYST_SETTINGS: [Option<usize>; 5] = [Some(6), Some(12), Some(24), Some(48), None];
/// The writer's context budgets swept, as multiples of the default.
pub const WRITER_FACTORS: [f64; 3] = [0.5, 1.0, 2.0];

/// One setting's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Point {
    /// Words per analyst point (`null`: whole points).
    pub analyst_words: Option<usize>,
    /// The writer's context budget in tokens.
    pub writer_context: u64,
    /// Mean retention of the field.
    pub field_retention: f64,
    /// Mean retention of message passing.
    pub message_passing_retention: f64,
    /// Each criterion's value and verdict: (key, value, verdict).
    pub criteria: Vec<(String, f64, Verdict)>,
    /// The recommendation at this setting.
    pub recommendation: String,
}

impl Point {
    fn retention_ratio(&self) -> f64 {
        self.criteria.iter().find(|c| c.0 == "retention").map_or(0.0, |c| c.1)
    }

    fn retention_passes(&self) -> bool {
        self.criteria.iter().any(|c| c.0 == "retention" && c.2 == Verdict::Pass)
    }
}

/// The sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Sensitivity {
    /// The analyst's condensation, at the default writer context.
    pub analyst_words: Vec<Point>,
    /// The writer's context, at the default condensation.
    pub writer_context: Vec<Point>,
    /// Where the field stops winning on retention, in words.
    pub finding: String,
}

async fn point(base: &ExperimentSpec, lambda: f64, words: Option<usize>, writer_context: u64) -> Result<Point> {
    let mut spec = base.clone();
    spec.analyst_words = words;
    spec.budgets.writer_context = writer_context;
    spec.lambdas = vec![lambda];
    spec.field_logs = None;
    let missions = run_experiment(&spec, |_, _| {}).await?;
    let records: Vec<_> = missions.into_iter().map(|m| m.record).collect();
    let s = summarise(&records, lambda, &[lambda]);
    let mean = |c: Condition| s.means.get(c.name()).map_or(0.0, |m| m.retention);
    Ok(Point {
        analyst_words: words,
        writer_context,
        field_retention: mean(Condition::Field),
        message_passing_retention: mean(Condition::MessagePassing),
        criteria: s.criteria.iter().map(|c| (c.key.clone(), c.value, c.verdict)).collect(),
        recommendation: s.recommendation.map(|r| r.action).unwrap_or_default(),
    })
}

fn words(w: Option<usize>) -> String {
    w.map_or("whole points".into(), |w| format!("{w} words"))
}

/// Runs the sweep on `base` (scripted agents) at `lambda`.
pub async fn sweep(base: &ExperimentSpec, lambda: f64) -> Result<Sensitivity> {
    let mut analyst = Vec::new();
    for w in ANALYST_SETTINGS {
        analyst.push(point(base, lambda, w, base.budgets.writer_context).await?);
    }
    let mut writer = Vec::new();
    for f in WRITER_FACTORS {
        let context = (base.budgets.writer_context as f64 * f).round() as u64;
        writer.push(point(base, lambda, Some(ANALYST_WORDS), context).await?);
    }
    let finding = match analyst.iter().position(|p| !p.retention_passes()) {
        None => "the field's retention lead passes at every condensation swept, whole points included".to_string(),
        Some(0) => format!(
            "the field's retention lead does not pass even when the analyst keeps {} per point",
            words(analyst[0].analyst_words)
        ),
        Some(i) => format!(
            "the field's retention lead passes while the analyst keeps at most {} per point (retention ratio {:.3}); \
             at {} it is {:.3}, and no longer passes",
            words(analyst[i - 1].analyst_words),
            analyst[i - 1].retention_ratio(),
            words(analyst[i].analyst_words),
            analyst[i].retention_ratio()
        ),
    };
    let finding = match writer.iter().find(|p| !p.retention_passes()) {
        None => format!("{finding}; it passes at every writer context swept"),
        Some(p) => format!(
            "{finding}; with the writer's context at {} tokens (default {}) the retention ratio is {:.3}, and it does \
             not pass",
            p.writer_context,
            base.budgets.writer_context,
            p.retention_ratio()
        ),
    };
    Ok(Sensitivity { analyst_words: analyst, writer_context: writer, finding })
}

/// The section of `report.md`.
pub fn markdown(s: &Sensitivity) -> String {
    let mut t = String::from(
        "\n## Sensitivity of the scripted verdict\n\nThe comparison run again under other assumptions of the scripted \
         model (main lambda only; `sensitivity.svg`). ",
    );
    t.push_str(&format!("In short: {}.\n\n", s.finding));
    t.push_str("| analyst keeps | writer context | retention field / message passing | ratio | quality gain | token ratio | latency ratio | recommendation |\n|---|---:|---|---:|---:|---:|---:|---|\n");
    for p in s.analyst_words.iter().chain(&s.writer_context) {
        let value = |k: &str| p.criteria.iter().find(|c| c.0 == k).map_or(f64::NAN, |c| c.1);
        t.push_str(&format!(
            "| {} | {} | {:.3} / {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {} |\n",
            words(p.analyst_words),
            p.writer_context,
            p.field_retention,
            p.message_passing_retention,
            value("retention"),
            value("quality"),
            value("tokens"),
            value("latency"),
            p.recommendation.replace('_', " ")
        ));
    }
    t
}

/// `sensitivity.svg`: retention of both conditions against the analyst's
/// words per point (whole points drawn at the right).
pub fn chart(out: &Path, s: &Sensitivity) -> Result<()> {
    let path = out.join("sensitivity.svg");
    let root: Plot<'_> = SVGBackend::new(&path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let n = s.analyst_words.len();
    let mut chart = ChartBuilder::on(&root)
        .caption("Retention against the scripted analyst's words per point", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..1.05f64)
        .map_err(plot_err)?;
    let labels: Vec<String> = s.analyst_words.iter().map(|p| words(p.analyst_words)).collect();
    chart
        .configure_mesh()
        .x_labels(n)
        .x_label_formatter(&move |x| labels.get(x.round().max(0.0) as usize).cloned().unwrap_or_default())
        .y_desc("mean retention")
        .draw()
        .map_err(plot_err)?;
    let series = [
        ("field", RGBColor(220, 120, 60), s.analyst_words.iter().map(|p| p.field_retention).collect::<Vec<_>>()),
        (
            "message passing",
            RGBColor(120, 120, 200),
            s.analyst_words.iter().map(|p| p.message_passing_retention).collect(),
        ),
    ];
    for (name, colour, ys) in series {
        chart
            .draw_series(LineSeries::new(ys.iter().enumerate().map(|(i, y)| (i as f64, *y)), colour.stroke_width(2)))
            .map_err(plot_err)?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}
