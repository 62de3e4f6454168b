//! The bounds of the pickle reader ([`super::parse`]).

/// Bounds of the reader; a pickle that passes one is a `Format` error.
///
/// Memory needs no counter: the reader's arena ([`super::Pickle`]) holds
/// at most one 12-byte node per opcode, 4-byte ids on the stack, in the
/// memo and in containers, and no copy of any string, so what a pickle
/// makes the reader hold is linear in its length, within
/// [`Limits::bound`] (`tests/pickle_memory.rs` measures it with a
/// counting allocator on hostile pickles and on real torch.save ones).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most values on the stack at once.
    pub max_stack: usize,
    /// Most nested MARKs; also the most nested containers a tree made
    /// from the arena ([`super::Val::to_value`]) may hold.
    pub max_depth: u32,
    /// Largest memo index (BINPUT / LONG_BINPUT / MEMOIZE).
    pub max_memo: u32,
}

/// Bytes any pickle may make the reader hold, however short.
pub const BASE_BYTES: u64 = 1 << 20;

/// Bytes a pickle may make the reader hold per byte of input, beyond
/// [`BASE_BYTES`].
pub const PER_INPUT_BYTE: u64 = 32;

impl Limits {
    /// The most bytes the reader holds for an input of `len` bytes:
    /// `BASE_BYTES + PER_INPUT_BYTE * len`. A tree made from it by
    /// [`super::read`] is held to the same figure on its own.
    pub fn bound(&self, len: usize) -> u64 {
        PER_INPUT_BYTE
            .saturating_mul(len as u64)
            .saturating_add(BASE_BYTES)
    }

    /// The most values [`super::read`] builds into a tree for an input of
    /// `len` bytes: what [`Limits::bound`] holds of them.
    pub fn max_values(&self, len: usize) -> usize {
        (self.bound(len) / std::mem::size_of::<super::Value>() as u64) as usize
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_stack: 1 << 20,
            max_depth: 100,
            max_memo: 1 << 24,
        }
    }
}
