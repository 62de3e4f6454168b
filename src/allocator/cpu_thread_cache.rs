//! The per-thread block cache of the built-in CPU allocator (in the spirit
//! of mimalloc's thread-local free lists, kept small): a freed block goes
//! to a bin of the freeing thread, keyed by its size class, and the next
//! request of that class on that thread takes it back without calling
//! malloc/free (or mmap/munmap for large blocks).
//!
//! Size classes: 64 bytes, then four classes per power of two (at most 25%
//! waste), up to [`MAX_CACHED`]. A bin keeps a few blocks (eight for small
//! classes, one for the largest). Each thread keeps at most
//! [`cache_limit`] bytes (default [`DEFAULT_LIMIT`]; 0 disables caching);
//! a block that does not fit is freed at once. Bins are emptied when their
//! thread exits, and on demand with [`release_thread_cache`].

use super::thread_counts;
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// The largest block size (in bytes, class size) kept in a cache.
pub const MAX_CACHED: usize = 256 << 20;
/// The default per-thread byte budget of the cache.
pub const DEFAULT_LIMIT: usize = 128 << 20;

// Classes 1..: four per power of two from (64, 128] up to (128 MiB, 256 MiB].
const NUM_CLASSES: usize = 1 + 4 * (27 - 6 + 1);
const BIN_SLOTS: usize = 8;

static LIMIT: AtomicUsize = AtomicUsize::new(DEFAULT_LIMIT);

/// The per-thread byte budget.
pub fn cache_limit() -> usize {
    LIMIT.load(Relaxed)
}

/// Sets the per-thread byte budget (0 disables caching); takes effect for
/// later frees.
pub fn set_cache_limit(bytes: usize) {
    LIMIT.store(bytes, Relaxed);
}

/// The size class of a request of `n` bytes, or None when it is too large
/// to cache.
#[inline]
pub fn class_of(n: usize) -> Option<usize> {
    if n <= 64 {
        return Some(0);
    }
    if n > MAX_CACHED {
        return None;
    }
    let m = n - 1;
    let k = (usize::BITS - 1 - m.leading_zeros()) as usize; // 2^k <= m < 2^(k+1), k >= 6
    let sub = (m >> (k - 2)) & 3;
    Some((k - 6) * 4 + sub + 1)
}

const fn compute_class_size(c: usize) -> usize {
    if c == 0 {
        return 64;
    }
    let k = (c - 1) / 4 + 6;
    let sub = (c - 1) % 4;
    (1usize << k) + (sub + 1) * (1usize << (k - 2))
}

const fn compute_slots(size: usize) -> u8 {
    if size <= 64 << 10 {
        BIN_SLOTS as u8
    } else if size <= 1 << 20 {
        4
    } else if size <= 16 << 20 {
        2
    } else {
        1
    }
}

/// Per class: its capacity and how many blocks a bin keeps.
const CLASSES: [(usize, u8); NUM_CLASSES] = {
    let mut t = [(0usize, 0u8); NUM_CLASSES];
    let mut c = 0;
    while c < NUM_CLASSES {
        let size = compute_class_size(c);
        t[c] = (size, compute_slots(size));
        c += 1;
    }
    t
};

/// The capacity of class `c` (>= every request of that class).
#[inline]
pub fn class_size(c: usize) -> usize {
    CLASSES[c].0
}

#[derive(Clone, Copy)]
struct Bin {
    blocks: [*mut u8; BIN_SLOTS],
    len: u8,
}

struct Cache {
    bins: [Bin; NUM_CLASSES],
    bytes: usize,
    /// How to free a block that leaves the cache (set by the allocator).
    release: unsafe fn(*mut u8),
}

impl Cache {
    fn release_all(&mut self) {
        for (c, bin) in self.bins.iter_mut().enumerate() {
            for &b in &bin.blocks[..bin.len as usize] {
                // SAFETY: cached blocks are owned by the cache and freed once.
                unsafe { (self.release)(b) };
                self.bytes -= class_size(c);
            }
            bin.len = 0;
        }
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.release_all();
    }
}

/// Everything the CPU allocator keeps per thread: the allocation counters
/// and the block cache, behind one thread-local access.
struct ThreadState {
    counts: thread_counts::Owned,
    cache: Option<Box<Cache>>,
}

thread_local! {
    static STATE: RefCell<ThreadState> = RefCell::new(ThreadState {
        counts: thread_counts::acquire(),
        cache: None,
    });
}

/// Counts an allocation on this thread and takes a cached block of class
/// `class` if one is there. Returns (counted, block); counted is false
/// during thread teardown (the caller counts in the shared counter).
#[inline]
pub fn on_alloc(class: Option<usize>) -> (bool, Option<*mut u8>) {
    STATE
        .try_with(|state| {
            let Ok(mut state) = state.try_borrow_mut() else {
                return (false, None);
            };
            state.counts.0.bump(0);
            let (Some(c), Some(cache)) = (class, state.cache.as_mut()) else {
                return (true, None);
            };
            let bin = &mut cache.bins[c];
            if bin.len == 0 {
                return (true, None);
            }
            bin.len -= 1;
            cache.bytes -= CLASSES[c].0;
            (true, Some(bin.blocks[bin.len as usize]))
        })
        .unwrap_or((false, None))
}

