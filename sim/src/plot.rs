//! SVG plots (plotters), one line per run: origin calls started per second and origin calls
//! outstanding over time (one figure, two panels, log scale so a herd of hundreds and a
//! single call are both visible), and client latency percentiles.

use std::path::Path;
use std::time::Duration;

use plotters::prelude::*;

use crate::report::{Outcome, human};

/// Time buckets across a plot; each keeps its highest concurrency, so no peak is lost.
const BUCKETS: usize = 400;
/// Where zero sits on a log axis (log 0 is not a number).
const FLOOR: f64 = 0.5;

const COLORS: [RGBColor; 8] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

type Draw = Result<(), Box<dyn std::error::Error>>;

/// A run's label in legends: strategy, and variant when there is one.
pub fn label(o: &Outcome) -> String {
    if o.row.variant.is_empty() {
        o.row.strategy.name().to_string()
    } else {
        format!("{} ({})", o.row.strategy.name(), o.row.variant)
    }
}

fn prepare(path: &Path) -> Result<(), String> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display())),
        None => Ok(()),
    }
}

/// Writes the origin figure of `runs` (same scenario, one line each) to `path`:
/// `title` on top, `until` the end of the time axis.
pub fn origin(path: &Path, title: &str, runs: &[Outcome], until: Duration) -> Result<(), String> {
    prepare(path)?;
    draw_origin(path, title, runs, until).map_err(|e| format!("{}: {e}", path.display()))
}

fn draw_origin(path: &Path, title: &str, runs: &[Outcome], until: Duration) -> Draw {
    let root = SVGBackend::new(path, (1100, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(60);
    header.draw_text(
        title,
        &("sans-serif", 24)
            .into_font()
            .style(FontStyle::Bold)
            .color(&BLACK),
        (20, 18),
    )?;
    let (top, bottom) = body.split_vertically(420);
    let x_end = until.as_secs_f64().max(1e-3);
    let width = x_end / BUCKETS as f64;
    let rates: Vec<Vec<(f64, f64)>> = runs.iter().map(|o| rate(&o.origin.starts, width)).collect();
    let outstanding: Vec<Vec<(f64, f64)>> = runs
        .iter()
        .map(|o| steps(&o.origin.timeline, width))
        .collect();
    let panels = [
        (
            &top,
            "Origin calls started",
            "calls started per second",
            &rates,
        ),
        (
            &bottom,
            "Origin calls outstanding (running or queued for a connection)",
            "calls outstanding",
            &outstanding,
        ),
    ];
    for (panel, caption, y_desc, series) in panels {
        let (area, key) = panel.split_horizontally(760);
        let peak = series.iter().flatten().map(|p| p.1).fold(1.0f64, f64::max);
        let y_end = 10f64.powi(peak.log10().floor() as i32 + 1);
        let mut chart = ChartBuilder::on(&area)
            .caption(caption, ("sans-serif", 19))
            .margin_left(20)
            .margin_right(30)
            .x_label_area_size(45)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..x_end, (FLOOR..y_end).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("virtual time (s)")
            .y_desc(y_desc)
            .y_label_formatter(&|v| {
                if *v < 1.0 {
                    "0".into()
                } else {
                    format!("{v:.0}")
                }
            })
            .x_label_formatter(&|v| format!("{v:.0}"))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .draw()?;
        for (i, points) in series.iter().enumerate() {
            let color = COLORS[i % COLORS.len()];
            // Earlier lines are wider, so lines drawn over them on equal values stay visible.
            let stroke = (runs.len() - i) as u32 + 1;
            chart.draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(stroke),
            ))?;
        }
        let entries: Vec<String> = runs
            .iter()
            .map(|o| {
                format!(
                    "{}: {} calls, peak {}",
                    label(o),
                    o.row.origin_calls,
                    o.row.peak_origin
                )
            })
            .collect();
        legend(&key, &entries)?;
    }
    root.present()?;
    Ok(())
}

/// The legend, beside the chart: one colour and one line of text per run (a label too
/// long for one line breaks after its colon).
fn legend(area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>, entries: &[String]) -> Draw {
    let font = ("sans-serif", 14).into_font().color(&BLACK);
    let mut y = 40;
    for (i, text) in entries.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        area.draw(&Rectangle::new([(8, y + 2), (26, y + 12)], color.filled()))?;
        let (name, rest) = text.split_once(": ").unwrap_or((text, ""));
        area.draw_text(name, &font, (34, y))?;
        area.draw_text(rest, &font, (34, y + 17))?;
        y += 42;
    }
    Ok(())
}

/// Calls started per second in each bucket, as a step line (zero drawn at the floor).
fn rate(starts: &[Duration], width: f64) -> Vec<(f64, f64)> {
    let mut counts = vec![0u32; BUCKETS];
    for s in starts {
        let b = (s.as_secs_f64() / width) as usize;
        if let Some(c) = counts.get_mut(b) {
            *c += 1;
        }
    }
    step_line(counts.iter().map(|&c| f64::from(c) / width), width)
}

