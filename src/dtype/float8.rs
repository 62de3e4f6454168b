//! The one-byte float formats of c10 (PyTorch 2.15) and their conversions
//! to and from f32, bit for bit as c10 converts them.
//!
//! Every format rounds to nearest, ties to even (e8m0fnu: see below), and
//! keeps the sign of zero and of underflowed values where it has a
//! negative zero. Per format:
//!
//! | format | bias | largest | inf | NaN | past the largest |
//! | --- | --- | --- | --- | --- | --- |
//! | Float8_e5m2 | 15 | 57344 | 0x7C | 0x7D-0x7F | +-inf |
//! | Float8_e4m3fn | 7 | 448 | none | 0x7F | saturates to +-448 (inf too) |
//! | Float8_e5m2fnuz | 16 | 57344 | none | 0x80 only | NaN (0x80), inf too |
//! | Float8_e4m3fnuz | 8 | 240 | none | 0x80 only | NaN (0x80), inf too |
//! | Float8_e8m0fnu | 127 | 2^127 | none | 0xFF | NaN (0xFF) |
//!
//! - NaN encodes as 0x7F with the input's sign (e5m2, e4m3fn), 0x80 (fnuz)
//!   or 0xFF (e8m0fnu). The fnuz formats have no negative zero: a negative
//!   value that rounds to zero encodes as 0x00.
//! - Float8_e8m0fnu is an exponent only (2^(b-127), no sign, no zero: 0x00
//!   is 2^-127). Encoding drops the sign and keeps f32's exponent field,
//!   plus one when the significand is at least 1.5 (a normal f32) or above
//!   0.5 (a subnormal one): c10's rule, which is not nearest in the log
//!   domain.
//! - Decoding is exact. NaNs decode as c10 gives them: e5m2 as its half
//!   value widened (quiet, sign and payload kept), e4m3fn as sign |
//!   0x7FF00000, fnuz and e8m0fnu as 0x7F800001.
//!
//! Hand-written rather than taken from the `float8` crate (0.7): that crate
//! has only e4m3fn and e5m2, saturates e5m2 to +-57344 where c10 gives inf,
//! and drops the sign of negative values that underflow; against the c10
//! oracle it disagreed on 64 of 1254 encodings.

/// A one-byte float format of c10.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Float8Format {
    /// Float8_e5m2: IEEE-like, bias 15, with infinities.
    E5M2,
    /// Float8_e4m3fn: bias 7, finite (saturating), NaN 0x7F / 0xFF.
    E4M3Fn,
    /// Float8_e5m2fnuz: bias 16, finite, one NaN (0x80), no negative zero.
    E5M2Fnuz,
    /// Float8_e4m3fnuz: bias 8, finite, one NaN (0x80), no negative zero.
    E4M3Fnuz,
    /// Float8_e8m0fnu: an unsigned power of two 2^(b-127), NaN 0xFF.
    E8M0Fnu,
}

impl Float8Format {
    /// Every format, in c10's dtype numbering order.
    pub const ALL: [Float8Format; 5] = [
        Float8Format::E5M2,
        Float8Format::E4M3Fn,
        Float8Format::E5M2Fnuz,
        Float8Format::E4M3Fnuz,
        Float8Format::E8M0Fnu,
    ];

