//! Pure accounting: how many bytes may be in use at once, with RAII reservations and a fair
//! (first come, first served) blocking acquire. No CUDA here, so all of it is tested on the CPU.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::error::{Result, VramError};

/// A byte budget shared by clones (one per device, one for pinned host memory). Its `total` is
/// fixed; its `limit` (at most `total`) is what may be held now, lowered while another process
/// holds memory the budget counted on (see `Vram::refresh_limit`).
#[derive(Clone)]
pub struct Budget {
    inner: Arc<Inner>,
}

struct Inner {
    kind: &'static str,
    total: u64,
    state: Mutex<State>,
    cond: Condvar,
    /// Bytes of `in_use` that the driver has actually handed out (device buffers).
    allocated: AtomicU64,
    /// Caches holding idle bytes of this budget that they give back on demand.
    reclaimers: Mutex<Vec<Weak<dyn Reclaim>>>,
}

/// A cache that keeps memory of a [`Budget`] between uses (e.g. an MSM context's scratch) and
/// gives it back on demand: registered with [`Budget::add_reclaimer`], its idle bytes count as
/// [`Budget::available`], and a request that does not fit the free bytes first has the caches
/// free theirs. So a cache never makes another request of the budget fail or wait.
pub trait Reclaim: Send + Sync {
    /// Bytes of the budget this cache holds idle (what [`Reclaim::reclaim`] would return).
    fn reclaimable(&self) -> u64;
    /// Frees the idle bytes; they are back in the budget when this returns. Must not call
    /// into the budget while holding a lock its users hold while calling the budget.
    fn reclaim(&self);
}

struct State {
    limit: u64,
    in_use: u64,
    peak: u64,
    next_ticket: u64,
    /// Tickets of blocked `acquire` calls, oldest first. Only the front may take bytes, so a
    /// large waiter is never overtaken by later small ones.
    queue: VecDeque<u64>,
}

impl fmt::Debug for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.inner.state.lock();
        f.debug_struct("Budget")
            .field("kind", &self.inner.kind)
            .field("total", &self.inner.total)
            .field("limit", &s.limit)
            .field("in_use", &s.in_use)
            .field("peak", &s.peak)
            .field("waiters", &s.queue.len())
            .finish()
    }
}

impl Budget {
    /// A budget of `total` bytes; `kind` ("device", "host") only labels errors.
    pub fn new(kind: &'static str, total: u64) -> Self {
        Self {
            inner: Arc::new(Inner {
                kind,
                total,
                state: Mutex::new(State {
                    limit: total,
                    in_use: 0,
                    peak: 0,
                    next_ticket: 0,
                    queue: VecDeque::new(),
                }),
                cond: Condvar::new(),
                allocated: AtomicU64::new(0),
                reclaimers: Mutex::new(Vec::new()),
            }),
        }
    }

