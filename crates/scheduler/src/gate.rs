//! A counting gate whose waiters are served by priority, then first come first served: the
//! engine's per-device GPU lock (capacity 1), its per-device staging room and its host-memory
//! budget (capacities in bytes). A waiter at the head that does not fit blocks those behind
//! it, so a large request is never overtaken for ever by small ones. Waits are cancellable.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

/// How often a waiter re-checks its cancel flag.
const POLL: Duration = Duration::from_millis(20);

/// A waiter's place in line: lower ranks are served first (a job's priority, or a plain `u8`).
pub trait Rank: Copy {
    fn rank(self) -> u8;
}

impl Rank for u8 {
    fn rank(self) -> u8 {
        self
    }
}

/// Why a gate was not passed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error("{gate}: {need} exceeds the whole capacity of {capacity}")]
    TooLarge {
        gate: &'static str,
        need: u64,
        capacity: u64,
    },
    #[error("{gate}: {need} bytes asked, {free} free")]
    Busy {
        gate: &'static str,
        need: u64,
        free: u64,
    },
    #[error("cancelled while waiting for {0}")]
    Cancelled(&'static str),
}

#[derive(Clone)]
pub struct Gate {
    name: &'static str,
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    cond: Condvar,
}

#[derive(Default)]
struct State {
    capacity: u64,
    /// The most the capacity will be again: a request above it fails, one below it waits.
    ceiling: u64,
    in_use: u64,
    next_ticket: u64,
    /// (priority rank, ticket): the first entry is served first.
    waiters: BTreeSet<(u8, u64)>,
}

impl std::fmt::Debug for Gate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.inner.state.lock();
        f.debug_struct("Gate")
            .field("name", &self.name)
            .field("capacity", &s.capacity)
            .field("in_use", &s.in_use)
            .field("waiters", &s.waiters.len())
            .finish()
    }
}

/// Held share of a gate; returned when dropped.
#[derive(Debug)]
pub struct Permit {
    gate: Gate,
    amount: u64,
}

impl Permit {
    pub fn amount(&self) -> u64 {
        self.amount
    }

    /// `amount` of what is held, as a permit of its own; `None` if less is held.
    pub fn split(&mut self, amount: u64) -> Option<Permit> {
        self.amount = self.amount.checked_sub(amount)?;
        Some(Permit {
            gate: self.gate.clone(),
            amount,
        })
    }

    /// Returns `amount` (at most what is held) to the gate now, keeping the rest.
    pub fn release(&mut self, amount: u64) {
        let amount = amount.min(self.amount);
        self.amount -= amount;
        let mut s = self.gate.inner.state.lock();
        s.in_use -= amount;
        drop(s);
        self.gate.inner.cond.notify_all();
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let mut s = self.gate.inner.state.lock();
        s.in_use -= self.amount;
        drop(s);
        self.gate.inner.cond.notify_all();
    }
}

