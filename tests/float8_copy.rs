//! Copies (`copy_`, `to_dtype`, the iterator's cast temporaries) and fill
//! for the float8 types, against c10's copy kernel
//! (tests/data/float8_copy_cases.txt, libtorch 2.15 through `Tensor.to()`,
//! made by scripts/float8_copy_cases.cpp), plus round trips through every
//! other dtype and Float4_e2m1fn_x2's refusals.

use tessera::dtype::float8::Float8Format;
use tessera::kernels;
use tessera::{DType, Device, ErrorKind, Scalar, Tensor};

const FLOAT8: [(DType, Float8Format); 5] = [
    (DType::Float8E5M2, Float8Format::E5M2),
    (DType::Float8E4M3Fn, Float8Format::E4M3Fn),
    (DType::Float8E5M2Fnuz, Float8Format::E5M2Fnuz),
    (DType::Float8E4M3Fnuz, Float8Format::E4M3Fnuz),
    (DType::Float8E8M0Fnu, Float8Format::E8M0Fnu),
];

/// Every dtype a float8 type converts to and from.
const OTHERS: [DType; 17] = [
    DType::Bool,
    DType::Byte,
    DType::Char,
    DType::Short,
    DType::Int,
    DType::Long,
    DType::UInt16,
    DType::UInt32,
    DType::UInt64,
    DType::Half,
    DType::BFloat16,
    DType::Float,
    DType::Double,
    DType::ComplexHalf,
    DType::ComplexFloat,
    DType::ComplexDouble,
    DType::BComplex32,
];

fn format_of(d: DType) -> Float8Format {
    FLOAT8.iter().find(|(t, _)| *t == d).unwrap().1
}

/// A 1-D contiguous tensor of `dtype` holding `bytes`.
fn from_bytes(dtype: DType, bytes: &[u8]) -> Tensor {
    let n = bytes.len() / dtype.itemsize();
    let t = Tensor::empty(&[n as i64], dtype, Device::CPU).unwrap();
    // SAFETY: the tensor owns n * itemsize contiguous bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), t.data_ptr() as *mut u8, bytes.len()) };
    t
}