/// Calls outstanding, the highest in each bucket, as a step line.
fn steps(timeline: &[(Duration, u32)], width: f64) -> Vec<(f64, f64)> {
    let mut highest = vec![0u32; BUCKETS];
    let mut current = 0u32;
    let mut events = timeline.iter().peekable();
    for (b, slot) in highest.iter_mut().enumerate() {
        let end = (b + 1) as f64 * width;
        let mut top = current;
        while let Some((_, now)) = events.next_if(|(at, _)| at.as_secs_f64() < end) {
            current = *now;
            top = top.max(current);
        }
        *slot = top;
    }
    step_line(highest.iter().map(|&c| f64::from(c)), width)
}

fn step_line(values: impl Iterator<Item = f64>, width: f64) -> Vec<(f64, f64)> {
    let mut points: Vec<(f64, f64)> = Vec::new();
    let mut last = None;
    let mut n = 0;
    for (b, v) in values.enumerate() {
        let v = if v <= 0.0 { FLOOR } else { v };
        let x = b as f64 * width;
        // A point only where the value changes: a flat stretch is one segment.
        if last != Some(v) {
            if let Some(l) = last {
                points.push((x, l));
            }
            points.push((x, v));
            last = Some(v);
        }
        n = b + 1;
    }
    if let Some(l) = last {
        points.push((n as f64 * width, l));
    }
    points
}

/// Writes the latency figure of `runs` to `path`: one line per run through its p50, p90,
/// p99, p99.9 and max.
pub fn latency(path: &Path, title: &str, runs: &[Outcome]) -> Result<(), String> {
    prepare(path)?;
    draw_latency(path, title, runs).map_err(|e| format!("{}: {e}", path.display()))
}

fn draw_latency(path: &Path, title: &str, runs: &[Outcome]) -> Draw {
    let root = SVGBackend::new(path, (1100, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(60);
    header.draw_text(
        title,
        &("sans-serif", 24)
            .into_font()
            .style(FontStyle::Bold)
            .color(&BLACK),
        (20, 18),
    )?;
    let (body, key) = body.split_horizontally(760);
    let names = ["p50", "p90", "p99", "p99.9", "max"];
    // Each percentile is a group of one bar per run plus a gap.
    let slots = runs.len().max(1) as i32 + 1;
    let x_end = slots * names.len() as i32;
    let top = runs
        .iter()
        .flat_map(|o| o.latency_ms.iter().copied())
        .fold(1.0f64, f64::max);
    // Log scale: a 60 s herd and a 200 ms wait both readable; zero sits at the floor.
    let floor = 0.1;
    let top = 10f64.powi(top.log10().floor() as i32 + 1);
    let mut chart = ChartBuilder::on(&body)
        .caption(
            "Client latency percentiles (log scale; a hit takes 0 ms, drawn at the floor)",
            ("sans-serif", 19),
        )
        .margin_left(20)
        .margin_right(30)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(0i32..x_end, (floor..top).log_scale())?;
    let center = (slots - 1) / 2;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(x_end as usize + 1)
        .x_desc("percentile of client requests")
        .y_desc("latency (ms)")
        .y_label_formatter(&|v| {
            if *v <= floor {
                "0".into()
            } else if *v < 1.0 {
                format!("{v}")
            } else {
                format!("{v:.0}")
            }
        })
        .x_label_formatter(&|x| {
            if x.rem_euclid(slots) == center {
                names
                    .get((x / slots) as usize)
                    .copied()
                    .unwrap_or("")
                    .to_string()
            } else {
                String::new()
            }
        })
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()?;
    // A zero bar is a sliver above the floor, so every run shows in every group.
    let thin = floor * 1.15;
    for (i, o) in runs.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let bars = o.latency_ms.iter().enumerate().map(|(g, &y)| {
            let x = g as i32 * slots + i as i32;
            Rectangle::new([(x, floor), (x + 1, y.max(thin))], color.filled())
        });
        chart.draw_series(bars)?;
    }
    let entries: Vec<String> = runs
        .iter()
        .map(|o| {
            format!(
                "{}: p50 {}, p99 {}, max {}",
                label(o),
                human(Duration::from_secs_f64(o.row.p50_ms / 1000.0)),
                human(Duration::from_secs_f64(o.row.p99_ms / 1000.0)),
                human(Duration::from_secs_f64(o.row.max_ms / 1000.0)),
            )
        })
        .collect();
    legend(&key, &entries)?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_keep_a_peak_shorter_than_a_bucket() {
        let ms = Duration::from_millis;
        let timeline = [(ms(100), 1), (ms(101), 0), (ms(500), 3), (ms(700), 0)];
        let width = 1.0 / BUCKETS as f64;
        let points = steps(&timeline, width);
        let at = |t: f64| points.iter().rfind(|(x, _)| *x <= t).map(|p| p.1);
        assert_eq!(at(0.05), Some(FLOOR));
        assert_eq!(at(0.1001), Some(1.0));
        assert_eq!(at(0.3), Some(FLOOR));
        assert_eq!(at(0.6), Some(3.0));
        assert_eq!(at(0.9), Some(FLOOR));
    }
}
