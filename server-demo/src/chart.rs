//! The compare chart: RSS over time for every run (one colour per mode, a
//! darker shade of it on the work-stealing runtime; log scale, since a
//! leaking mode grows a hundredfold) and the median req/s per mode as bars,
//! side by side in one SVG.

use std::path::Path;

use anyhow::anyhow;
use plotters::prelude::*;

use crate::compare::{Results, MIB};
use crate::mode::{Defects, Mode, Runtime};

fn colour(mode: Mode, defects: Defects, runtime: Runtime) -> RGBColor {
    let RGBColor(r, g, b) = match mode {
        Mode::ArcWeak => RGBColor(44, 160, 44),
        Mode::Arc => RGBColor(214, 39, 40),
        Mode::OrcNim16 => RGBColor(255, 127, 14),
        Mode::OrcNim16Faithful if defects == Defects::ALL => RGBColor(148, 103, 189),
        Mode::OrcNim16Faithful if defects.all_cyclic => RGBColor(140, 86, 75),
        Mode::OrcNim16Faithful if defects.shared_threshold => RGBColor(227, 119, 194),
        Mode::OrcNim16Faithful => RGBColor(127, 127, 127),
        Mode::Orc => RGBColor(31, 119, 180),
    };
    match runtime {
        Runtime::PerThread => RGBColor(r, g, b),
        Runtime::WorkStealing => RGBColor(r / 2, g / 2, b / 2),
    }
}

/// Draws `results` into an SVG file at `path`.
pub fn draw(results: &Results, path: &Path) -> anyhow::Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", path.display());
    // Room for every bar's label (ablations have six variants per runtime).
    let bars_width = 440.max(110 * results.summary.len() as u32);
    let root = SVGBackend::new(path, (760 + bars_width, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let (left, right) = root.split_horizontally(760);

    let t_min = results
        .runs
        .iter()
        .flat_map(|r| r.rss.iter().map(|p| p.0))
        .fold(0.0f64, f64::min);
    let t_max = results
        .runs
        .iter()
        .flat_map(|r| r.rss.iter().map(|p| p.0))
        .fold(results.config.duration_s, f64::max);
    let rss_mib = || {
        results
            .runs
            .iter()
            .flat_map(|r| r.rss.iter().map(|p| p.1 as f64 / MIB))
    };
    let rss_max = rss_mib().fold(1.0f64, f64::max);
    let rss_min = rss_mib().fold(rss_max, f64::min).max(0.5);
    let mut chart = ChartBuilder::on(&left)
        .caption("Server RSS during each run (log scale)", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(t_min..t_max, (rss_min * 0.8..rss_max * 1.25).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("seconds since the measured load started (negative: warm-up)")
        .y_desc("RSS (MiB)")
        .max_light_lines(1)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(|e| err(&e))?;
    for variant in &results.summary {
        let c = colour(variant.mode, variant.defects, variant.runtime);
        let mut labelled = false;
        for run in results.runs.iter().filter(|r| r.label == variant.label) {
            let series = chart
                .draw_series(LineSeries::new(
                    run.rss.iter().map(|&(t, b)| (t, b as f64 / MIB)),
                    c.stroke_width(2),
                ))
                .map_err(|e| err(&e))?;
            if !labelled {
                series.label(variant.label.as_str()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
                labelled = true;
            }
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;

    let n = results.summary.len();
    let rps_max = results.summary.iter().map(|s| s.rps).fold(1.0f64, f64::max);
    let names: Vec<&str> = results.summary.iter().map(|s| s.label.as_str()).collect();
    let mut bars = ChartBuilder::on(&right)
        .caption(
            "Requests per second (median; × arc-weak)",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n as f64, 0.0..rps_max * 1.15)
        .map_err(|e| err(&e))?;
    bars.configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - i as f64 - 0.5).abs() < 0.01 && i < names.len() {
                names[i].to_owned()
            } else {
                String::new()
            }
        })
        .y_desc("req/s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(|e| err(&e))?;
    bars.draw_series(results.summary.iter().enumerate().map(|(i, s)| {
        Rectangle::new(
            [(i as f64 + 0.15, 0.0), (i as f64 + 0.85, s.rps)],
            colour(s.mode, s.defects, s.runtime).filled(),
        )
    }))
    .map_err(|e| err(&e))?;
    bars.draw_series(results.summary.iter().enumerate().map(|(i, s)| {
        Text::new(
            match s.ratio_to_baseline {
                Some(r) => format!("{:.0} ({r:.2}×)", s.rps),
                None => format!("{:.0}", s.rps),
            },
            (i as f64 + 0.3, s.rps * 1.02 + rps_max * 0.03),
            ("sans-serif", 14),
        )
    }))
    .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