/// The bytes of a contiguous tensor.
fn bytes_of(t: &Tensor) -> Vec<u8> {
    let n = t.numel() as usize * t.dtype().itemsize();
    // SAFETY: contiguous tensors of the tests: n bytes from data_ptr.
    unsafe { std::slice::from_raw_parts(t.data_ptr() as *const u8, n) }.to_vec()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn cases(kind: &str) -> impl Iterator<Item = Vec<&'static str>> + '_ {
    include_str!("data/float8_copy_cases.txt")
        .lines()
        .filter(move |l| l.starts_with(kind))
        .map(|l| l.split(' ').collect())
}

/// The integer range of an integer dtype, [lo, hi) as f64 (exact powers
/// of two).
fn int_range(d: DType) -> Option<(f64, f64)> {
    let p = |e: i32| 2f64.powi(e);
    Some(match d {
        DType::Byte => (0.0, p(8)),
        DType::Char => (-p(7), p(7)),
        DType::Short => (-p(15), p(15)),
        DType::Int => (-p(31), p(31)),
        DType::Long => (-p(63), p(63)),
        DType::UInt16 => (0.0, p(16)),
        DType::UInt32 => (0.0, p(32)),
        DType::UInt64 => (0.0, p(64)),
        _ => return None,
    })
}

/// tessera's float -> integer rule (Rust's `as`: truncation, saturation,
/// NaN to 0), little-endian bytes.
fn saturating_int_bytes(v: f32, d: DType) -> Vec<u8> {
    match d {
        DType::Byte => (v as u8).to_le_bytes().to_vec(),
        DType::Char => (v as i8).to_le_bytes().to_vec(),
        DType::Short => (v as i16).to_le_bytes().to_vec(),
        DType::Int => (v as i32).to_le_bytes().to_vec(),
        DType::Long => (v as i64).to_le_bytes().to_vec(),
        DType::UInt16 => (v as u16).to_le_bytes().to_vec(),
        DType::UInt32 => (v as u32).to_le_bytes().to_vec(),
        DType::UInt64 => (v as u64).to_le_bytes().to_vec(),
        _ => unreachable!(),
    }
}

/// Every byte of each float8 type copied to every other dtype, as c10's
/// copy kernel gives it. The exceptions are the values C++ leaves
/// undefined (a float out of an integer type's range, or NaN, converted to
/// it), where tessera saturates as it does from Float.
#[test]
fn float8_to_every_dtype_as_c10() {
    let (mut pairs, mut undefined_in_cpp, mut compared) = (0, 0, 0);
    for f in cases("F ") {
        let (src_t, dst_t) = (
            DType::from_name(f[1]).unwrap(),
            DType::from_name(f[2]).unwrap(),
        );
        let want = unhex(f[3]);
        let src = from_bytes(src_t, &(0..=255u8).collect::<Vec<_>>());
        let dst = Tensor::empty(&[256], dst_t, Device::CPU).unwrap();
        kernels::copy_(&dst, &src).unwrap();
        let got = bytes_of(&dst);
        let item = dst_t.itemsize();
        for b in 0..256usize {
            let (g, w) = (&got[b * item..][..item], &want[b * item..][..item]);
            let v = format_of(src_t).decode(b as u8);
            if let Some((lo, hi)) = int_range(dst_t) {
                if v.is_nan() || (v.trunc() as f64) < lo || (v.trunc() as f64) >= hi {
                    assert_eq!(
                        g,
                        saturating_int_bytes(v, dst_t),
                        "{src_t} {b:#04x} -> {dst_t}"
                    );
                    undefined_in_cpp += 1;
                    continue;
                }
            }
            assert_eq!(g, w, "{src_t} {b:#04x} ({v:e}) -> {dst_t}");
            compared += 1;
        }
        pairs += 1;
    }
    assert_eq!(pairs, 5 * 20);
    // 2215 of the 10240 float8 -> integer elements are out of range or
    // NaN; the other 23385 elements of the 100 pairs match c10 exactly.
    assert_eq!((compared, undefined_in_cpp), (23385, 2215));
}

/// Values of every dtype (integers up to 2^63, doubles past f32's range,
/// ties that f64 -> f32 rounding creates, NaN, inf, complex with an
/// imaginary part) copied to each float8 type, as c10's copy kernel.
#[test]
fn every_dtype_to_float8_as_c10() {
    let mut n = 0;
    for f in cases("T ") {
        let (src_t, dst_t) = (
            DType::from_name(f[1]).unwrap(),
            DType::from_name(f[2]).unwrap(),
        );
        let src = from_bytes(src_t, &unhex(f[3]));
        let dst = Tensor::empty(&[src.numel()], dst_t, Device::CPU).unwrap();
        kernels::copy_(&dst, &src).unwrap();
        assert_eq!(bytes_of(&dst), unhex(f[4]), "{src_t} -> {dst_t}");
        // The same through to_dtype (a new tensor).
        assert_eq!(bytes_of(&src.to_dtype(dst_t).unwrap()), unhex(f[4]));
        n += 1;
    }
    assert_eq!(n, 21 * 5 - 5);
}

/// f64 -> float8 rounds to f32 first, as c10: 1.0625 + 2^-40 becomes the
/// tie 1.0625, which e4m3fn rounds to 1.0 (even), not 1.125.
#[test]
fn double_rounds_through_float() {
    let src = from_bytes(DType::Double, &(1.0625f64 + 2f64.powi(-40)).to_le_bytes());
    let dst = src.to_dtype(DType::Float8E4M3Fn).unwrap();
    assert_eq!(bytes_of(&dst), [0x38]);
}

/// Each float8 byte through every other dtype and back: the value comes
/// back where the dtype holds it (floating and complex types: every
/// non-NaN byte, NaN stays NaN; integer types and bool: the bytes whose
/// value they hold exactly). Also through the iterator path (a transposed
/// 16 x 16 view) and between the float8 types.
#[test]
fn round_trips_through_every_dtype() {
    let all: Vec<u8> = (0..=255u8).collect();
    for (t, f) in FLOAT8 {
        let src = from_bytes(t, &all);
        let mut through: Vec<DType> = OTHERS.to_vec();
        through.extend(FLOAT8.iter().map(|p| p.0).filter(|d| *d != t));
        for d in through {
            let mid = src.to_dtype(d).unwrap();
            let back = bytes_of(&mid.to_dtype(t).unwrap());
            // Transposed: the iterator's (and blocked) conversion paths.
            let sq = src.view(&[16, 16]).unwrap().transpose(0, 1).unwrap();
            let mid_t = Tensor::empty(&[16, 16], d, Device::CPU).unwrap();
            kernels::copy_(&mid_t, &sq).unwrap();
            let back_t = Tensor::empty(&[16, 16], t, Device::CPU).unwrap();
            kernels::copy_(&back_t.transpose(0, 1).unwrap(), &mid_t).unwrap();
            assert_eq!(bytes_of(&back_t), back, "{t} via {d}, transposed");
            let mut kept = 0;
            for b in 0..=255u8 {
                let v = f.decode(b);
                let holds = match d {
                    DType::Bool => v.to_bits() == 0 || v == 1.0,
                    DType::Half | DType::ComplexHalf => {
                        f != Float8Format::E8M0Fnu
                            || (v.abs() <= 65504.0 && v.abs() >= 2f32.powi(-24))
                    }
                    _ if d.is_float8() => {
                        let g = format_of(d);
                        !v.is_nan() && g.decode(g.encode(v)).to_bits() == v.to_bits()
                    }
                    _ => match int_range(d) {
                        Some((lo, hi)) => {
                            v.fract() == 0.0
                                && v as f64 >= lo
                                && (v as f64) < hi
                                && v.to_bits() != 0x8000_0000
                        }
                        None => true,
                    },
                };
                let r = back[b as usize];
                if v.is_nan() && !d.is_float8() && !d.is_integral(true) && d != DType::Bool {
                    assert!(f.decode(r).is_nan(), "{t} NaN {b:#04x} via {d} -> {r:#04x}");
                } else if holds && !v.is_nan() {
                    assert_eq!(r, b, "{t} {b:#04x} ({v:e}) via {d}");
                    kept += 1;
                }
            }
            // e8m0fnu has no zero: through Bool only 1.0 comes back.
            assert!(kept >= 1, "{t} via {d}: {kept} values kept");
        }
    }
}

/// fill converts its scalar through f32 with the format's rules, as c10's
/// fill_ (integers rounded once to f32, doubles narrowed first).
#[test]
fn fill_encodes_the_scalar() {
    for (t, f) in FLOAT8 {
        let x = Tensor::empty(&[3, 5], t, Device::CPU).unwrap();
        let strided = x.transpose(0, 1).unwrap();
        for (s, v) in [
            (Scalar::Float(1.5), 1.5f32),
            (Scalar::Float(-300.0), -300.0),
            (Scalar::Float(1e39), f32::INFINITY),
            (Scalar::Float(f64::NAN), f32::NAN),
            (Scalar::Int(100_000), 100_000.0),
            (Scalar::Int((1 << 53) + 1), ((1i64 << 53) + 1) as f32),
            (Scalar::Bool(true), 1.0),
            (Scalar::Complex(2.0, 7.0), 2.0),
        ] {
            kernels::fill_(&strided, s).unwrap();
            assert_eq!(bytes_of(&x), vec![f.encode(v); 15], "{t} fill {s:?}");
        }
    }
    // A few of c10's answers (libtorch 2.15's fill_), for the record.
    let one = |t: DType, s: Scalar| {
        let x = Tensor::empty(&[1], t, Device::CPU).unwrap();
        kernels::fill_(&x, s).unwrap();
        bytes_of(&x)[0]
    };
    assert_eq!(one(DType::Float8E4M3Fn, Scalar::Float(500.0)), 126);
    assert_eq!(one(DType::Float8E5M2, Scalar::Float(1e6)), 124);
    assert_eq!(one(DType::Float8E4M3Fnuz, Scalar::Float(300.0)), 128);
    assert_eq!(one(DType::Float8E5M2Fnuz, Scalar::Float(-3.0)), 198);
    assert_eq!(one(DType::Float8E8M0Fnu, Scalar::Float(1e-30)), 27);
    assert_eq!(one(DType::Float8E8M0Fnu, Scalar::Int(100_000)), 144);
}

/// The iterator's cast temporaries: an output of a float8 type computed in
/// Float and written back through the copy kernel (add with out=), and a
/// scalar input read through a temporary of the float8 common dtype.
#[test]
fn cast_temporaries_convert_float8() {
    let a = from_bytes(
        DType::Float,
        &[1.5f32, 3.0, 250.0, -0.25].map(f32::to_le_bytes).concat(),
    );
    let b = from_bytes(
        DType::Float,
        &[0.25f32, 1.0, 250.0, 0.0].map(f32::to_le_bytes).concat(),
    );
    for (t, f) in FLOAT8 {
        let out = Tensor::empty(&[4], t, Device::CPU).unwrap();
        kernels::add(Some(&out), &a, &b, Scalar::Int(1)).unwrap();
        let want: Vec<u8> = [1.75f32, 4.0, 500.0, -0.25]
            .iter()
            .map(|v| f.encode(*v))
            .collect();
        assert_eq!(bytes_of(&out), want, "add into {t}");
    }
    // A float8 tensor with a wrapped scalar: the common dtype stays the
    // float8 type (one category, as c10's result_type), and the iterator
    // reads the scalar through a temporary of it made by the copy kernel.
    for (t, f) in FLOAT8 {
        let x = from_bytes(t, &[0x38, 0x40]);
        let mut config = tessera::iterator::IterConfig::new();
        config
            .add_output(None)
            .unwrap()
            .add_input(x)
            .unwrap()
            .add_input_scalar(Scalar::Float(300.0))
            .unwrap()
            .promote_inputs_to_common_dtype(true);
        let it = config.build().unwrap();
        assert_eq!((it.dtype(0), it.dtype(2)), (t, t));
        assert_eq!(bytes_of(it.tensor(2)), [f.encode(300.0)], "{t}");
    }
}

/// Float4_e2m1fn_x2 as c10: equal-dtype copies move bytes, conversions
/// and fill are refused with the dtype named.
#[test]
fn float4_x2_copies_bytes_and_refuses_conversions() {
    let t = DType::Float4E2M1FnX2;
    let src = from_bytes(t, &(0..16u8).map(|i| i * 17).collect::<Vec<_>>());
    let dst = Tensor::empty(&[4, 4], t, Device::CPU).unwrap();
    kernels::copy_(&dst, &src.view(&[4, 4]).unwrap().transpose(0, 1).unwrap()).unwrap();
    let got = bytes_of(&dst);
    for i in 0..4 {
        for j in 0..4 {
            assert_eq!(got[i * 4 + j], ((j * 4 + i) * 17) as u8);
        }
    }
    let f = Tensor::empty(&[16], DType::Float, Device::CPU).unwrap();
    for (d, s) in [(&f, &src), (&src, &f)] {
        let e = kernels::copy_(d, s).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert!(e.message().contains("Float4_e2m1fn_x2"), "{e}");
    }
    let e = kernels::fill_(&src, Scalar::Float(1.0)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.message().contains("Float4_e2m1fn_x2"), "{e}");
}

/// The vectorized f32 -> e4m3fn / e5m2 copies (AVX2 where the CPU has
/// it) give the scalar encoding for every value: random bit patterns,
/// every tie and neighbour of tests/data/float8_c10_cases.txt, at every
/// alignment and tail length.
#[test]
fn vectorized_float_to_float8_matches_scalar() {
    let mut xs: Vec<u32> = include_str!("data/float8_c10_cases.txt")
        .lines()
        .filter(|l| l.starts_with("E Float8_e4m3fn ") || l.starts_with("E Float8_e5m2 "))
        .map(|l| u32::from_str_radix(l.split(' ').nth(2).unwrap(), 16).unwrap())
        .collect();
    let mut s = 0x2545F4914F6CDD1Du64;
    for _ in 0..200_000 {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        xs.push(s as u32);
    }
    let src = from_bytes(
        DType::Float,
        &xs.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>(),
    );
    for (t, f) in [
        (DType::Float8E4M3Fn, Float8Format::E4M3Fn),
        (DType::Float8E5M2, Float8Format::E5M2),
    ] {
        for (start, len) in [(0, xs.len()), (1, xs.len() - 1), (3, 45), (5, 31), (0, 7)] {
            let part = src.narrow(0, start as i64, len as i64).unwrap();
            let dst = Tensor::empty(&[len as i64], t, Device::CPU).unwrap();
            kernels::copy_(&dst, &part).unwrap();
            let got = bytes_of(&dst);
            for (k, g) in got.iter().enumerate() {
                let x = f32::from_bits(xs[start + k]);
                assert_eq!(*g, f.encode(x), "{t} of {x:e} ({:#010x})", xs[start + k]);
            }
        }
    }
}
