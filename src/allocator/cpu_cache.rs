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

thread_local! {
    static CACHE: RefCell<Option<Box<Cache>>> = const { RefCell::new(None) };
}

/// Takes a cached block of class `c` for this thread, if any.
#[inline]
pub fn pop(c: usize) -> Option<*mut u8> {
    CACHE
        .try_with(|cache| {
            let mut cache = cache.try_borrow_mut().ok()?;
            let cache = cache.as_mut()?;
            let bin = &mut cache.bins[c];
            if bin.len == 0 {
                return None;
            }
            bin.len -= 1;
            cache.bytes -= class_size(c);
            Some(bin.blocks[bin.len as usize])
        })
        .ok()
        .flatten()
}

/// Offers a freed block of class `c` to this thread's cache; returns false
/// when it does not fit (the caller frees it). `release` frees blocks that
/// leave the cache later.
#[inline]
pub fn push(c: usize, block: *mut u8, release: unsafe fn(*mut u8)) -> bool {
    let (size, slots) = CLASSES[c];
    let limit = cache_limit();
    if size > limit {
        return false;
    }
    CACHE
        .try_with(|cache| {
            let Ok(mut cache) = cache.try_borrow_mut() else {
                return false;
            };
            let cache = cache.get_or_insert_with(|| {
                Box::new(Cache {
                    bins: [Bin {
                        blocks: [std::ptr::null_mut(); BIN_SLOTS],
                        len: 0,
                    }; NUM_CLASSES],
                    bytes: 0,
                    release,
                })
            });
            let bin = &mut cache.bins[c];
            if bin.len >= slots || cache.bytes + size > limit {
                return false;
            }
            bin.blocks[bin.len as usize] = block;
            bin.len += 1;
            cache.bytes += size;
            true
        })
        .unwrap_or(false)
}

/// Frees every block cached by the calling thread; returns the bytes
/// released.
pub fn release_thread_cache() -> usize {
    CACHE
        .try_with(|cache| {
            let Ok(mut cache) = cache.try_borrow_mut() else {
                return 0;
            };
            match cache.as_mut() {
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
    CACHE
        .try_with(|cache| {
            cache
                .try_borrow()
                .ok()
                .and_then(|c| c.as_ref().map(|c| c.bytes))
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
