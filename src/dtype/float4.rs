//! Float4_e2m1fn (OCP MX FP4: 1 sign, 2 exponent bits of bias 1, 1
//! mantissa bit; values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no inf, no NaN)
//! and the packed pairs of c10's Float4_e2m1fn_x2 (val0 in bits 0-3, val1
//! in bits 4-7).
//!
//! c10 (PyTorch 2.15) stores Float4_e2m1fn_x2 as an opaque byte: it has no
//! conversion to or from any other dtype (copy_ and fill_ raise), so
//! tessera's kernels do the same (same-dtype copies move bytes). These
//! functions are for hosts that pack and unpack values themselves; the
//! encoding rounds to nearest even and saturates at +-6 (inf too, as the
//! MX spec's conversion does), and NaN, which the format cannot hold,
//! encodes as +-6 with its sign (the spec leaves it to the implementation).

/// The f32 value of the e2m1 code in the low 4 bits of `nibble`.
#[inline]
pub fn e2m1_to_f32(nibble: u8) -> f32 {
    const VALUES: [f32; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let v = VALUES[(nibble & 7) as usize];
    if nibble & 8 != 0 {
        -v
    } else {
        v
    }
}

/// The e2m1 code (low 4 bits) nearest to `f`, ties to even, saturating at
/// +-6; NaN gives +-6 with its sign bit.
#[inline]
pub fn f32_to_e2m1(f: f32) -> u8 {
    let bits = f.to_bits();
    let sign = ((bits >> 28) & 8) as u8;
    let a = bits & 0x7FFF_FFFF;
    let field = (a >> 23) as i32;
    let code = if field >= 0x81 {
        // 4 and above (inf and NaN included): 4 or 6 when in range.
        if a >= 0x40A0_0000 {
            // The tie 5 goes to 4 (code 6, even); above it, 6 (code 7).
            if a == 0x40A0_0000 {
                6
            } else {
                7
            }
        } else {
            6
        }
    } else {
        // Below 4: units of 0.5 up to 2, then of 1; nearest even by the
        // float's own rounding of a scaled value (exact: at most 24 bits).
        let x = f32::from_bits(a);
        if x < 2.0 {
            // 0, 0.5, 1, 1.5 -> codes 0..3; 2 -> code 4.
            round_half_even(x * 2.0) as u8
        } else {
            // 2, 3 -> codes 4, 5; 4 -> code 6.
            (round_half_even(x) as u8) + 2
        }
    };
    code | sign
}

/// `x` (non-negative, below 2^23) rounded to the nearest integer, ties to
/// even.
#[inline]
fn round_half_even(x: f32) -> u32 {
    let t = x.trunc();
    let frac = x - t;
    let t = t as u32;
    if frac > 0.5 || (frac == 0.5 && t & 1 == 1) {
        t + 1
    } else {
        t
    }
}

/// The two values of a Float4_e2m1fn_x2 byte: [val0 (bits 0-3), val1
/// (bits 4-7)].
#[inline]
pub fn unpack_x2(b: u8) -> [f32; 2] {
    [e2m1_to_f32(b & 0xF), e2m1_to_f32(b >> 4)]
}

/// A Float4_e2m1fn_x2 byte holding `v0` (bits 0-3) and `v1` (bits 4-7).
#[inline]
pub fn pack_x2(v0: f32, v1: f32) -> u8 {
    f32_to_e2m1(v0) | (f32_to_e2m1(v1) << 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every nibble decodes to the MX spec's value; all 16 round-trip.
    #[test]
    fn every_nibble() {
        let expect = [
            0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0,
        ];
        for n in 0..16u8 {
            let v = e2m1_to_f32(n);
            assert_eq!(v.to_bits(), f32::to_bits(expect[n as usize]), "nibble {n}");
            assert_eq!(f32_to_e2m1(v), n, "nibble {n} round trip");
        }
    }

    /// Ties go to the even code, the values beside them to the nearest.
    #[test]
    fn ties_to_even_and_saturation() {
        let cases: [(f32, u8); 18] = [
            (0.25, 0), // tie 0 / 0.5 -> 0 (even)
            (0.2500001, 1),
            (0.75, 2), // tie 0.5 / 1 -> 1 (code 2)
            (0.7499999, 1),
            (1.25, 2), // tie 1 / 1.5 -> 1 (code 2, even)
            (1.75, 4), // tie 1.5 / 2 -> 2 (code 4)
            (2.5, 4),  // tie 2 / 3 -> 2 (code 4)
            (2.5000002, 5),
            (3.5, 6), // tie 3 / 4 -> 4 (code 6)
            (3.4999998, 5),
            (5.0, 6), // tie 4 / 6 -> 4 (code 6)
            (5.0000005, 7),
            (4.9999995, 6),
            (7.0, 7),
            (1e30, 7),
            (f32::INFINITY, 7),
            (f32::NAN, 7),
            (1e-30, 0),
        ];
        for (x, code) in cases {
            assert_eq!(f32_to_e2m1(x), code, "{x}");
            assert_eq!(f32_to_e2m1(-x), code | 8, "-{x}");
        }
    }

    #[test]
    fn pairs_pack_low_nibble_first() {
        assert_eq!(pack_x2(1.0, -6.0), 0x2 | (0xF << 4));
        assert_eq!(unpack_x2(0xF2), [1.0, -6.0]);
    }
}
