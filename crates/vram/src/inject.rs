//! Failure injection at the driver calls, for the reliability suite: count every call of each
//! kind and fail the k-th call of one kind, process-wide, so a whole proof (on all of its
//! threads) can be driven through every failure site of the real CUDA runtime.
//! [`crate::FakeBackend`]'s per-instance [`crate::Faults`] serve the CPU tests, which run in
//! parallel; this one is for a GPU test that owns the process. Off, a site costs one relaxed
//! atomic load.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

/// A kind of driver call that can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Site {
    DeviceAlloc,
    /// Pinned host allocation.
    PinnedAlloc,
    HostRegister,
    StreamCreate,
    EventCreate,
    Launch,
    /// Host-device copies and memsets.
    Copy,
}

impl Site {
    pub const ALL: [Site; 7] = [
        Site::DeviceAlloc,
        Site::PinnedAlloc,
        Site::HostRegister,
        Site::StreamCreate,
        Site::EventCreate,
        Site::Launch,
        Site::Copy,
    ];

    fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Site::DeviceAlloc => "device allocation",
            Site::PinnedAlloc => "pinned allocation",
            Site::HostRegister => "host registration",
            Site::StreamCreate => "stream creation",
            Site::EventCreate => "event creation",
            Site::Launch => "kernel launch",
            Site::Copy => "copy",
        })
    }
}

/// The driver error name an injected failure reports.
pub const INJECTED: &str = "CUZK_INJECTED_FAILURE";

static ON: AtomicBool = AtomicBool::new(false);
static CALLS: [AtomicU64; 7] = [const { AtomicU64::new(0) }; 7];
/// (site index + 1) << 48 | k; 0 when nothing is armed.
static ARMED: AtomicU64 = AtomicU64::new(0);
static OWNER: Mutex<()> = Mutex::new(());

/// Counting (and optionally failing) is on while this lives; one at a time per process.
#[derive(Debug)]
pub struct Injection {
    _owner: MutexGuard<'static, ()>,
}

impl Injection {
    /// Starts counting from zero; with `fail = Some((site, k))`, the k-th call (1-based) of
    /// `site` from now fails.
    pub fn start(fail: Option<(Site, u64)>) -> Injection {
        let owner = OWNER.lock();
        for c in &CALLS {
            c.store(0, Ordering::SeqCst);
        }
        let armed = fail.map_or(0, |(s, k)| {
            assert!(k > 0 && k < 1 << 48, "k is 1-based");
            ((s.index() as u64 + 1) << 48) | k
        });
        ARMED.store(armed, Ordering::SeqCst);
        ON.store(true, Ordering::SeqCst);
        Injection { _owner: owner }
    }

    /// Calls of `site` counted so far.
    pub fn calls(&self, site: Site) -> u64 {
        CALLS[site.index()].load(Ordering::SeqCst)
    }

    /// Whether the armed failure has been delivered.
    pub fn fired(&self) -> bool {
        let a = ARMED.load(Ordering::SeqCst);
        a != 0 && CALLS[((a >> 48) - 1) as usize].load(Ordering::SeqCst) >= a & ((1 << 48) - 1)
    }
}

impl Drop for Injection {
    fn drop(&mut self) {
        ON.store(false, Ordering::SeqCst);
        ARMED.store(0, Ordering::SeqCst);
    }
}

/// Called by each site before its driver call: true when this call is to fail.
pub fn fails(site: Site) -> bool {
    if !ON.load(Ordering::Relaxed) {
        return false;
    }
    let n = CALLS[site.index()].fetch_add(1, Ordering::SeqCst) + 1;
    let a = ARMED.load(Ordering::SeqCst);
    a >> 48 == site.index() as u64 + 1 && n == a & ((1 << 48) - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kth_call_of_the_armed_site_fails_and_nothing_else() {
        let inj = Injection::start(Some((Site::Launch, 3)));
        let got: Vec<bool> = (0..5).map(|_| fails(Site::Launch)).collect();
        assert_eq!(got, [false, false, true, false, false]);
        assert!(!fails(Site::Copy));
        assert_eq!(inj.calls(Site::Launch), 5);
        assert_eq!(inj.calls(Site::Copy), 1);
        assert!(inj.fired());
        drop(inj);
        assert!(!fails(Site::Launch), "off once the injection ends");
        let inj = Injection::start(None);
        assert!(!fails(Site::DeviceAlloc));
        assert_eq!(inj.calls(Site::DeviceAlloc), 1, "counts start from zero");
        assert!(!inj.fired());
    }
}