/// The allocation fast path: takes a cached block of class `class` and
/// counts the allocation, or returns None having done nothing (no block
/// cached, or the thread is being torn down).
#[inline(always)]
pub fn take(class: usize) -> Option<*mut u8> {
    STATE
        .try_with(|state| {
            let mut state = state.try_borrow_mut().ok()?;
            let ThreadState { counts, cache } = &mut *state;
            let cache = cache.as_mut()?;
            let bin = &mut cache.bins[class];
            let len = bin.len.checked_sub(1)?;
            bin.len = len;
            let block = bin.blocks[len as usize];
            cache.bytes -= CLASSES[class].0;
            counts.0.bump(0);
            Some(block)
        })
        .ok()
        .flatten()
}

/// Takes back the count of an allocation that failed after on_alloc.
#[cold]
pub fn uncount_alloc() {
    let _ = STATE.try_with(|state| {
        if let Ok(state) = state.try_borrow() {
            let c = &state.counts.0;
            c.unbump(0);
        }
    });
}

/// Counts a free on this thread and offers the freed block of class
/// `class` to the cache. Returns (counted, cached); when not cached the
/// caller frees the block. `release` frees blocks that leave the cache
/// later.
#[inline]
pub fn on_free(class: Option<usize>, block: *mut u8, release: unsafe fn(*mut u8)) -> (bool, bool) {
    STATE
        .try_with(|state| {
            let Ok(mut state) = state.try_borrow_mut() else {
                return (false, false);
            };
            state.counts.0.bump(1);
            let Some(c) = class else { return (true, false) };
            let (size, slots) = CLASSES[c];
            let limit = cache_limit();
            if size > limit {
                return (true, false);
            }
            let cache = match state.cache {
                Some(ref mut cache) => cache,
                None => new_cache(&mut state.cache, release),
            };
            let bin = &mut cache.bins[c];
            if bin.len >= slots || cache.bytes + size > limit {
                return (true, false);
            }
            bin.blocks[bin.len as usize] = block;
            bin.len += 1;
            cache.bytes += size;
            (true, true)
        })
        .unwrap_or((false, false))
}

/// Makes the thread's cache on its first free. Out of line: the cache is
/// built on the stack before it is boxed, and a frame that large would
/// make every free probe three stack pages.
#[cold]
#[inline(never)]
fn new_cache(slot: &mut Option<Box<Cache>>, release: unsafe fn(*mut u8)) -> &mut Cache {
    slot.insert(Box::new(Cache {
        bins: [Bin {
            blocks: [std::ptr::null_mut(); BIN_SLOTS],
            len: 0,
        }; NUM_CLASSES],
        bytes: 0,
        release,
    }))
}

/// Adds one to counter `which` (0: allocations, 1: frees) of this thread;
/// false during thread teardown.
#[inline]
pub fn count(which: usize) -> bool {
    STATE
        .try_with(|state| match state.try_borrow() {
            Ok(state) => {
                state.counts.0.bump(which);
                true
            }
            Err(_) => false,
        })
        .unwrap_or(false)
}

/// Frees every block cached by the calling thread; returns the bytes
/// released.
pub fn release_thread_cache() -> usize {
    STATE
        .try_with(|state| {
            let Ok(mut state) = state.try_borrow_mut() else {
                return 0;
            };
            match state.cache.as_mut() {
                Some(c) => {
                    let before = c.bytes;
                    c.release_all();
                    before
                }
                None => 0,
            }
        })
        .unwrap_or(0)
}

/// Bytes cached by the calling thread.
pub fn thread_cached_bytes() -> usize {
    STATE
        .try_with(|state| {
            state
                .try_borrow()
                .ok()
                .and_then(|s| s.cache.as_ref().map(|c| c.bytes))
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_requests_with_bounded_waste() {
        let mut prev = 0;
        for c in 0..NUM_CLASSES {
            let s = class_size(c);
            assert!(s > prev, "class sizes increase");
            prev = s;
        }
        assert_eq!(class_size(NUM_CLASSES - 1), MAX_CACHED);
        for n in (1..5000).chain([65536, 65537, 1 << 20, (1 << 20) + 1, 64 << 20, MAX_CACHED]) {
            let c = class_of(n).unwrap();
            let s = class_size(c);
            assert!(s >= n, "class of {n} holds it");
            assert!(c == 0 || class_size(c - 1) < n, "smallest class for {n}");
            assert!(
                n <= 64 || (s as f64) <= n as f64 * 1.25 + 1.0,
                "waste for {n}"
            );
        }
        assert_eq!(class_of(MAX_CACHED + 1), None);
    }
}
