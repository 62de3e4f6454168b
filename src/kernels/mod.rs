//! Built-in CPU kernels over the iterator.

pub mod copy;

pub use copy::copy_;