    pub fn kind(&self) -> &'static str {
        self.inner.kind
    }
    pub fn total(&self) -> u64 {
        self.inner.total
    }
    /// What may be held now: `total`, or less while another process holds memory.
    pub fn limit(&self) -> u64 {
        self.inner.state.lock().limit
    }
    /// Sets the limit (clamped to `total`). Holders keep what they have, even above a lowered
    /// limit; new requests wait until they fit under it.
    pub fn set_limit(&self, bytes: u64) {
        self.inner.state.lock().limit = bytes.min(self.inner.total);
        self.inner.cond.notify_all();
    }
    pub fn in_use(&self) -> u64 {
        self.inner.state.lock().in_use
    }
    /// Bytes of [`Self::in_use`] backed by driver allocations now.
    pub fn allocated(&self) -> u64 {
        self.inner.allocated.load(Ordering::SeqCst)
    }
    pub(crate) fn note_allocated(&self, bytes: u64) {
        self.inner.allocated.fetch_add(bytes, Ordering::SeqCst);
    }
    pub(crate) fn note_freed(&self, bytes: u64) {
        self.inner.allocated.fetch_sub(bytes, Ordering::SeqCst);
    }
    /// Highest `in_use` seen since creation.
    pub fn peak(&self) -> u64 {
        self.inner.state.lock().peak
    }
    /// Bytes a request can get now: the free bytes plus what caches hold idle
    /// ([`Reclaim`]); a request larger than [`Self::free`] makes the caches give theirs back.
    pub fn available(&self) -> u64 {
        self.free().saturating_add(self.reclaimable())
    }
    /// Bytes not held by anyone (`limit - in_use`), not counting idle cached bytes.
    pub fn free(&self) -> u64 {
        let s = self.inner.state.lock();
        s.limit.saturating_sub(s.in_use)
    }
    /// Bytes held idle by registered caches, which they give back on demand.
    pub fn reclaimable(&self) -> u64 {
        self.reclaimers().iter().map(|r| r.reclaimable()).sum()
    }
    /// Registers a cache of this budget's memory (see [`Reclaim`]); dropped caches are
    /// forgotten.
    pub fn add_reclaimer(&self, r: Weak<dyn Reclaim>) {
        let mut v = self.inner.reclaimers.lock();
        v.retain(|w| w.strong_count() > 0);
        v.push(r);
    }
    fn reclaimers(&self) -> Vec<Arc<dyn Reclaim>> {
        self.inner
            .reclaimers
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    }
    /// Has caches give back idle bytes, one cache at a time, until `bytes` are free or
    /// nothing idle is left. Called without the state lock: reclaiming frees memory, which
    /// returns budget.
    fn reclaim_for(&self, bytes: u64) {
        for r in self.reclaimers() {
            if self.free() >= bytes {
                return;
            }
            if r.reclaimable() > 0 {
                r.reclaim();
            }
        }
    }
    /// Has every registered cache give back its idle bytes (e.g. before comparing what the
    /// callers hold with an earlier count).
    pub fn reclaim_all(&self) {
        for r in self.reclaimers() {
            if r.reclaimable() > 0 {
                r.reclaim();
            }
        }
    }
    /// True if both handles refer to the same budget.
    pub fn same_as(&self, other: &Budget) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
    /// Number of blocked `acquire` calls.
    pub fn waiters(&self) -> usize {
        self.inner.state.lock().queue.len()
    }

    fn check_size(&self, bytes: u64) -> Result<()> {
        if bytes > self.inner.total {
            return Err(VramError::ExceedsBudget {
                kind: self.inner.kind,
                requested: bytes,
                total: self.inner.total,
            });
        }
        Ok(())
    }

    fn take(&self, s: &mut State, bytes: u64) -> Reservation {
        s.in_use += bytes;
        s.peak = s.peak.max(s.in_use);
        Reservation {
            budget: self.clone(),
            bytes,
        }
    }

    /// Takes `bytes` now if they are available (free, or idle in caches, which give them
    /// back) and nobody is queued ahead; never blocks.
    pub fn try_acquire(&self, bytes: u64) -> Option<Reservation> {
        if let Some(r) = self.try_take(bytes) {
            return Some(r);
        }
        if bytes > self.available() || self.waiters() > 0 {
            return None; // reclaiming would not make it fit
        }
        self.reclaim_for(bytes);
        self.try_take(bytes)
    }

    fn try_take(&self, bytes: u64) -> Option<Reservation> {
        let mut s = self.inner.state.lock();
        (s.queue.is_empty() && s.limit.saturating_sub(s.in_use) >= bytes)
            .then(|| self.take(&mut s, bytes))
    }

    /// Like [`try_acquire`](Self::try_acquire) but says why it failed.
    pub fn try_acquire_or_err(&self, bytes: u64) -> Result<Reservation> {
        self.check_size(bytes)?;
        self.try_acquire(bytes)
            .ok_or_else(|| VramError::OutOfBudget {
                kind: self.inner.kind,
                requested: bytes,
                available: self.available(),
            })
    }

    /// Waits up to `timeout` for `bytes`, first come first served. A request larger than the
    /// whole budget fails at once with [`VramError::ExceedsBudget`].
    pub fn acquire(&self, bytes: u64, timeout: Duration) -> Result<Reservation> {
        self.check_size(bytes)?;
        let start = Instant::now();
        let deadline = start.checked_add(timeout);
        if let Some(r) = self.try_acquire(bytes) {
            return Ok(r);
        }
        let mut s = self.inner.state.lock();
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        s.queue.push_back(ticket);
        loop {
            if s.queue.front() == Some(&ticket) && s.limit.saturating_sub(s.in_use) >= bytes {
                s.queue.pop_front();
                let r = self.take(&mut s, bytes);
                // The next in line may fit too.
                self.inner.cond.notify_all();
                return Ok(r);
            }
            if s.queue.front() == Some(&ticket) {
                // First in line: bytes a cache kept since the last wake-up are ours to take.
                let need = bytes.saturating_sub(s.limit.saturating_sub(s.in_use));
                if MutexGuard::unlocked(&mut s, || self.reclaimable() >= need.max(1)) {
                    MutexGuard::unlocked(&mut s, || self.reclaim_for(bytes));
                    continue;
                }
            }
            let timed_out = match deadline {
                Some(d) => self.inner.cond.wait_until(&mut s, d).timed_out(),
                None => {
                    self.inner.cond.wait(&mut s);
                    false
                }
            };
            if timed_out
                && !(s.queue.front() == Some(&ticket) && s.limit.saturating_sub(s.in_use) >= bytes)
            {
                s.queue.retain(|&t| t != ticket);
                // Whoever was behind us may now be at the front.
                self.inner.cond.notify_all();
                return Err(VramError::Timeout {
                    kind: self.inner.kind,
                    requested: bytes,
                    waited: start.elapsed(),
                });
            }
        }
    }

    fn give_back(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut s = self.inner.state.lock();
        debug_assert!(s.in_use >= bytes, "budget underflow");
        s.in_use -= bytes;
        drop(s);
        self.inner.cond.notify_all();
    }
}

