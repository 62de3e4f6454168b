//! The pickle reader's peak heap on hostile pickles, measured by a
//! counting global allocator: within its accounted bound (issue 36, item
//! 7: a 1 MB pickle of memo gets used to reach ~500 MB before refusal).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use tessera::pickle::{read, Limits};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to System with the caller's arguments and
// only updates counters besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for alloc, forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr was allocated by alloc / realloc above with layout.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// A list of 1000 Nones, memoized in slot 0, after PROTO 2.
fn memoized_list() -> Vec<u8> {
    let mut b = vec![0x80, 2, b']', b'('];
    b.extend(std::iter::repeat_n(b'N', 1000));
    b.extend_from_slice(b"eq\x00");
    b
}

/// The heap the reader used beyond what was live before, for `bytes`,
/// which must be refused.
fn peak_of_refused(bytes: &[u8]) -> usize {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let r = read(bytes, &|_, _| true, Limits::default());
    assert!(
        r.is_err(),
        "a hostile pickle of {} bytes loaded",
        bytes.len()
    );
    PEAK.load(Ordering::Relaxed) - before
}

#[test]
fn hostile_pickles_stay_within_the_bound() {
    let limits = Limits::default();
    // 1 MB of memo gets of the list.
    let mut a = memoized_list();
    a.push(b'(');
    while a.len() < (1 << 20) - 2 {
        a.extend_from_slice(b"h\x00");
    }
    a.extend_from_slice(b"l.");
    // 2 MB: 8,000 DUPs of the list, popped, then FRAMEs.
    let mut b = memoized_list();
    b.extend(std::iter::repeat_n(b'2', 8000));
    b.extend(std::iter::repeat_n(b'0', 8000));
    while b.len() < (2 << 20) - 1 {
        b.push(0x95);
        b.extend_from_slice(&0u64.to_le_bytes());
    }
    b.push(b'.');
    // Tests in this binary run one at a time (one test), so the peak is
    // the reader's.
    for (what, bytes) in [("1 MB of memo gets", &a), ("2 MB of DUPs", &b)] {
        let peak = peak_of_refused(bytes);
        let bound = limits.bound(bytes.len()) as usize;
        // The stack's spare capacity and the input-independent parts
        // (error message, memo table) on top of the accounted bytes.
        assert!(
            peak <= bound + bound / 8 + (1 << 20),
            "{what}: peak heap {peak} bytes, bound {bound}"
        );
        eprintln!("{what}: peak heap {peak} bytes, bound {bound}");
    }
}
