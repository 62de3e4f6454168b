//! The CPU allocator's size classes: 64 bytes, then four classes per
//! power of two (at most 25% waste) up to [`MAX_CACHED`], each with the
//! number of blocks a thread's bin keeps, and the bins of one thread
//! (used only by their thread: cpu_thread_cache.rs shares them).

/// The largest block size (in bytes, class size) kept in a cache.
pub const MAX_CACHED: usize = 256 << 20;
// Classes 1..: four per power of two from (64, 128] up to (128 MiB, 256 MiB].
const NUM_CLASSES: usize = 1 + 4 * (27 - 6 + 1);
const BIN_SLOTS: usize = 8;

/// The size class of a request of `n` bytes, or None when it is too large
/// to cache.
#[inline]
pub fn class_of(n: usize) -> Option<usize> {
    if n <= TABLE_MAX {
        return Some(SMALL_CLASSES[(n + 15) >> 4] as usize);
    }
    if n > MAX_CACHED {
        return None;
    }
    Some(compute_class(n))
}

/// The class of `n` bytes, 0 < n <= MAX_CACHED (or 0 bytes: class 0).
const fn compute_class(n: usize) -> usize {
    if n <= 64 {
        return 0;
    }
    let m = n - 1;
    let k = (usize::BITS - 1 - m.leading_zeros()) as usize; // 2^k <= m < 2^(k+1), k >= 6
    let sub = (m >> (k - 2)) & 3;
    (k - 6) * 4 + sub + 1
}

/// Requests up to this many bytes find their class in [`SMALL_CLASSES`]:
/// one load instead of the bit arithmetic (the NumPy handler's small
/// arrays, c10's small tensors).
const TABLE_MAX: usize = 4096;

/// The class of every request of up to [`TABLE_MAX`] bytes, by its size
/// rounded up to 16 (the classes up to there are multiples of 16, so the
/// rounding never crosses one).
const SMALL_CLASSES: [u8; TABLE_MAX / 16 + 1] = {
    let mut t = [0u8; TABLE_MAX / 16 + 1];
    let mut i = 0;
    while i < t.len() {
        t[i] = compute_class(i * 16) as u8;
        i += 1;
    }
    t
};

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

/// The bins of one thread.
pub(super) struct Bins {
    bins: [Bin; NUM_CLASSES],
    pub(super) bytes: usize,
    /// How to free a block that leaves the cache (set by the allocator).
    release: unsafe fn(*mut u8),
}

impl Bins {
    /// Empty bins whose blocks leave through `release`.
    pub(super) fn new(release: unsafe fn(*mut u8)) -> Bins {
        Bins {
            bins: [Bin {
                blocks: [std::ptr::null_mut(); BIN_SLOTS],
                len: 0,
            }; NUM_CLASSES],
            bytes: 0,
            release,
        }
    }

    /// Caches `block` in bin `c` if the bin has a free slot and the bytes
    /// cached stay within `limit`; whether it did.
    #[inline(always)]
    pub(super) fn push(&mut self, c: usize, block: *mut u8, limit: usize) -> bool {
        let (size, slots) = CLASSES[c];
        let bin = &mut self.bins[c];
        if bin.len >= slots || self.bytes + size > limit {
            return false;
        }
        // A checked slot without a panic branch (slots <= BIN_SLOTS): the
        // free fast path makes no call.
        let Some(slot) = bin.blocks.get_mut(bin.len as usize) else {
            return false;
        };
        *slot = block;
        bin.len += 1;
        self.bytes += size;
        true
    }

    /// Takes a block of class `c`, if the bin has one.
    #[inline(always)]
    pub(super) fn pop(&mut self, c: usize) -> Option<*mut u8> {
        let bin = &mut self.bins[c];
        let len = bin.len.checked_sub(1)?;
        let block = *bin.blocks.get(len as usize)?;
        bin.len = len;
        self.bytes -= CLASSES[c].0;
        Some(block)
    }

    pub(super) fn release_all(&mut self) -> usize {
        let before = self.bytes;
        for (c, bin) in self.bins.iter_mut().enumerate() {
            for &b in &bin.blocks[..bin.len as usize] {
                // SAFETY: cached blocks are owned by the cache and freed once.
                unsafe { (self.release)(b) };
                self.bytes -= class_size(c);
            }
            bin.len = 0;
        }
        before
    }
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
