//! Per-phase timing: every phase is a tracing span plus an event with its duration, and the
//! duration is also handed back so callers can print tables without a subscriber.

use std::time::{Duration, Instant};

/// Runs `f` inside a `phase` span, logs its duration, and returns both.
pub(crate) fn timed<T>(phase: &'static str, f: impl FnOnce() -> T) -> (T, Duration) {
    let span = tracing::info_span!("phase", name = phase);
    let _guard = span.enter();
    let start = Instant::now();
    let out = f();
    let elapsed = start.elapsed();
    tracing::info!(
        phase,
        elapsed_ms = elapsed.as_secs_f64() * 1e3,
        "phase done"
    );
    (out, elapsed)
}
