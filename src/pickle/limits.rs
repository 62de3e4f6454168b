//! The bounds of the pickle reader ([`super::read`]).

/// Bounds of the reader; a pickle that passes one is a `Format` error.
///
/// Memory: the reader accounts the bytes of every value it builds (a
/// stack slot per value, the heap of strings and bytes by their length,
/// of containers by their capacity, and every copy DUP and the memo make,
/// in full) and refuses the pickle once the total would pass
/// [`Limits::bound`] of the input's length. Nothing is credited back, so
/// the total bounds the peak.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most values on the stack at once.
    pub max_stack: usize,
    /// Most nested containers (a tuple in a list in a dict is 3).
    pub max_depth: u32,
    /// Largest memo index (BINPUT / LONG_BINPUT / MEMOIZE).
    pub max_memo: u32,
    /// Most bytes of values built (see above), whatever the input's size.
    pub max_bytes: u64,
    /// Bytes of values the reader may build per byte of input, beyond
    /// [`BASE_BYTES`].
    pub bytes_per_input_byte: u64,
}

/// Bytes of values any pickle may build, however short.
pub const BASE_BYTES: u64 = 1 << 20;

/// The default [`Limits::bytes_per_input_byte`]: a pickle of one-byte
/// opcodes (a list of a million Nones) needs a stack slot (72 bytes) and
/// up to two places in a list's capacity (56 each) per byte.
pub const PER_INPUT_BYTE: u64 = 192;

impl Limits {
    /// The bytes of values allowed for an input of `len` bytes:
    /// `min(max_bytes, BASE_BYTES + bytes_per_input_byte * len)`.
    pub fn bound(&self, len: usize) -> u64 {
        self.bytes_per_input_byte
            .saturating_mul(len as u64)
            .saturating_add(BASE_BYTES)
            .min(self.max_bytes)
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_stack: 1 << 20,
            max_depth: 100,
            max_memo: 1 << 24,
            max_bytes: 1 << 30,
            bytes_per_input_byte: PER_INPUT_BYTE,
        }
    }
}