impl Gate {
    pub fn new(name: &'static str, capacity: u64) -> Self {
        Self {
            name,
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    capacity,
                    ceiling: capacity,
                    ..State::default()
                }),
                cond: Condvar::new(),
            }),
        }
    }

    pub fn name(&self) -> &'static str {
        self.name
    }

    pub fn capacity(&self) -> u64 {
        self.inner.state.lock().capacity
    }

    pub fn in_use(&self) -> u64 {
        self.inner.state.lock().in_use
    }

    pub fn waiters(&self) -> usize {
        self.inner.state.lock().waiters.len()
    }

    /// Changes the capacity now (a key loaded or unloaded; memory another process holds) and
    /// the ceiling it may return to (at least `capacity`). Holders keep what they have; a
    /// waiter above the ceiling fails, one above the capacity only waits.
    pub fn set_capacity(&self, capacity: u64, ceiling: u64) {
        let mut s = self.inner.state.lock();
        s.capacity = capacity;
        s.ceiling = ceiling.max(capacity);
        drop(s);
        self.inner.cond.notify_all();
    }

    /// Whether a waiter ranked before `priority` is queued (a holder of the GPU lock yields it
    /// at its next phase boundary when this is true).
    pub fn has_higher_waiter(&self, priority: impl Rank) -> bool {
        let rank = priority.rank();
        self.inner
            .state
            .lock()
            .waiters
            .first()
            .is_some_and(|&(r, _)| r < rank)
    }

    /// Takes `amount` now if it fits and nobody waits, else fails with [`GateError::Busy`].
    pub fn try_acquire(&self, amount: u64) -> Result<Permit, GateError> {
        let mut s = self.inner.state.lock();
        let free = s.capacity.saturating_sub(s.in_use);
        if !s.waiters.is_empty() || free < amount {
            return Err(GateError::Busy {
                gate: self.name,
                need: amount,
                free,
            });
        }
        s.in_use += amount;
        Ok(Permit {
            gate: self.clone(),
            amount,
        })
    }

    /// Waits until `amount` fits and this waiter is first in line, or `cancelled()` says so.
    pub fn acquire(
        &self,
        amount: u64,
        priority: impl Rank,
        cancelled: &dyn Fn() -> bool,
    ) -> Result<Permit, GateError> {
        let mut s = self.inner.state.lock();
        let too_large = |s: &State| GateError::TooLarge {
            gate: self.name,
            need: amount,
            capacity: s.ceiling,
        };
        if amount > s.ceiling {
            return Err(too_large(&s));
        }
        let me = (priority.rank(), s.next_ticket);
        s.next_ticket += 1;
        s.waiters.insert(me);
        loop {
            let first = s.waiters.first() == Some(&me);
            if first && s.capacity - s.in_use.min(s.capacity) >= amount {
                s.waiters.remove(&me);
                s.in_use += amount;
                drop(s);
                self.inner.cond.notify_all(); // the next waiter may fit too
                return Ok(Permit {
                    gate: self.clone(),
                    amount,
                });
            }
            let err = if amount > s.ceiling {
                Some(too_large(&s))
            } else if cancelled() {
                Some(GateError::Cancelled(self.name))
            } else {
                None
            };
            if let Some(e) = err {
                s.waiters.remove(&me);
                drop(s);
                self.inner.cond.notify_all();
                return Err(e);
            }
            self.inner.cond.wait_for(&mut s, POLL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    const NEVER: &dyn Fn() -> bool = &|| false;
    const HIGH: u8 = 0;
    const NORMAL: u8 = 1;
    const LOW: u8 = 2;

    #[test]
    fn permits_return_their_share() {
        let g = Gate::new("test", 10);
        let a = g.acquire(4, NORMAL, NEVER).unwrap();
        let b = g.acquire(6, NORMAL, NEVER).unwrap();
        assert_eq!(g.in_use(), 10);
        drop(a);
        assert_eq!(g.in_use(), 6);
        let mut b = b;
        b.release(2);
        assert_eq!((g.in_use(), b.amount()), (4, 4));
        // A waiter that fits the released share gets it before the holder ends.
        let c = g.try_acquire(6).unwrap();
        b.release(9); // more than held: what is held
        assert_eq!((g.in_use(), b.amount()), (6, 0));
        drop((b, c));
        assert_eq!(g.in_use(), 0);
        assert!(matches!(
            g.acquire(11, HIGH, NEVER),
            Err(GateError::TooLarge { need: 11, .. })
        ));
    }

    #[test]
    fn higher_priority_is_served_first_then_fifo() {
        let g = Gate::new("lock", 1);
        let held = g.acquire(1, LOW, NEVER).unwrap();
        let (tx, rx) = mpsc::channel();
        let mut threads = Vec::new();
        for (i, p) in [(0, LOW), (1, NORMAL), (2, HIGH), (3, NORMAL)] {
            let (g2, tx) = (g.clone(), tx.clone());
            threads.push(std::thread::spawn(move || {
                let permit = g2.acquire(1, p, NEVER).unwrap();
                tx.send(i).unwrap();
                std::thread::sleep(Duration::from_millis(5));
                drop(permit);
            }));
            // Queue them in this order.
            while g.waiters() <= i {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert!(g.has_higher_waiter(NORMAL));
        drop(held);
        let order: Vec<usize> = (0..4).map(|_| rx.recv().unwrap()).collect();
        assert_eq!(order, vec![2, 1, 3, 0]);
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn a_cancelled_waiter_leaves_the_line() {
        let g = Gate::new("room", 8);
        let held = g.acquire(8, NORMAL, NEVER).unwrap();
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let t = {
            let (g, flag) = (g.clone(), flag.clone());
            std::thread::spawn(move || {
                g.acquire(4, NORMAL, &|| {
                    flag.load(std::sync::atomic::Ordering::Relaxed)
                })
            })
        };
        while g.waiters() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        flag.store(true, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(t.join().unwrap().unwrap_err(), GateError::Cancelled("room"));
        assert_eq!(g.waiters(), 0);
        drop(held);
        assert_eq!(g.in_use(), 0);
    }

    #[test]
    fn a_large_waiter_is_not_overtaken() {
        let g = Gate::new("room", 10);
        let held = g.acquire(6, NORMAL, NEVER).unwrap();
        let big = {
            let g = g.clone();
            std::thread::spawn(move || g.acquire(8, NORMAL, NEVER).map(|p| p.amount()))
        };
        while g.waiters() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        // 2 bytes are free, but the 8-byte waiter is first in line.
        let small = {
            let g = g.clone();
            std::thread::spawn(move || g.acquire(2, NORMAL, NEVER).map(|p| p.amount()))
        };
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(
            g.in_use(),
            6,
            "the small request must wait behind the large one"
        );
        drop(held);
        assert_eq!(big.join().unwrap(), Ok(8));
        assert_eq!(small.join().unwrap(), Ok(2));
    }
}
