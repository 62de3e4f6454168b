//! Built-in CPU kernels over the iterator: copy with conversion and
//! broadcasting, fill, add / sub / mul / div, neg, sum, prod, mean, amax and amin, max / min
//! along a dim with indices, the vector norm, for
//! bool, the integer types, half, bfloat16, float, double and the complex
//! types; copy and fill also for the float8 types (their arithmetic, and
//! quantized dtypes, are refused with Unsupported).
//!
//! Layout: `value_types` (Bool, Complex), `elem` (one Rust type per
//! dtype, conversions), `ops` (per element arithmetic), `dispatch` (dtype
//! -> type), `loops` (inner runs specialised for contiguous and broadcast
//! operands), `flat` (small same-shape contiguous binary ops without an
//! iterator), `simd` (run-time AVX2 selection), `cast` and `blocked`
//! (conversions, tiled transposes; `transpose` holds the AVX2 tile
//! kernels), and one file per kernel family.
//!
//! Also here, because they need a kernel: the iterator's build entry
//! points (`iter_build`: `IterConfig::build*`, the `TensorIterator`
//! presets), the `Tensor` methods that copy (`tensor_copy`) or fill
//! (`fill`), and `TensorIterator::cast_outputs` (`copy`). See
//! docs/ARCHITECTURE.md.

pub mod binary;
pub(crate) mod blocked;
pub(crate) mod cast;
pub mod copy;
pub(crate) mod dispatch;
pub mod elem;
pub mod fill;
mod flat;
mod item;
mod iter_build;
pub(crate) mod loops;
pub mod ops;
mod real;
pub mod reduce;
pub mod simd;
mod tensor_copy;
#[cfg(target_arch = "x86_64")]
pub(crate) mod transpose;
pub mod unary;
mod value_types;

pub use binary::{add, div, div_rounding, mul, sub, RoundingMode};
pub use copy::copy_;
pub use fill::fill_;
pub use reduce::{amax, amin, max_dim, mean, min_dim, prod, sum, vector_norm};
pub use unary::neg;
