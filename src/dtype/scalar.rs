//! A single number, tagged by kind, as c10's `Scalar`.

use super::DType;

/// A number passed by value (fill values, alpha). Integer and floating
/// scalars act as c10's wrapped numbers in type promotion.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Scalar {
    /// A bool.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer too large for `Int`.
    UInt(u64),
    /// A real floating value.
    Float(f64),
    /// A complex value.
    Complex(f64, f64),
}

impl Scalar {
    /// The dtype a wrapped number of this kind has (Long, Double, ...).
    pub fn dtype(&self) -> DType {
        match self {
            Scalar::Bool(_) => DType::Bool,
            Scalar::Int(_) => DType::Long,
            Scalar::UInt(_) => DType::UInt64,
            Scalar::Float(_) => DType::Double,
            Scalar::Complex(..) => DType::ComplexDouble,
        }
    }

    /// The value as f64 (real part of a complex).
    pub fn to_f64(&self) -> f64 {
        match *self {
            Scalar::Bool(b) => b as u8 as f64,
            Scalar::Int(i) => i as f64,
            Scalar::UInt(u) => u as f64,
            Scalar::Float(f) => f,
            Scalar::Complex(re, _) => re,
        }
    }

    /// The value as (re, im).
    pub fn to_complex(&self) -> (f64, f64) {
        match *self {
            Scalar::Complex(re, im) => (re, im),
            other => (other.to_f64(), 0.0),
        }
    }

    /// The value as i64 with C-like conversion (floats truncate, saturating).
    pub fn to_i64(&self) -> i64 {
        match *self {
            Scalar::Bool(b) => b as i64,
            Scalar::Int(i) => i,
            Scalar::UInt(u) => u as i64,
            Scalar::Float(f) => f as i64,
            Scalar::Complex(re, _) => re as i64,
        }
    }

    /// The value as u64 (two's complement for negative integers).
    pub fn to_u64(&self) -> u64 {
        match *self {
            Scalar::UInt(u) => u,
            Scalar::Float(f) => f as u64,
            Scalar::Complex(re, _) => re as u64,
            other => other.to_i64() as u64,
        }
    }

    /// Whether the value is non-zero.
    pub fn to_bool(&self) -> bool {
        match *self {
            Scalar::Bool(b) => b,
            Scalar::Int(i) => i != 0,
            Scalar::UInt(u) => u != 0,
            Scalar::Float(f) => f != 0.0,
            Scalar::Complex(re, im) => re != 0.0 || im != 0.0,
        }
    }

    /// Whether the value is an integer or bool (not floating or complex).
    pub fn is_integral(&self) -> bool {
        matches!(self, Scalar::Bool(_) | Scalar::Int(_) | Scalar::UInt(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions() {
        assert_eq!(Scalar::Int(3).dtype(), DType::Long);
        assert_eq!(Scalar::Float(2.5).dtype(), DType::Double);
        assert_eq!(Scalar::Float(2.9).to_i64(), 2);
        assert_eq!(Scalar::Complex(1.0, 2.0).to_complex(), (1.0, 2.0));
        assert!(Scalar::Complex(0.0, 2.0).to_bool());
        assert_eq!(Scalar::Int(-1).to_u64(), u64::MAX);
    }
}
