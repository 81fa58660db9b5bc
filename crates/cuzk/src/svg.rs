//! Pictures as SVG, drawn with plotters (text laid out with the embedded DejaVu font, so no
//! system fonts are needed):
//! - [`timeline`]: per device, a lane for its GPU lock, one per worker, one per read-ahead
//!   thread that computed witnesses ahead ("ahead r") and one for circuits' loads ("load"),
//!   each phase a bar coloured by kind (CPU, copy, device under the GPU lock, waits), so the
//!   idle gaps of the GPU and the overlap of pre-staging and synthesis show at a glance;
//! - [`scaling`]: time per proof against the circuit size.

use std::collections::BTreeSet;
use std::sync::Once;

use plotters::prelude::*;

use cuzk_daemon::pb;

/// A picture that could not be drawn (a plotting error, as text).
#[derive(Debug, thiserror::Error)]
#[error("drawing the picture: {0}")]
pub struct PlotError(String);

fn plot_err(e: impl std::fmt::Display) -> PlotError {
    PlotError(e.to_string())
}

fn font() {
    static FONT: Once = Once::new();
    FONT.call_once(|| {
        // Registering a well-formed embedded font only fails on bad bytes.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// A bar kind: its legend name, colour, and whether a span belongs to it.
type BarKind = (&'static str, RGBColor, fn(&pb::Span) -> bool);

/// The bar kinds, in legend order.
const KINDS: [BarKind; 5] = [
    ("CPU", RGBColor(0x31, 0xa3, 0x54), |s| s.kind == "cpu"),
    ("copy to the device", RGBColor(0x31, 0x82, 0xbd), |s| {
        s.kind == "copy"
    }),
    ("NTT / quotient", RGBColor(0xd6, 0x27, 0x28), |s| {
        s.kind == "device" && (s.phase.contains("NTT") || s.phase.contains("quotient"))
    }),
    (
        "MSM and other device work",
        RGBColor(0xe6, 0x55, 0x0d),
        |s| s.kind == "device" && !(s.phase.contains("NTT") || s.phase.contains("quotient")),
    ),
    ("waits", RGBColor(0xbd, 0xbd, 0xbd), |s| s.kind == "wait"),
];

/// An SVG of `spans` (seconds on the daemon's clock); `devices` names the device indices.
pub fn timeline(spans: &[pb::Span], devices: &[String]) -> Result<String, PlotError> {
    font();
    let t0 = spans
        .iter()
        .map(|s| s.start_s)
        .fold(f64::INFINITY, f64::min);
    let t1 = spans
        .iter()
        .map(|s| s.end_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let (t0, t1) = if t0.is_finite() && t1 > t0 {
        (t0, t1)
    } else {
        (0.0, 1.0)
    };
    // Lanes top down: per device, its GPU lock, then each worker.
    let lanes: BTreeSet<(u32, u32)> = spans.iter().map(|s| (s.device, s.worker)).collect();
    let devs: BTreeSet<u32> = lanes.iter().map(|l| l.0).collect();
    let mut rows: Vec<(u32, Option<u32>)> = Vec::new();
    for d in &devs {
        rows.push((*d, None));
        rows.extend(lanes.iter().filter(|l| l.0 == *d).map(|l| (*d, Some(l.1))));
    }
    let labels: Vec<String> = rows
        .iter()
        .map(|(d, w)| {
            let dev = devices
                .get(*d as usize)
                .cloned()
                .unwrap_or_else(|| format!("device {d}"));
            match w {
                None => format!("{dev}: GPU lock"),
                Some(w) if *w as usize == cuzk_scheduler::LOAD_LANE => format!("device {d} load"),
                Some(w) if *w as usize >= cuzk_scheduler::READ_AHEAD_LANE => format!(
                    "device {d} ahead {}",
                    *w as usize - cuzk_scheduler::READ_AHEAD_LANE
                ),
                Some(w) => format!("device {d} worker {w}"),
            }
        })
        .collect();
    let n = rows.len().max(1);
    let height = 140 + 26 * n as u32;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1500, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("cuzk timeline: {:.2} s, {} spans", t1 - t0, spans.len()),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(230)
            // The right fifth is left empty for the legend.
            .build_cartesian_2d(0.0..(t1 - t0) * 1.25, 0.0..n as f64)
            .map_err(plot_err)?;
        let label_of = |y: &f64| {
            let lane = n as f64 - y - 0.5;
            if (lane - lane.round()).abs() < 1e-6 && lane >= 0.0 {
                labels
                    .get(lane.round() as usize)
                    .cloned()
                    .unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(2 * n + 1)
            .y_label_formatter(&label_of)
            .x_desc("seconds")
            .x_label_formatter(&|t| format!("{t:.2}"))
            .draw()
            .map_err(plot_err)?;
        let lane_of = |s: &pb::Span, lock: bool| {
            rows.iter()
                .position(|r| *r == (s.device, if lock { None } else { Some(s.worker) }))
        };
        for (name, colour, belongs) in KINDS {
            let mut bars = Vec::new();
            for s in spans.iter().filter(|s| belongs(s)) {
                let mut lanes = vec![lane_of(s, false)];
                if s.kind == "device" {
                    lanes.push(lane_of(s, true));
                }
                for i in lanes.into_iter().flatten() {
                    let top = (n - i) as f64 - 0.1;
                    bars.push(Rectangle::new(
                        [(s.start_s - t0, top - 0.8), (s.end_s - t0, top)],
                        colour.filled(),
                    ));
                }
            }
            chart
                .draw_series(bars)
                .map_err(plot_err)?
                .label(name)
                .legend(move |(x, y)| {
                    Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled())
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(out)
}

/// One measured size of a scaling run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalingPoint {
    /// log2 of the constraints.
    pub log: u32,
    /// Wall time per proof in steady state (1 / throughput), ms.
    pub ms_per_proof: f64,
    /// Median latency of one proof, ms.
    pub p50_ms: f64,
}

/// An SVG of time per proof (and latency) against the circuit size, on log scales.
pub fn scaling(points: &[ScalingPoint], title: &str) -> Result<String, PlotError> {
    font();
    let (lo, hi) = points
        .iter()
        .fold((u32::MAX, 0), |(a, b), p| (a.min(p.log), b.max(p.log)));
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (0, 1) };
    let top = points
        .iter()
        .map(|p| p.ms_per_proof.max(p.p50_ms))
        .fold(1.0, f64::max);
    let bottom = points
        .iter()
        .map(|p| p.ms_per_proof.min(p.p50_ms))
        .fold(top, f64::min)
        .max(1e-3);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (900, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(15)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                (lo as f64 - 0.5)..(hi as f64 + 0.5),
                (bottom / 2.0..top * 2.0).log_scale(),
            )
            .map_err(plot_err)?;
        chart
            .configure_mesh()
            .x_desc("constraints (log2)")
            .y_desc("ms")
            .x_labels((hi - lo + 2) as usize)
            .x_label_formatter(&|x| {
                if (x - x.round()).abs() < 1e-6 {
                    format!("2^{}", x.round())
                } else {
                    String::new()
                }
            })
            .draw()
            .map_err(plot_err)?;
        type Series = (&'static str, RGBColor, fn(&ScalingPoint) -> f64);
        let series: [Series; 2] = [
            ("time per proof (1 / throughput)", RED, |p| p.ms_per_proof),
            ("latency p50", BLUE, |p| p.p50_ms),
        ];
        for (name, colour, value) in series {
            let pts: Vec<(f64, f64)> = points.iter().map(|p| (p.log as f64, value(p))).collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))
                .map_err(plot_err)?
                .label(name)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 16, y)], colour));
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, colour.filled())))
                .map_err(plot_err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(plot_err)?;
        root.present().map_err(plot_err)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(worker: u32, kind: &str, phase: &str, a: f64, b: f64) -> pb::Span {
        pb::Span {
            job_id: "j".into(),
            device: 0,
            worker,
            phase: phase.into(),
            kind: kind.into(),
            start_s: a,
            end_s: b,
        }
    }

    #[test]
    fn the_timeline_draws_a_lane_per_worker_and_the_gpu_lock() {
        let spans = [
            span(0, "cpu", "witness map", 0.0, 0.5),
            span(1, "copy", "upload a, b, c", 0.2, 0.4),
            span(0, "device", "MSM A", 0.5, 0.9),
            span(1, "device", "NTT", 0.9, 1.2),
        ];
        let svg = timeline(&spans, &["H200".into()]).unwrap();
        assert!(svg.starts_with("<svg"));
        for text in [
            "H200: GPU lock",
            "device 0 worker 0",
            "device 0 worker 1",
            "waits",
        ] {
            assert!(svg.contains(text), "{text} is drawn");
        }
        // One bar per worker span, and the lock lane repeats each device span.
        assert!(svg.matches("<rect").count() >= spans.len() + 2);
        assert!(
            timeline(&[], &[]).unwrap().starts_with("<svg"),
            "an empty run draws"
        );
    }

    #[test]
    fn the_scaling_plot_draws_each_size() {
        let pts = [20, 22, 24].map(|log| ScalingPoint {
            log,
            ms_per_proof: 10.0 * f64::from(1 << (log - 20)),
            p50_ms: 12.0 * f64::from(1 << (log - 20)),
        });
        let svg = scaling(&pts, "cuzk bench").unwrap();
        for text in ["2^20", "2^22", "2^24", "latency p50"] {
            assert!(svg.contains(text), "{text} is drawn");
        }
        assert_eq!(svg.matches("<circle").count(), 6);
    }
}
