//! Arithmetic on op math types: what add, sub, mul, div, neg, sum and
//! amax compute per element. Integers wrap on overflow (as C++ unsigned
//! arithmetic and PyTorch's CPU kernels in practice); bool addition is
//! "or" and multiplication "and".

use super::value_types::Complex;
use crate::dtype::Scalar;

/// Addition, multiplication and zero: every op math type.
pub trait Arith: Copy + Send + Sync + Default + 'static {
    /// Additive identity.
    const ZERO: Self;
    /// Multiplicative identity.
    const ONE: Self;
    /// `self + o`.
    fn add(self, o: Self) -> Self;
    /// `self * o`.
    fn mul(self, o: Self) -> Self;
    /// A scalar multiplier (alpha) converted to this type, C-like.
    fn from_alpha(s: Scalar) -> Self;
}

/// Subtraction and negation: every op math type but bool.
pub trait Signed: Arith {
    /// `self - o`.
    fn sub(self, o: Self) -> Self;
    /// `-self`.
    fn neg(self) -> Self;
}

/// True division: floating and complex op math types.
pub trait Div: Arith {
    /// `self / o` (IEEE: x/0 is ±inf or NaN).
    fn div(self, o: Self) -> Self;
}

/// Ordering with NaN propagation: real op math types (amax, amin).
/// Both sides keep `self` unless `o` is strictly beyond it or NaN, so a
/// NaN `self` stays and ties keep the earlier value.
pub trait Max: Copy {
    /// The smallest value (the identity of max).
    const LOWEST: Self;
    /// The largest value (the identity of min).
    const HIGHEST: Self;
    /// The larger of the two, NaN if either is NaN.
    fn max_nan(self, o: Self) -> Self;
    /// The smaller of the two, NaN if either is NaN.
    fn min_nan(self, o: Self) -> Self;
}

/// Division rounded toward zero or down: real op math types.
pub trait RoundingDiv: Copy {
    /// Whether a zero divisor is an error (integers) rather than inf/NaN.
    const ZERO_DIVISOR_IS_ERROR: bool;
    /// Whether the value is zero.
    fn is_zero(self) -> bool;
    /// Quotient rounded toward zero.
    fn trunc_div(self, o: Self) -> Self;
    /// Quotient rounded toward negative infinity (Python's `//`).
    fn floor_div(self, o: Self) -> Self;
}

impl Arith for bool {
    const ZERO: Self = false;
    const ONE: Self = true;
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self | o
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self & o
    }
    fn from_alpha(s: Scalar) -> Self {
        s.to_bool()
    }
}

impl Max for bool {
    const LOWEST: Self = false;
    const HIGHEST: Self = true;
    #[inline(always)]
    fn max_nan(self, o: Self) -> Self {
        self | o
    }
    #[inline(always)]
    fn min_nan(self, o: Self) -> Self {
        self & o
    }
}

macro_rules! int_ops {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn from_alpha(s: Scalar) -> Self {
                if s.is_integral() {
                    // Two's complement wrap, for unsigned types too.
                    s.to_u64() as $t
                } else {
                    s.to_f64() as $t
                }
            }
        }
        impl Signed for $t {
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn neg(self) -> Self {
                self.wrapping_neg()
            }
        }
        impl Max for $t {
            const LOWEST: Self = <$t>::MIN;
            const HIGHEST: Self = <$t>::MAX;
            #[inline(always)]
            fn max_nan(self, o: Self) -> Self {
                if o > self { o } else { self }
            }
            #[inline(always)]
            fn min_nan(self, o: Self) -> Self {
                if o < self { o } else { self }
            }
        }
        impl RoundingDiv for $t {
            const ZERO_DIVISOR_IS_ERROR: bool = true;
            #[inline(always)]
            fn is_zero(self) -> bool {
                self == 0
            }
            #[inline(always)]
            fn trunc_div(self, o: Self) -> Self {
                // MIN / -1 wraps to MIN, as two's complement hardware would.
                self.wrapping_div(o)
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn floor_div(self, o: Self) -> Self {
                let q = self.wrapping_div(o);
                let r = self.wrapping_rem(o);
                if r != 0 && ((r < 0) != (o < 0)) {
                    q.wrapping_sub(1)
                } else {
                    q
                }
            }
        }
    )*};
}

int_ops!(u8, i8, i16, i32, i64, u16, u32, u64);

