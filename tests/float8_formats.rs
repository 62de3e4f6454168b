//! The float8 conversions (src/dtype/float8.rs) against c10 itself:
//! - tests/data/torch_float8.jsonl: the public oracle's rows (every byte of
//!   the five formats decoded, and float32 values encoded), from libtorch
//!   2.15;
//! - tests/data/float8_c10_cases.txt: every representable value, the ties
//!   between neighbours and the floats beside them, overflow, subnormals,
//!   NaN, inf and random floats, encoded, and every byte decoded, with f32
//!   bits exact (NaN payloads included), from libtorch 2.15 through
//!   `Tensor.to()` (scripts/float8_cases.cpp);
//!
//! Plus per-format hand-checked edges and properties. Every one of the 2^32
//! float32 bit patterns, against c10's hashes, is exhaustive/src/main.rs
//! (`cargo run --release -p tessera-exhaustive`: too long for a test).

use proptest::prelude::*;
use serde_json::Value;
use tessera::dtype::float8::Float8Format;

fn format_named(name: &str) -> Float8Format {
    Float8Format::ALL
        .into_iter()
        .find(|f| f.name() == name)
        .unwrap_or_else(|| panic!("unknown float8 dtype {name}"))
}

/// A number of the oracle: a JSON number or "nan" / "inf" / "-inf".
fn oracle_f32(v: &Value) -> f32 {
    match v {
        Value::String(s) => match s.as_str() {
            "nan" => f32::NAN,
            "inf" => f32::INFINITY,
            "-inf" => f32::NEG_INFINITY,
            other => panic!("unexpected value {other}"),
        },
        // Printed from float32 with 9 significant digits: the nearest f32
        // of the decimal is the value.
        other => other.to_string().parse::<f32>().unwrap(),
    }
}

fn oracle_rows() -> Vec<Value> {
    include_str!("data/torch_float8.jsonl")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_byte_decodes_as_the_oracle() {
    let mut n = 0;
    for row in oracle_rows().iter().filter(|r| r["kind"] == "f8_decode") {
        let f = format_named(row["dtype"].as_str().unwrap());
        let b = row["bits"].as_u64().unwrap() as u8;
        let want = oracle_f32(&row["value"]);
        let got = f.decode(b);
        if want.is_nan() {
            assert!(got.is_nan(), "{} {b:#04x}: {got} for NaN", f.name());
        } else {
            assert_eq!(got.to_bits(), want.to_bits(), "{} {b:#04x}", f.name());
        }
        n += 1;
    }
    assert_eq!(n, 5 * 256);
}

#[test]
fn oracle_values_encode_as_c10() {
    let mut n = 0;
    for row in oracle_rows().iter().filter(|r| r["kind"] == "f8_encode") {
        let f = format_named(row["dtype"].as_str().unwrap());
        let x = oracle_f32(&row["in"]);
        let want = row["bits"].as_u64().unwrap() as u8;
        assert_eq!(
            f.encode(x),
            want,
            "{} of {x:e} ({:#010x})",
            f.name(),
            x.to_bits()
        );
        n += 1;
    }
    assert_eq!(n, 5 * 627);
}

fn c10_cases() -> impl Iterator<Item = (char, Float8Format, u32, u32)> {
    include_str!("data/float8_c10_cases.txt")
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let kind = f[0].chars().next().unwrap();
            let (a, b) = if kind == 'D' {
                (
                    f[2].parse().unwrap(),
                    u32::from_str_radix(f[3], 16).unwrap(),
                )
            } else {
                (
                    u32::from_str_radix(f[2], 16).unwrap(),
                    f[3].parse().unwrap(),
                )
            };
            (kind, format_named(f[1]), a, b)
        })
}

/// Decoding gives c10's f32 bits exactly, NaN payloads included.
#[test]
fn every_byte_decodes_to_c10_bits() {
    let mut n = 0;
    for (_, f, b, bits) in c10_cases().filter(|c| c.0 == 'D') {
        assert_eq!(f.decode(b as u8).to_bits(), bits, "{} {b:#04x}", f.name());
        n += 1;
    }
    assert_eq!(n, 5 * 256);
}

/// Ties, their neighbours, overflow, subnormals, NaN, inf, random floats.
#[test]
fn ties_neighbours_and_edges_encode_as_c10() {
    let mut per_format = [0usize; 5];
    for (_, f, x, want) in c10_cases().filter(|c| c.0 == 'E') {
        let v = f32::from_bits(x);
        assert_eq!(
            f.encode(v) as u32,
            want,
            "{} of {v:e} ({x:#010x})",
            f.name()
        );
        per_format[Float8Format::ALL.iter().position(|g| *g == f).unwrap()] += 1;
    }
    for (f, n) in Float8Format::ALL.iter().zip(per_format) {
        assert!(n > 2000, "{}: only {n} cases", f.name());
    }
}

