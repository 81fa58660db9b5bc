//! The timeline as an SVG picture: per device, one lane per worker, each phase a bar coloured
//! by kind (CPU, copy, device under the GPU lock, waits), plus a lane of the GPU lock's
//! occupancy, so idle gaps and the overlap of pre-staging show at a glance. Written by hand:
//! rectangles and text need no plotting crate, and no font files.

use std::collections::BTreeSet;
use std::fmt::Write;

use crate::pb;

const LANE: f64 = 22.0;
const LEFT: f64 = 150.0;
const WIDTH: f64 = 1400.0;

fn colour(kind: &str, phase: &str) -> &'static str {
    match kind {
        "device" if phase.contains("NTT") || phase.contains("quotient") => "#d62728",
        "device" => "#e6550d",
        "copy" => "#3182bd",
        "wait" => "#bdbdbd",
        _ => "#31a354",
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An SVG of `spans` (seconds on the daemon's clock); `devices` names the device indices.
pub fn timeline(spans: &[pb::Span], devices: &[String]) -> String {
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
    let x = |t: f64| LEFT + (t - t0) / (t1 - t0) * WIDTH;
    // Lanes: per device, its GPU lock, then each worker.
    let lanes: BTreeSet<(u32, u32)> = spans.iter().map(|s| (s.device, s.worker)).collect();
    let devs: BTreeSet<u32> = lanes.iter().map(|l| l.0).collect();
    let mut rows: Vec<(u32, Option<u32>)> = Vec::new();
    for d in &devs {
        rows.push((*d, None));
        rows.extend(lanes.iter().filter(|l| l.0 == *d).map(|l| (*d, Some(l.1))));
    }
    let height = 60.0 + rows.len() as f64 * LANE + 40.0;
    let mut o = String::new();
    let _ = writeln!(
        o,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{height}" font-family="sans-serif" font-size="11">"#,
        LEFT + WIDTH + 20.0
    );
    let _ = writeln!(o, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        o,
        r#"<text x="10" y="18" font-size="14">cuzk timeline: {:.2} s, {} spans (green CPU, blue copy, orange/red device under the GPU lock, grey waits)</text>"#,
        t1 - t0,
        spans.len()
    );
    for (i, (d, w)) in rows.iter().enumerate() {
        let y = 40.0 + i as f64 * LANE;
        let dev = devices
            .get(*d as usize)
            .map_or(format!("device {d}"), |n| escape(n));
        let label = match w {
            None => format!("{dev}: GPU lock"),
            Some(w) => format!("  worker {w}"),
        };
        let _ = writeln!(o, r#"<text x="4" y="{}">{label}</text>"#, y + 14.0);
        let _ = writeln!(
            o,
            r##"<rect x="{LEFT}" y="{y}" width="{WIDTH}" height="{}" fill="#f7f7f7"/>"##,
            LANE - 4.0
        );
        for s in spans
            .iter()
            .filter(|s| s.device == *d && w.is_none_or(|w| s.worker == w))
        {
            if w.is_none() && s.kind != "device" {
                continue;
            }
            let (a, b) = (x(s.start_s), x(s.end_s));
            let _ = writeln!(
                o,
                r#"<rect x="{a:.2}" y="{y}" width="{:.2}" height="{}" fill="{}"><title>{} job {} {:.1} ms</title></rect>"#,
                (b - a).max(0.5),
                LANE - 4.0,
                colour(&s.kind, &s.phase),
                escape(&s.phase),
                escape(&s.job_id),
                (s.end_s - s.start_s) * 1e3
            );
        }
    }
    let axis = 40.0 + rows.len() as f64 * LANE + 12.0;
    for k in 0..=10 {
        let t = t0 + (t1 - t0) * k as f64 / 10.0;
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{axis}" text-anchor="middle">{:.2} s</text>"#,
            x(t),
            t - t0
        );
    }
    o.push_str("</svg>\n");
    o
}
