//! The SVG charts of an experiment: decay, retention and stability.

use ::experiment::summary::Condition;
use ::experiment::Topic;
use agents::experiment::Mission;
use anyhow::Result;
use plotters::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;

pub type Plot<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

pub fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing a chart: {e}")
}

pub fn charts(out: &Path, missions: &[Mission], topics: &[Topic], main_lambda: f64) -> Result<()> {
    decay_chart(out, missions, topics, main_lambda)?;
    retention_chart(out, missions, topics, main_lambda)?;
    stability_chart(out, missions, topics, main_lambda)
}

/// The field mission of `topic`, repetition 1, at the main lambda.
fn field_rep1<'a>(missions: &'a [Mission], topic: &str, main_lambda: f64) -> Option<&'a Mission> {
    missions.iter().find(|m| m.record.topic == topic && m.record.rep == 1 && m.record.lambda == Some(main_lambda))
}

/// `decay.svg`: every pattern's strength over time, first topic.
fn decay_chart(out: &Path, missions: &[Mission], topics: &[Topic], main_lambda: f64) -> Result<()> {
    let Some(m) = topics.first().and_then(|t| field_rep1(missions, &t.name, main_lambda)) else { return Ok(()) };
    let path = out.join("decay.svg");
    let root: Plot<'_> = SVGBackend::new(&path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let mut series: BTreeMap<u64, Vec<(f64, f64)>> = BTreeMap::new();
    for p in &m.timeline {
        for (id, s) in &p.strengths {
            series.entry(*id).or_default().push((p.hours, *s));
        }
    }
    let max_x = m.timeline.last().map_or(1.0, |p| p.hours).max(1.0);
    let max_y = series.values().flatten().map(|(_, s)| *s).fold(0.1f64, f64::max) * 1.1;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Field pattern strength over time ({}, lambda {main_lambda})", m.record.topic),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0f64..max_x, 0f64..max_y)
        .map_err(plot_err)?;
    chart.configure_mesh().x_desc("simulated hours").y_desc("decayed strength").draw().map_err(plot_err)?;
    for (i, (_, pts)) in series.iter().enumerate() {
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), Palette99::pick(i).stroke_width(1)))
            .map_err(plot_err)?;
    }
    chart
        .draw_series(LineSeries::new([(0.0, 0.05), (max_x, 0.05)], BLACK.stroke_width(1)))
        .map_err(plot_err)?
        .label("archival threshold 0.05")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], BLACK.stroke_width(1)));
    chart.configure_series_labels().background_style(WHITE).border_style(BLACK).draw().map_err(plot_err)?;
    root.present().map_err(plot_err)
}

/// `retention.svg`: retention per topic and condition.
fn retention_chart(out: &Path, missions: &[Mission], topics: &[Topic], main_lambda: f64) -> Result<()> {
    let path = out.join("retention.svg");
    // Wide enough for every topic's name under its three bars.
    let width = 900.max(130 * topics.len() as u32);
    let root: Plot<'_> = SVGBackend::new(&path, (width, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let names: Vec<String> = topics.iter().map(|t| t.name.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Information retention per topic (mean over repetitions, field at lambda {main_lambda})"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0f64..names.len() as f64, 0f64..1.3f64)
        .map_err(plot_err)?;
    let labels = names.clone();
    chart
        .configure_mesh()
        .x_labels(names.len() * 2 + 1)
        .x_label_formatter(&move |x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("retention")
        .disable_x_mesh()
        .draw()
        .map_err(plot_err)?;
    for (cond, lambda, offset, colour) in [
        (Condition::MessagePassing, None, 0.06, RGBColor(120, 120, 200)),
        (Condition::Store, None, 0.36, RGBColor(120, 180, 120)),
        (Condition::Field, Some(main_lambda), 0.66, RGBColor(220, 120, 60)),
    ] {
        let bars: Vec<Rectangle<(f64, f64)>> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let rs: Vec<f64> = missions
                    .iter()
                    .filter(|m| &m.record.topic == n && m.record.condition == cond && m.record.lambda == lambda)
                    .map(|m| m.record.retention)
                    .collect();
                let mean = rs.iter().sum::<f64>() / rs.len().max(1) as f64;
                Rectangle::new([(i as f64 + offset, 0.0), (i as f64 + offset + 0.28, mean)], colour.filled())
            })
            .collect();
        chart
            .draw_series(bars)
            .map_err(plot_err)?
            .label(cond.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
    }
    // Above the bars (retention is at most 1), where it hides none.
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}

/// `stability.svg`: stability per phase.
fn stability_chart(out: &Path, missions: &[Mission], topics: &[Topic], main_lambda: f64) -> Result<()> {
    let path = out.join("stability.svg");
    let root: Plot<'_> = SVGBackend::new(&path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let max_phase = missions.iter().flat_map(|m| m.timeline.last()).map(|p| p.phase).max().unwrap_or(1) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Field stability per phase (repetition 1, lambda {main_lambda}; convergence above 0.75)"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(1f64..max_phase.max(2.0), 0f64..1f64)
        .map_err(plot_err)?;
    chart.configure_mesh().x_desc("phase").y_desc("stability").draw().map_err(plot_err)?;
    for (i, t) in topics.iter().enumerate() {
        if let Some(m) = field_rep1(missions, &t.name, main_lambda) {
            let colour = Palette99::pick(i);
            chart
                .draw_series(LineSeries::new(
                    m.timeline.iter().map(|p| (p.phase as f64, p.stability.stability)),
                    colour.stroke_width(2),
                ))
                .map_err(plot_err)?
                .label(t.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], Palette99::pick(i).stroke_width(2)));
        }
    }
    chart
        .draw_series(LineSeries::new([(1.0, 0.75), (max_phase.max(2.0), 0.75)], BLACK.stroke_width(1)))
        .map_err(plot_err)?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE)
        .border_style(BLACK)
        .draw()
        .map_err(plot_err)?;
    root.present().map_err(plot_err)?;
    Ok(())
}