    /// c10's name of the dtype.
    pub fn name(self) -> &'static str {
        match self {
            Float8Format::E5M2 => "Float8_e5m2",
            Float8Format::E4M3Fn => "Float8_e4m3fn",
            Float8Format::E5M2Fnuz => "Float8_e5m2fnuz",
            Float8Format::E4M3Fnuz => "Float8_e4m3fnuz",
            Float8Format::E8M0Fnu => "Float8_e8m0fnu",
        }
    }

    /// The f32 value of the byte `b` (exact; NaNs as c10 gives them).
    #[inline(always)]
    pub fn decode(self, b: u8) -> f32 {
        let table = match self {
            Float8Format::E5M2 => &E5M2_TABLE,
            Float8Format::E4M3Fn => &E4M3FN_TABLE,
            Float8Format::E5M2Fnuz => &E5M2FNUZ_TABLE,
            Float8Format::E4M3Fnuz => &E4M3FNUZ_TABLE,
            Float8Format::E8M0Fnu => &E8M0FNU_TABLE,
        };
        f32::from_bits(table[b as usize])
    }

    /// The byte closest to `f` (c10's rounding, NaN and overflow rules).
    #[inline(always)]
    pub const fn encode(self, f: f32) -> u8 {
        match self {
            Float8Format::E5M2 => f32_to_e5m2(f),
            Float8Format::E4M3Fn => f32_to_e4m3fn(f),
            Float8Format::E5M2Fnuz => f32_to_e5m2fnuz(f),
            Float8Format::E4M3Fnuz => f32_to_e4m3fnuz(f),
            Float8Format::E8M0Fnu => f32_to_e8m0fnu(f),
        }
    }

    /// The f32 bits of every byte, indexed by the byte.
    pub fn decode_table(self) -> &'static [u32; 256] {
        match self {
            Float8Format::E5M2 => &E5M2_TABLE,
            Float8Format::E4M3Fn => &E4M3FN_TABLE,
            Float8Format::E5M2Fnuz => &E5M2FNUZ_TABLE,
            Float8Format::E4M3Fnuz => &E4M3FNUZ_TABLE,
            Float8Format::E8M0Fnu => &E8M0FNU_TABLE,
        }
    }
}

const SIGN: u32 = 0x8000_0000;
const F32_INF: u32 = 0x7F80_0000;

