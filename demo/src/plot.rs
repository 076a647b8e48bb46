//! The SVG: origin calls in flight over time, one row per strategy, on one shared log scale
//! (a herd of thousands and a single call are both visible, and rows compare directly).

use std::path::Path;
use std::time::Duration;

use plotters::prelude::*;

use crate::clients::RunResult;
use crate::report::{duration, group};
use crate::scenario::Scenario;

/// Width of one time bucket of the plot: the highest concurrency inside it is drawn, so no
/// peak is lost to sampling.
const BUCKETS: usize = 800;
/// Where zero sits on the log axis (log 0 is not a number): below the line of 1 call.
const FLOOR: f64 = 0.5;

const COLORS: [RGBColor; 5] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
];

/// Writes the plot of `results` to `path` (creating its folder).
pub fn write(path: &Path, scenario: &Scenario, results: &[RunResult]) -> Result<(), String> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    draw(path, scenario, results).map_err(|e| format!("{}: {e}", path.display()))
}

fn draw(
    path: &Path,
    scenario: &Scenario,
    results: &[RunResult],
) -> Result<(), Box<dyn std::error::Error>> {
    let rows = results.len().max(1) as u32;
    let root = SVGBackend::new(path, (1100, 130 + 190 * rows)).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(90);
    header.draw_text(
        &format!(
            "One hot key expiring under {} concurrent clients: origin calls in flight",
            group(scenario.clients as u64)
        ),
        &("sans-serif", 26)
            .into_font()
            .style(FontStyle::Bold)
            .color(&BLACK),
        (20, 15),
    )?;
    header.draw_text(
        &format!(
            "origin call {}, ttl {}, grace {} (SWR rows), {} per strategy; \
             log scale, the same in every row",
            duration(scenario.origin),
            duration(scenario.ttl),
            duration(scenario.grace),
            duration(scenario.duration),
        ),
        &("sans-serif", 17).into_font().color(&RGBColor(80, 80, 80)),
        (20, 55),
    )?;
    // Clients stop at `duration`; the calls they started may still be running after it.
    let x_end = (scenario.duration + scenario.origin).as_secs_f64();
    let peak = results.iter().map(|r| r.origin.peak).max().unwrap_or(1);
    let y_end = 10f64.powi((f64::from(peak.max(1))).log10().floor() as i32 + 1);
    for (i, (area, r)) in body
        .split_evenly((results.len(), 1))
        .iter()
        .zip(results)
        .enumerate()
    {
        let color = COLORS[i % COLORS.len()];
        let last = i + 1 == results.len();
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!(
                    "{}: {} origin calls, at most {} at once; client p99 {}",
                    r.strategy.name(),
                    group(r.origin.calls),
                    group(u64::from(r.origin.peak)),
                    duration(r.latency(0.99)),
                ),
                ("sans-serif", 19).into_font().color(&color),
            )
            .margin_left(20)
            .margin_right(30)
            .x_label_area_size(if last { 50 } else { 28 })
            .y_label_area_size(90)
            .build_cartesian_2d(0f64..x_end, (FLOOR..y_end).log_scale())?;
        let mut mesh = chart.configure_mesh();
        mesh.y_desc("origin calls in flight")
            .y_label_formatter(&|v| {
                if *v < 1.0 {
                    "0".into()
                } else {
                    group(*v as u64)
                }
            })
            .x_label_formatter(&|v| format!("{v:.1} s"))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .light_line_style(WHITE);
        if last {
            mesh.x_desc("time since the run started");
        }
        mesh.draw()?;
        chart.draw_series(
            AreaSeries::new(steps(&r.origin.timeline, x_end), FLOOR, color.mix(0.35))
                .border_style(color.stroke_width(2)),
        )?;
    }
    root.present()?;
    Ok(())
}

/// The timeline as a step line over `BUCKETS` buckets, each at its highest concurrency.
fn steps(timeline: &[(Duration, u32)], x_end: f64) -> Vec<(f64, f64)> {
    let width = x_end / BUCKETS as f64;
    let mut highest = vec![0u32; BUCKETS];
    let mut current = 0u32;
    let mut events = timeline.iter().peekable();
    for (b, slot) in highest.iter_mut().enumerate() {
        let bucket_end = (b + 1) as f64 * width;
        let mut top = current;
        while let Some((_, now)) = events.next_if(|(at, _)| at.as_secs_f64() < bucket_end) {
            current = *now;
            top = top.max(current);
        }
        *slot = top;
    }
    let y = |c: u32| if c == 0 { FLOOR } else { f64::from(c) };
    let mut points = Vec::new();
    for (b, c) in highest.iter().enumerate() {
        let (x, value) = (b as f64 * width, y(*c));
        // A step only where the value changes: a flat stretch is one segment, not hundreds.
        if points.last().is_none_or(|&(_, last)| last != value) {
            if let Some(&(_, last)) = points.last() {
                points.push((x, last));
            }
            points.push((x, value));
        }
    }
    if let Some(&(_, last)) = points.last() {
        points.push((x_end, last));
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_keep_every_peak() {
        let ms = Duration::from_millis;
        // A one-call blip far shorter than a bucket still shows.
        let timeline = [
            (ms(0), 0),
            (ms(100), 1),
            (ms(101), 0),
            (ms(500), 3),
            (ms(700), 0),
        ];
        let points = steps(&timeline, 1.0);
        // Four changes of value, each two points, plus the start and the end.
        assert_eq!(points.len(), 2 + 2 * 4);
        let at = |t: f64| points.iter().rfind(|(x, _)| *x <= t).map(|p| p.1);
        assert_eq!(at(0.05), Some(FLOOR));
        assert_eq!(at(0.1001), Some(1.0));
        assert_eq!(at(0.3), Some(FLOOR));
        assert_eq!(at(0.6), Some(3.0));
        assert_eq!(at(0.9), Some(FLOOR));
    }
}