/// Bytes held from a [`Budget`]; returned when dropped.
#[must_use = "dropping a Reservation returns its bytes immediately"]
pub struct Reservation {
    budget: Budget,
    bytes: u64,
}

impl fmt::Debug for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservation")
            .field("kind", &self.budget.kind())
            .field("bytes", &self.bytes)
            .finish()
    }
}

impl Reservation {
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    /// Returns `bytes` of this reservation to the budget early.
    pub fn release_part(&mut self, bytes: u64) -> Result<()> {
        if bytes > self.bytes {
            return Err(VramError::InvalidSize(format!(
                "release_part({bytes}) but only {} held",
                self.bytes
            )));
        }
        self.bytes -= bytes;
        self.budget.give_back(bytes);
        Ok(())
    }

    /// Moves `bytes` of this reservation into a new one (e.g. to hand to a buffer); the budget's
    /// `in_use` does not change.
    pub fn split(&mut self, bytes: u64) -> Result<Reservation> {
        if bytes > self.bytes {
            return Err(VramError::InvalidSize(format!(
                "split({bytes}) but only {} held",
                self.bytes
            )));
        }
        self.bytes -= bytes;
        Ok(Reservation {
            budget: self.budget.clone(),
            bytes,
        })
    }

    /// Merges `other` (from the same budget) into this one.
    pub fn merge(&mut self, mut other: Reservation) -> Result<()> {
        if !self.budget.same_as(&other.budget) {
            return Err(VramError::InvalidSize(
                "merge of reservations from different budgets".into(),
            ));
        }
        self.bytes += std::mem::take(&mut other.bytes);
        Ok(())
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.budget.give_back(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;
    use std::thread;

    #[test]
    fn accounting_and_raii() {
        let b = Budget::new("device", 1000);
        let mut r1 = b.try_acquire(600).unwrap();
        assert_eq!((b.in_use(), b.available()), (600, 400));
        assert!(b.try_acquire(401).is_none());
        let r2 = b.try_acquire(400).unwrap();
        assert_eq!(b.available(), 0);
        r1.release_part(100).unwrap();
        assert_eq!(b.in_use(), 900);
        assert!(r1.release_part(501).is_err());
        let part = r1.split(200).unwrap();
        assert_eq!((r1.bytes(), part.bytes(), b.in_use()), (300, 200, 900));
        drop(part);
        assert_eq!(b.in_use(), 700);
        drop(r2);
        drop(r1);
        assert_eq!((b.in_use(), b.peak()), (0, 1000));
    }

    #[test]
    fn too_large_fails_immediately() {
        let b = Budget::new("device", 1000);
        let t = Instant::now();
        let e = b.acquire(1001, Duration::from_secs(3600)).unwrap_err();
        assert!(
            matches!(
                e,
                VramError::ExceedsBudget {
                    requested: 1001,
                    total: 1000,
                    ..
                }
            ),
            "{e}"
        );
        assert!(t.elapsed() < Duration::from_secs(1));
        assert!(matches!(
            b.try_acquire_or_err(1001),
            Err(VramError::ExceedsBudget { .. })
        ));
        let _r = b.try_acquire(10).unwrap();
        assert!(matches!(
            b.try_acquire_or_err(991),
            Err(VramError::OutOfBudget { available: 990, .. })
        ));
    }

    #[test]
    fn timeout_returns_error_and_leaves_queue() {
        let b = Budget::new("device", 100);
        let _r = b.try_acquire(80).unwrap();
        let e = b.acquire(50, Duration::from_millis(30)).unwrap_err();
        assert!(matches!(e, VramError::Timeout { requested: 50, .. }));
        assert_eq!(b.waiters(), 0);
        assert_eq!(b.in_use(), 80);
    }

    #[test]
    fn blocking_acquire_wakes_on_release() {
        let b = Budget::new("device", 100);
        let r = b.try_acquire(100).unwrap();
        let b2 = b.clone();
        let h = thread::spawn(move || b2.acquire(60, Duration::from_secs(10)).map(|r| r.bytes()));
        while b.waiters() == 0 {
            thread::yield_now();
        }
        drop(r);
        assert_eq!(h.join().unwrap().unwrap(), 60);
        assert_eq!(b.in_use(), 0);
    }

    /// A big waiter queued first gets served before small requests that arrive later, even
    /// though the small ones would fit earlier.
    #[test]
    fn fifo_big_waiter_not_starved() {
        let b = Budget::new("device", 100);
        let mut hold = b.try_acquire(90).unwrap();
        let (tx, rx) = mpsc::channel();
        let big = {
            let (b, tx) = (b.clone(), tx.clone());
            thread::spawn(move || {
                let r = b.acquire(100, Duration::from_secs(10)).unwrap();
                tx.send("big").unwrap();
                drop(r);
            })
        };
        while b.waiters() < 1 {
            thread::yield_now();
        }
        // A small request now must not jump the queue, neither via try_acquire...
        assert!(b.try_acquire(5).is_none());
        // ...nor via acquire.
        let small = {
            let b = b.clone();
            thread::spawn(move || {
                let r = b.acquire(5, Duration::from_secs(10)).unwrap();
                tx.send("small").unwrap();
                drop(r);
            })
        };
        while b.waiters() < 2 {
            thread::yield_now();
        }
        hold.release_part(50).unwrap(); // 40 in use: small would fit, big would not
        thread::sleep(Duration::from_millis(30));
        assert!(
            rx.try_recv().is_err(),
            "nobody may be served while the big one waits"
        );
        drop(hold);
        assert_eq!(rx.recv().unwrap(), "big");
        assert_eq!(rx.recv().unwrap(), "small");
        big.join().unwrap();
        small.join().unwrap();
        assert_eq!((b.in_use(), b.peak(), b.waiters()), (0, 100, 0));
    }

    #[test]
    fn timed_out_front_waiter_unblocks_next() {
        let b = Budget::new("device", 100);
        let _hold = b.try_acquire(50).unwrap();
        let b1 = b.clone();
        let big = thread::spawn(move || b1.acquire(100, Duration::from_millis(50)));
        while b.waiters() < 1 {
            thread::yield_now();
        }
        let b2 = b.clone();
        let small =
            thread::spawn(move || b2.acquire(40, Duration::from_secs(10)).map(|r| r.bytes()));
        assert!(matches!(
            big.join().unwrap(),
            Err(VramError::Timeout { .. })
        ));
        assert_eq!(small.join().unwrap().unwrap(), 40);
    }

    #[test]
    fn merge_same_budget_only() {
        let a = Budget::new("device", 100);
        let c = Budget::new("device", 100);
        let mut r = a.try_acquire(10).unwrap();
        r.merge(a.try_acquire(20).unwrap()).unwrap();
        assert_eq!((r.bytes(), a.in_use()), (30, 30));
        assert!(r.merge(c.try_acquire(5).unwrap()).is_err());
        assert_eq!(c.in_use(), 0);
        drop(r);
        assert_eq!(a.in_use(), 0);
    }

    /// A cache keeping a reservation between uses (what an MSM context's kept scratch does).
    struct Kept(Mutex<Option<Reservation>>);

    impl Reclaim for Kept {
        fn reclaimable(&self) -> u64 {
            self.0.lock().as_ref().map_or(0, Reservation::bytes)
        }
        fn reclaim(&self) {
            let taken = self.0.lock().take();
            drop(taken); // outside the cache's lock
        }
    }

    fn kept(b: &Budget, bytes: u64) -> Arc<Kept> {
        let k = Arc::new(Kept(Mutex::new(Some(b.try_acquire(bytes).unwrap()))));
        let weak: Weak<Kept> = Arc::downgrade(&k);
        b.add_reclaimer(weak);
        k
    }

    #[test]
    fn idle_cached_bytes_are_available_and_given_back_on_demand() {
        let b = Budget::new("device", 100);
        let (k1, k2) = (kept(&b, 30), kept(&b, 40));
        assert_eq!((b.free(), b.reclaimable(), b.available()), (30, 70, 100));
        // Fits the free bytes: nothing is reclaimed.
        let r = b.try_acquire(20).unwrap();
        assert_eq!(b.reclaimable(), 70);
        drop(r);
        // Needs one cache's bytes: only as many caches as needed give theirs back.
        let r = b.try_acquire(50).unwrap();
        assert_eq!(
            (k1.reclaimable(), k2.reclaimable(), b.in_use()),
            (0, 40, 90)
        );
        // More than free + reclaimable: fails without emptying the caches.
        assert!(matches!(
            b.try_acquire_or_err(60),
            Err(VramError::OutOfBudget { available: 50, .. })
        ));
        assert_eq!(k2.reclaimable(), 40);
        drop(r);
        // A dropped cache is forgotten (its bytes came back when it dropped).
        drop(k2);
        assert_eq!((b.reclaimable(), b.in_use()), (0, 0));
        let _all = b.try_acquire(100).unwrap();
    }

    #[test]
    fn reclaim_all_empties_every_cache() {
        let b = Budget::new("device", 100);
        let (k1, k2) = (kept(&b, 30), kept(&b, 40));
        let held = b.try_acquire(10).unwrap();
        b.reclaim_all();
        assert_eq!((k1.reclaimable(), k2.reclaimable()), (0, 0));
        assert_eq!((b.in_use(), held.bytes()), (10, 10));
    }

    #[test]
    fn a_waiter_takes_bytes_a_cache_kept_while_it_waited() {
        let b = Budget::new("device", 100);
        let hold = b.try_acquire(100).unwrap();
        let b2 = b.clone();
        let h = thread::spawn(move || b2.acquire(60, Duration::from_secs(10)).map(|r| r.bytes()));
        while b.waiters() == 0 {
            thread::yield_now();
        }
        // The holder turns into an idle cache (no bytes are returned, so nothing wakes the
        // waiter but its own check); then an unrelated release wakes it.
        let mut hold = hold;
        let cached = hold.split(70).unwrap();
        let k = Arc::new(Kept(Mutex::new(Some(cached))));
        let weak: Weak<Kept> = Arc::downgrade(&k);
        b.add_reclaimer(weak);
        // 10 bytes free, 70 idle: the waiter (first in line) has the cache give them back.
        hold.release_part(10).unwrap();
        assert_eq!(h.join().unwrap().unwrap(), 60);
        assert_eq!((k.reclaimable(), b.in_use()), (0, 20));
    }
}