macro_rules! float_ops {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                self + o
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn from_alpha(s: Scalar) -> Self {
                s.to_f64() as $t
            }
        }
        impl Signed for $t {
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                self - o
            }
            #[inline(always)]
            fn neg(self) -> Self {
                -self
            }
        }
        impl Div for $t {
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                self / o
            }
        }
        impl Max for $t {
            const LOWEST: Self = <$t>::NEG_INFINITY;
            const HIGHEST: Self = <$t>::INFINITY;
            #[inline(always)]
            fn max_nan(self, o: Self) -> Self {
                // Once either side is NaN the result stays NaN.
                if o > self || o.is_nan() { o } else { self }
            }
            #[inline(always)]
            fn min_nan(self, o: Self) -> Self {
                if o < self || o.is_nan() { o } else { self }
            }
        }
        impl RoundingDiv for $t {
            const ZERO_DIVISOR_IS_ERROR: bool = false;
            #[inline(always)]
            fn is_zero(self) -> bool {
                self == 0.0
            }
            #[inline(always)]
            fn trunc_div(self, o: Self) -> Self {
                (self / o).trunc()
            }
            #[inline(always)]
            fn floor_div(self, o: Self) -> Self {
                if o == 0.0 {
                    return self / o;
                }
                // Python's float floor division: exact through the
                // remainder rather than floor(a / b), which can be off by
                // one when a / b rounds up to an integer.
                let rem = self % o;
                let mut q = (self - rem) / o;
                if rem != 0.0 && ((o < 0.0) != (rem < 0.0)) {
                    q -= 1.0;
                }
                if q == 0.0 {
                    return (0.0 as $t).copysign(self / o);
                }
                let f = q.floor();
                if q - f > 0.5 { f + 1.0 } else { f }
            }
        }
    )*};
}

float_ops!(f32, f64);

macro_rules! complex_ops {
    ($($t:ty),*) => {$(
        impl Arith for Complex<$t> {
            const ZERO: Self = Complex::new(0.0, 0.0);
            const ONE: Self = Complex::new(1.0, 0.0);
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                Complex::new(self.re + o.re, self.im + o.im)
            }
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                Complex::new(
                    self.re * o.re - self.im * o.im,
                    self.re * o.im + self.im * o.re,
                )
            }
            fn from_alpha(s: Scalar) -> Self {
                let (re, im) = s.to_complex();
                Complex::new(re as $t, im as $t)
            }
        }
        impl Signed for Complex<$t> {
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                Complex::new(self.re - o.re, self.im - o.im)
            }
            #[inline(always)]
            fn neg(self) -> Self {
                Complex::new(-self.re, -self.im)
            }
        }
        impl Div for Complex<$t> {
            /// Smith's scaled division: divides by the larger component of
            /// the divisor first so the intermediate products neither
            /// overflow nor underflow early.
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                let (a, b, c, d) = (self.re, self.im, o.re, o.im);
                if c.abs() >= d.abs() {
                    if c == 0.0 && d == 0.0 {
                        return Complex::new(a / c.abs(), b / c.abs());
                    }
                    let r = d / c;
                    let den = c + d * r;
                    Complex::new((a + b * r) / den, (b - a * r) / den)
                } else {
                    let r = c / d;
                    let den = c * r + d;
                    Complex::new((a * r + b) / den, (b * r - a) / den)
                }
            }
        }
    )*};
}

complex_ops!(f32, f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_division() {
        assert_eq!((-7i32).floor_div(2), -4);
        assert_eq!((-7i32).trunc_div(2), -3);
        assert_eq!(7i64.floor_div(-2), -4);
        assert_eq!(6i8.floor_div(-2), -3);
        assert_eq!(i32::MIN.trunc_div(-1), i32::MIN);
        assert_eq!(7u8.floor_div(2), 3);
        assert_eq!((-7.0f64).floor_div(2.0), -4.0);
        assert_eq!((-7.5f32).trunc_div(2.0), -3.0);
        assert_eq!(1.0f64.floor_div(0.0), f64::INFINITY);
        assert!((-0.5f64).floor_div(4.0) == -1.0);
        assert!(0.5f64.floor_div(-4.0) == -1.0);
        assert!((0.0f64).floor_div(-4.0).is_sign_negative());
    }

    #[test]
    fn nan_propagating_max() {
        assert!(f32::NAN.max_nan(1.0).is_nan());
        assert!(1.0f32.max_nan(f32::NAN).is_nan());
        assert_eq!(1.0f64.max_nan(2.0), 2.0);
        assert_eq!((-3i8).max_nan(-5), -3);
        assert!(f32::NAN.min_nan(1.0).is_nan());
        assert!(1.0f32.min_nan(f32::NAN).is_nan());
        assert_eq!(1.0f64.min_nan(2.0), 1.0);
        assert_eq!((-3i8).min_nan(-5), -5);
        assert!(true.min_nan(true) && !true.min_nan(false));
    }

    #[test]
    fn complex_division() {
        let q = Complex::new(1.0f64, 2.0).div(Complex::new(3.0, -4.0));
        assert!((q.re - (-0.2)).abs() < 1e-15 && (q.im - 0.4).abs() < 1e-15);
        let q = Complex::new(1.0f32, 1.0).div(Complex::new(0.0, 0.0));
        assert!(q.re.is_infinite() && q.im.is_infinite());
    }
}