/// Hand-checked edges per format: ties to even, subnormals, signed zero,
/// NaN, infinities and the values past the largest.
#[test]
fn edges_per_format() {
    use Float8Format::*;
    let two = |e: i32| 2f32.powi(e);
    let cases: &[(Float8Format, f32, u8)] = &[
        // e5m2: 1.25 is 0x3D; 1.125 ties 1 (0x3C, even) / 1.25 -> 0x3C,
        // 1.375 ties 1.25 / 1.5 (0x3E, even) -> 0x3E.
        (E5M2, 1.125, 0x3C),
        (E5M2, 1.375, 0x3E),
        (E5M2, two(-16), 0x01),       // smallest subnormal
        (E5M2, two(-17), 0x00),       // tie with zero -> zero (even)
        (E5M2, -two(-17), 0x80),      // keeps the sign
        (E5M2, 1.5 * two(-16), 0x02), // tie 1 / 2 subnormal units -> 2
        (E5M2, 61440.0, 0x7C),        // tie 57344 / "65536" -> inf
        (E5M2, 61439.996, 0x7B),
        (E5M2, f32::INFINITY, 0x7C),
        (E5M2, f32::NEG_INFINITY, 0xFC),
        (E5M2, f32::NAN, 0x7F),
        (E5M2, -f32::NAN, 0xFF),
        // e4m3fn: 1.0625 ties 1 / 1.125 -> 1 (0x38); 1.1875 -> 1.25 (0x3A).
        (E4M3Fn, 1.0625, 0x38),
        (E4M3Fn, 1.1875, 0x3A),
        (E4M3Fn, two(-9), 0x01),
        (E4M3Fn, two(-10), 0x00),
        (E4M3Fn, -two(-10), 0x80),
        (E4M3Fn, 464.0, 0x7E), // tie 448 / 480 -> 448 (even)
        (E4M3Fn, 470.0, 0x7E), // saturates rather than NaN
        (E4M3Fn, -1e30, 0xFE),
        (E4M3Fn, f32::INFINITY, 0x7E),
        (E4M3Fn, f32::NAN, 0x7F),
        (E4M3Fn, -f32::NAN, 0xFF),
        // e5m2fnuz: bias 16, no -0, one NaN.
        (E5M2Fnuz, 1.0, 0x40),
        (E5M2Fnuz, two(-17), 0x01),
        (E5M2Fnuz, -two(-18), 0x00), // tie with zero -> +0
        (E5M2Fnuz, -0.0, 0x00),
        (E5M2Fnuz, 57344.0, 0x7F),
        (E5M2Fnuz, 61440.0, 0x80), // tie past the largest -> NaN
        (E5M2Fnuz, f32::NEG_INFINITY, 0x80),
        (E5M2Fnuz, f32::NAN, 0x80),
        // e4m3fnuz: bias 8.
        (E4M3Fnuz, 1.0, 0x40),
        (E4M3Fnuz, two(-10), 0x01),
        (E4M3Fnuz, -0.0, 0x00),
        (E4M3Fnuz, 240.0, 0x7F),
        (E4M3Fnuz, 247.99998, 0x7F),
        (E4M3Fnuz, 248.0, 0x80), // tie 240 / 256 -> NaN
        (E4M3Fnuz, f32::INFINITY, 0x80),
        // e8m0fnu: sign dropped; +1 from a significand of 1.5 up.
        (E8M0Fnu, 1.0, 127),
        (E8M0Fnu, 1.4999999, 127),
        (E8M0Fnu, 1.5, 128),
        (E8M0Fnu, -1.5, 128),
        (E8M0Fnu, 0.0, 0),
        (E8M0Fnu, two(-127), 0), // f32 subnormal significand 0.5: not above
        (E8M0Fnu, 1.5 * two(-127), 1),
        (E8M0Fnu, f32::MAX, 255), // 2^127 * ~2 -> past the largest: NaN
        (E8M0Fnu, two(127), 254),
        (E8M0Fnu, f32::INFINITY, 255),
        (E8M0Fnu, f32::NAN, 255),
    ];
    for &(f, x, want) in cases {
        assert_eq!(f.encode(x), want, "{} of {x:e}", f.name());
    }
}

/// Whether `b` decodes to NaN.
fn is_nan(f: Float8Format, b: u8) -> bool {
    f.decode(b).is_nan()
}

proptest! {
    /// encode(decode(b)) == b for every byte that is not a NaN.
    #[test]
    fn encode_inverts_decode(fi in 0usize..5, b in any::<u8>()) {
        let f = Float8Format::ALL[fi];
        prop_assume!(!is_nan(f, b));
        prop_assert_eq!(f.encode(f.decode(b)), b, "{} {:#04x}", f.name(), b);
    }

    /// Encoding is monotonic on the signed formats: x <= y gives
    /// decode(encode(x)) <= decode(encode(y)) (within the finite range),
    /// and the result is one of the two representable values around x.
    #[test]
    fn encode_is_monotonic_and_nearest(fi in 0usize..4, x in -60000f32..60000f32, y in -60000f32..60000f32) {
        let f = Float8Format::ALL[fi];
        let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
        let (a, b) = (f.decode(f.encode(lo)), f.decode(f.encode(hi)));
        if !a.is_nan() && !b.is_nan() && a.is_finite() && b.is_finite() {
            prop_assert!(a <= b, "{}: {lo} -> {a}, {hi} -> {b}", f.name());
            // No representable value lies strictly between x and its
            // encoding (nearest, or saturated at the largest).
            for c in 0..=255u8 {
                let v = f.decode(c);
                if v.is_finite() {
                    let between = (v > lo.min(a) && v < lo.max(a)) && v != a;
                    prop_assert!(!between, "{}: {lo} -> {a}, but {v} is nearer", f.name());
                }
            }
        }
    }
}