/// `x >> s` rounded to nearest, ties to even (1 <= s <= 31).
#[inline(always)]
const fn shift_rne(x: u32, s: u32) -> u32 {
    let q = x >> s;
    let rest = x & ((1 << s) - 1);
    let half = 1 << (s - 1);
    if rest > half || (rest == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// The magnitude code of a finite, non-negative f32 (bits `a`) in a format
/// with `m` mantissa bits and exponent bias `bias`, rounded to nearest
/// even; subnormal in the format below 2^(1-bias). A rounding carry moves
/// into the exponent field, and codes past the format's range come out
/// larger than its largest (the callers saturate or overflow).
#[inline(always)]
const fn magnitude(a: u32, m: u32, bias: i32) -> u32 {
    let field = (a >> 23) as i32;
    let (exp, sig) = if field == 0 {
        (-126, a & 0x7F_FFFF)
    } else {
        (field - 127, (a & 0x7F_FFFF) | 0x80_0000)
    };
    let min_exp = 1 - bias;
    if exp >= min_exp {
        // Normal: exponent field exp + bias over the m kept bits; sig's
        // implicit bit adds one to the field, hence the - 1.
        (((exp + bias - 1) as u32) << m) + shift_rne(sig, 23 - m)
    } else {
        // Subnormal in the format: units of 2^(min_exp - m).
        let s = 23 - m + (min_exp - exp) as u32;
        if s > 31 {
            0
        } else {
            shift_rne(sig, s)
        }
    }
}

/// An IEEE-like format with `m` mantissa bits and bias `bias` whose
/// finite and infinite values past the top encode as `top` and NaN as 0x7F
/// with its sign (e5m2: top = inf, e4m3fn: top = the largest, saturating).
/// Branch-free, so loops of it vectorize; the same arithmetic as the AVX2
/// kernel (kernels/simd.rs): a normal result rounds on the f32 bits
/// (rebias, add half an ulp less one plus the kept lsb, shift), a result
/// below the smallest normal by a float add that aligns the value to the
/// subnormal unit (the FPU's nearest even). Equal to [`magnitude`]'s
/// rounding (checked over all 2^32 inputs against c10).
#[inline(always)]
const fn f32_to_ieee8(f: f32, m: u32, bias: i32, top: u32) -> u8 {
    let bits = f.to_bits();
    let sign = (bits >> 24) & 0x80;
    let a = bits & !SIGN;
    let shift = 23 - m;
    let rebias = (((bias - 127) as u32) << 23).wrapping_add((1 << (shift - 1)) - 1);
    let normal = a.wrapping_add(rebias).wrapping_add((a >> shift) & 1) >> shift;
    let magic_bits = ((127 + 1 - bias - m as i32 + 23) as u32) << 23;
    let sub = (f32::from_bits(a) + f32::from_bits(magic_bits))
        .to_bits()
        .wrapping_sub(magic_bits);
    let min_normal = ((128 - bias) as u32) << 23;
    let code = if a < min_normal { sub } else { normal };
    let code = if code > top { top } else { code };
    let code = if a > F32_INF { 0x7F } else { code };
    (code | sign) as u8
}

/// f32 -> Float8_e5m2: nearest even; past 57344 (from 61440 on) +-inf;
/// NaN -> 0x7F with the sign.
#[inline(always)]
pub const fn f32_to_e5m2(f: f32) -> u8 {
    f32_to_ieee8(f, 2, 15, 0x7C)
}

/// f32 -> Float8_e4m3fn: nearest even, saturating at +-448 (inf too);
/// NaN -> 0x7F with the sign.
#[inline(always)]
pub const fn f32_to_e4m3fn(f: f32) -> u8 {
    f32_to_ieee8(f, 3, 7, 0x7E)
}

/// The fnuz formats: NaN, inf and values rounding past the largest give
/// 0x80; zero (of either sign) gives 0x00.
#[inline(always)]
const fn f32_to_fnuz(f: f32, m: u32, bias: i32) -> u8 {
    let bits = f.to_bits();
    let a = bits & !SIGN;
    if a >= F32_INF {
        return 0x80;
    }
    let c = magnitude(a, m, bias);
    if c >= 0x80 {
        0x80
    } else if c == 0 {
        0
    } else {
        c as u8 | ((bits & SIGN) >> 24) as u8
    }
}

/// f32 -> Float8_e5m2fnuz: nearest even; past 57344 (from 61440 on), inf
/// and NaN -> 0x80; no negative zero.
#[inline(always)]
pub const fn f32_to_e5m2fnuz(f: f32) -> u8 {
    f32_to_fnuz(f, 2, 16)
}

/// f32 -> Float8_e4m3fnuz: nearest even; past 240 (from 248 on), inf and
/// NaN -> 0x80; no negative zero.
#[inline(always)]
pub const fn f32_to_e4m3fnuz(f: f32) -> u8 {
    f32_to_fnuz(f, 3, 8)
}

/// f32 -> Float8_e8m0fnu: the sign dropped, f32's exponent field, plus one
/// when the significand is >= 1.5 (normal f32) or > 0.5 (subnormal f32);
/// NaN and inf -> 0xFF, and 0xFF also past 2^127.
#[inline(always)]
pub const fn f32_to_e8m0fnu(f: f32) -> u8 {
    let bits = f.to_bits();
    let field = (bits >> 23) & 0xFF;
    if field == 0xFF {
        return 0xFF;
    }
    let frac = bits & 0x7F_FFFF;
    let up = if field > 0 {
        frac >= 0x40_0000
    } else {
        frac > 0x40_0000
    };
    (field + up as u32) as u8
}

/// f32 bits of an IEEE-like byte format with `m` mantissa bits and bias
/// `bias`, for a byte whose exponent field is not the all-ones of a format
/// with infinities (callers handle their specials first).
const fn ieee_like_bits(b: u8, m: u32, bias: i32) -> u32 {
    let sign = ((b as u32) & 0x80) << 24;
    let field = ((b as u32) & 0x7F) >> m;
    let mant = (b as u32) & ((1 << m) - 1);
    if field == 0 {
        if mant == 0 {
            return sign;
        }
        // Subnormal: mant * 2^(1 - bias - m), normalised for f32.
        let top = 31 - mant.leading_zeros(); // highest set bit of mant
        let exp = 1 - bias - m as i32 + top as i32;
        let frac = (mant & !(1 << top)) << (23 - top);
        return sign | (((exp + 127) as u32) << 23) | frac;
    }
    let exp = field as i32 - bias;
    sign | (((exp + 127) as u32) << 23) | (mant << (23 - m))
}

const fn e5m2_bits(b: u8) -> u32 {
    let a = b & 0x7F;
    let sign = ((b as u32) & 0x80) << 24;
    if a == 0x7C {
        sign | F32_INF
    } else if a > 0x7C {
        // Half's NaN widened: quiet, payload kept.
        sign | 0x7FC0_0000 | (((a & 3) as u32) << 21)
    } else {
        ieee_like_bits(b, 2, 15)
    }
}

const fn e4m3fn_bits(b: u8) -> u32 {
    if b & 0x7F == 0x7F {
        (((b as u32) & 0x80) << 24) | 0x7FF0_0000
    } else {
        ieee_like_bits(b, 3, 7)
    }
}

const FNUZ_NAN: u32 = 0x7F80_0001;

const fn fnuz_bits(b: u8, m: u32, bias: i32) -> u32 {
    if b == 0x80 {
        FNUZ_NAN
    } else {
        ieee_like_bits(b, m, bias)
    }
}

const fn e8m0fnu_bits(b: u8) -> u32 {
    match b {
        0 => 0x0040_0000, // 2^-127, an f32 subnormal
        0xFF => FNUZ_NAN,
        _ => (b as u32) << 23,
    }
}

const fn table(format: u8) -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        t[i] = match format {
            0 => e5m2_bits(b),
            1 => e4m3fn_bits(b),
            2 => fnuz_bits(b, 2, 16),
            3 => fnuz_bits(b, 3, 8),
            _ => e8m0fnu_bits(b),
        };
        i += 1;
    }
    t
}

