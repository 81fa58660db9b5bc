//! The daemon's compute threads yield the CPU to its service threads.
//!
//! Every core of a busy prover runs rayon's global pool (the witness map, witness parsing and
//! checks). A service thread that wakes for a Status or Metrics call at the same priority can
//! wait a scheduler period behind them (tens of milliseconds on a saturated host); at a lower
//! priority the pool gives way at once. On a host that runs nothing else the pool still gets
//! every cycle the service does not use.

/// How much nicer than the daemon the pool's threads are.
pub const COMPUTE_NICE_INCREMENT: i32 = 5;

/// Builds rayon's global pool with its threads [`COMPUTE_NICE_INCREMENT`] nicer than the
/// calling thread. Call it before anything uses the pool: a pool already started keeps its
/// priority (logged).
pub fn nice_compute_pool() {
    use rustix::process::{getpriority_process, setpriority_process};
    let base = getpriority_process(None).unwrap_or(0);
    let nice = (base + COMPUTE_NICE_INCREMENT).min(19);
    let built = rayon::ThreadPoolBuilder::new()
        .thread_name(|i| format!("cuzk-compute-{i}"))
        .start_handler(move |_| {
            // On Linux a thread id names one thread: only this pool thread changes.
            if let Err(e) = setpriority_process(Some(rustix::thread::gettid()), nice) {
                tracing::warn!(error = %e, nice, "cannot lower a compute thread's priority");
            }
        })
        .build_global();
    if let Err(e) = built {
        tracing::warn!(error = %e, "rayon's pool was started already; its threads keep the service's priority");
    }
}
