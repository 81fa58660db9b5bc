//! The process's heap, with large allocations backed by transparent huge pages.
//!
//! A proof's host buffers are gigabytes (a 2^27 witness is 4.3 GB, its a, b, c three times that)
//! and each is written once, soon after it is allocated, then freed. With 4 KiB pages every
//! first touch is a page fault that zeroes a page and charges it to the cgroup, and every free
//! unmaps them one by one: writing a fresh 123 MB witness took 65 ms on one core, of which the
//! faults were most (crates/bellpepper/PERF-NOTES.md). Advised to 2 MiB pages it took 15-29 ms.
//!
//! Install it in a binary with `#[global_allocator] static HEAP: LargePages = LargePages;`.
//! It changes nothing where the kernel's THP mode is `never`
//! (`/sys/kernel/mm/transparent_hugepage/enabled`), which is also how an operator turns it off.

use std::alloc::{GlobalAlloc, Layout, System};

/// Allocations from this size up are advised to huge pages. glibc serves every allocation of
/// 32 MiB and more (its largest mmap threshold) by a mapping of its own, so the advice never
/// splits the shared heap's mappings.
pub const LARGE_ALLOCATION: usize = 32 << 20;
const HUGE_PAGE: usize = 2 << 20;

/// The system allocator; allocations of [`LARGE_ALLOCATION`] bytes and more are advised
/// `MADV_HUGEPAGE` before anything touches them.
#[derive(Clone, Copy, Debug, Default)]
pub struct LargePages;

/// The kernel's transparent-huge-page mode (`always`, `madvise` or `never`); `None` where the
/// kernel has none. Under `never` this heap's advice does nothing, and every fresh witness is
/// faulted in 4 KiB at a time.
pub fn transparent_huge_pages() -> Option<String> {
    let modes = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").ok()?;
    selected_mode(&modes)
}

/// The mode in brackets, as the kernel marks the one in force: `always [madvise] never`.
fn selected_mode(modes: &str) -> Option<String> {
    let start = modes.find('[')? + 1;
    let len = modes[start..].find(']')?;
    Some(modes[start..start + len].to_string())
}

/// Advises the whole huge pages inside `[ptr, ptr + len)`; a refusal (no THP in this kernel)
/// leaves ordinary pages, which is only slower.
fn advise(ptr: *mut u8, len: usize) {
    if ptr.is_null() || len < LARGE_ALLOCATION {
        return;
    }
    let start = (ptr as usize).next_multiple_of(HUGE_PAGE);
    let end = (ptr as usize + len) & !(HUGE_PAGE - 1);
    if end > start {
        // SAFETY: the range lies inside an allocation this allocator just made, which nothing
        // else has yet; MADV_HUGEPAGE changes how its pages are backed, never their contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

// SAFETY: every call is forwarded to `System` with the same arguments; `advise` only changes the
// page size behind memory that `System` returned.
unsafe impl GlobalAlloc for LargePages {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `layout`, passed on.
        let ptr = unsafe { System.alloc(layout) };
        advise(ptr, layout.size());
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`. A large zeroed allocation is a fresh mapping, not yet touched.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        advise(ptr, layout.size());
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as in `dealloc`; `new_size` is the caller's, passed on.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        advise(new, new_size);
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mode_in_force_is_the_bracketed_one() {
        assert_eq!(
            selected_mode("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            selected_mode("[always] madvise never").as_deref(),
            Some("always")
        );
        assert_eq!(selected_mode("always madvise never"), None);
        assert_eq!(selected_mode(""), None);
    }

    #[test]
    fn large_and_small_allocations_keep_their_contents() {
        let heap = LargePages;
        for size in [
            64,
            LARGE_ALLOCATION - 1,
            LARGE_ALLOCATION,
            LARGE_ALLOCATION + 3 * HUGE_PAGE + 5,
        ] {
            let layout = Layout::from_size_align(size, 64).unwrap();
            // SAFETY: a non-zero size; freed below with the same layout.
            unsafe {
                let p = heap.alloc_zeroed(layout);
                assert!(!p.is_null());
                let bytes = std::slice::from_raw_parts_mut(p, size);
                assert!(bytes.iter().all(|&b| b == 0), "{size}: zeroed");
                bytes.iter_mut().enumerate().for_each(|(i, b)| *b = i as u8);
                let q = heap.realloc(p, layout, size * 2);
                assert!(!q.is_null());
                let grown = std::slice::from_raw_parts(q, size);
                assert!(
                    grown.iter().enumerate().all(|(i, &b)| b == i as u8),
                    "{size}: kept"
                );
                heap.dealloc(q, Layout::from_size_align(size * 2, 64).unwrap());
            }
        }
    }
}