static E5M2_TABLE: [u32; 256] = table(0);
static E4M3FN_TABLE: [u32; 256] = table(1);
static E5M2FNUZ_TABLE: [u32; 256] = table(2);
static E4M3FNUZ_TABLE: [u32; 256] = table(3);
static E8M0FNU_TABLE: [u32; 256] = table(4);

/// Float8_e5m2 -> f32.
#[inline(always)]
pub fn e5m2_to_f32(b: u8) -> f32 {
    f32::from_bits(E5M2_TABLE[b as usize])
}

/// Float8_e4m3fn -> f32.
#[inline(always)]
pub fn e4m3fn_to_f32(b: u8) -> f32 {
    f32::from_bits(E4M3FN_TABLE[b as usize])
}

/// Float8_e5m2fnuz -> f32.
#[inline(always)]
pub fn e5m2fnuz_to_f32(b: u8) -> f32 {
    f32::from_bits(E5M2FNUZ_TABLE[b as usize])
}

/// Float8_e4m3fnuz -> f32.
#[inline(always)]
pub fn e4m3fnuz_to_f32(b: u8) -> f32 {
    f32::from_bits(E4M3FNUZ_TABLE[b as usize])
}

/// Float8_e8m0fnu -> f32.
#[inline(always)]
pub fn e8m0fnu_to_f32(b: u8) -> f32 {
    f32::from_bits(E8M0FNU_TABLE[b as usize])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        use Float8Format::*;
        assert_eq!(E4M3Fn.decode(0x7E), 448.0);
        assert_eq!(E4M3Fn.decode(0x01), 2f32.powi(-9));
        assert_eq!(E5M2.decode(0x7B), 57344.0);
        assert_eq!(E5M2.decode(0x01), 2f32.powi(-16));
        assert_eq!(E5M2.decode(0x7C), f32::INFINITY);
        assert_eq!(E4M3Fnuz.decode(0x7F), 240.0);
        assert_eq!(E4M3Fnuz.decode(0x01), 2f32.powi(-10));
        assert_eq!(E5M2Fnuz.decode(0x7F), 57344.0);
        assert_eq!(E5M2Fnuz.decode(0x01), 2f32.powi(-17));
        assert_eq!(E8M0Fnu.decode(127), 1.0);
        assert_eq!(E8M0Fnu.decode(0), 2f32.powi(-127));
        assert!(E8M0Fnu.decode(0xFF).is_nan());
        assert_eq!(E4M3Fn.encode(1.0), 0x38);
        assert_eq!(E4M3Fn.encode(-0.0), 0x80);
        assert_eq!(E4M3Fnuz.encode(-0.0), 0x00);
        assert_eq!(E4M3Fn.encode(f32::INFINITY), 0x7E);
        assert_eq!(E5M2.encode(f32::NEG_INFINITY), 0xFC);
        assert_eq!(E8M0Fnu.encode(-3.0), 128 + 1);
    }
}
