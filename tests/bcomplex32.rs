//! BComplex32 (complex of two bfloat16) computes as c10 computes
//! ComplexHalf: in Complex<f32> op math, each part rounded to bfloat16 on
//! store; sums accumulate in Complex<f32>. Checked against reference
//! loops over the elements. The storage-only dtypes (bits, sub-byte
//! integers, quantized) take views and same-dtype copies but refuse
//! arithmetic naming the dtype.

use half::bf16;
use tessera::kernels::elem::Complex;
use tessera::kernels::{self};
use tessera::{DType, Device, ErrorKind, Scalar, Tensor};

type C = Complex<bf16>;

fn c(re: f32, im: f32) -> C {
    Complex::new(bf16::from_f32(re), bf16::from_f32(im))
}

fn from_vec<T: Copy>(sizes: &[i64], dtype: DType, data: &[T]) -> Tensor {
    assert_eq!(std::mem::size_of::<T>(), dtype.itemsize());
    let t = Tensor::empty(sizes, dtype, Device::CPU).unwrap();
    assert_eq!(t.numel() as usize, data.len());
    let p = t.data_ptr() as *mut T;
    for (i, v) in data.iter().enumerate() {
        // SAFETY: the tensor holds data.len() contiguous elements of T.
        unsafe { p.add(i).write_unaligned(*v) };
    }
    t
}

/// The elements of a tensor in row-major order, read through its strides.
fn to_vec<T: Copy>(t: &Tensor) -> Vec<T> {
    assert_eq!(std::mem::size_of::<T>(), t.dtype().itemsize());
    let (sizes, strides) = (t.sizes().to_vec(), t.strides().to_vec());
    let n = t.numel() as usize;
    let mut idx = vec![0i64; sizes.len()];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let off: i64 = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        // SAFETY: idx stays inside the sizes: the offset is in the storage.
        out.push(unsafe {
            (t.data_ptr() as *const T)
                .offset(off as isize)
                .read_unaligned()
        });
        for d in (0..sizes.len()).rev() {
            idx[d] += 1;
            if idx[d] < sizes[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// Values with bfloat16's 8-bit significand rounding in play: thirds and
/// sevenths, signed, a zero now and then.
fn values(n: usize, seed: usize) -> Vec<C> {
    (0..n)
        .map(|i| {
            let k = (i * 7 + seed * 13) % 23;
            if k == 0 {
                return c(0.0, 0.0);
            }
            let re = (k as f32 - 11.0) / 3.0;
            let im = (((i + seed) % 9) as f32 - 4.0) / 7.0;
            c(re, im)
        })
        .collect()
}

fn widen(v: C) -> (f32, f32) {
    (v.re.to_f32(), v.im.to_f32())
}

fn bits(v: &[C]) -> Vec<(u16, u16)> {
    v.iter().map(|x| (x.re.to_bits(), x.im.to_bits())).collect()
}

#[test]
fn add_matches_the_reference_loop() {
    let (a, b) = (values(35, 1), values(35, 2));
    let ta = from_vec(&[5, 7], DType::BComplex32, &a);
    let tb = from_vec(&[5, 7], DType::BComplex32, &b);
    let out = kernels::add(None, &ta, &tb, Scalar::Complex(0.5, -2.0)).unwrap();
    assert_eq!(out.dtype(), DType::BComplex32);
    let want: Vec<C> = a
        .iter()
        .zip(&b)
        .map(|(&x, &y)| {
            let ((xr, xi), (yr, yi)) = (widen(x), widen(y));
            // alpha * y in Complex<f32>, then x + that, rounded once
            let (ar, ai) = (0.5f32, -2.0f32);
            let (sr, si) = (ar * yr - ai * yi, ar * yi + ai * yr);
            c(xr + sr, xi + si)
        })
        .collect();
    assert_eq!(bits(&to_vec::<C>(&out)), bits(&want));
}

#[test]
fn mul_matches_the_reference_loop_with_broadcast() {
    let (a, b) = (values(24, 3), values(6, 4));
    let ta = from_vec(&[4, 6], DType::BComplex32, &a);
    let tb = from_vec(&[6], DType::BComplex32, &b);
    let out = kernels::mul(
        None,
        &ta.transpose(0, 1).unwrap(),
        &tb.view(&[6, 1]).unwrap(),
    )
    .unwrap();
    assert_eq!(out.sizes(), &[6, 4]);
    let got = to_vec::<C>(&out);
    for i in 0..6 {
        for j in 0..4 {
            let ((xr, xi), (yr, yi)) = (widen(a[j * 6 + i]), widen(b[i]));
            let want = c(xr * yr - xi * yi, xr * yi + xi * yr);
            let g = got[i * 4 + j];
            assert_eq!(bits(&[g]), bits(&[want]), "({i}, {j})");
        }
    }
}

#[test]
fn sub_neg_and_div_compute() {
    let ta = from_vec(&[2], DType::BComplex32, &[c(4.0, 2.0), c(-1.5, 3.0)]);
    let tb = from_vec(&[2], DType::BComplex32, &[c(2.0, 0.0), c(0.5, 0.5)]);
    let d = kernels::sub(None, &ta, &tb, Scalar::Int(1)).unwrap();
    assert_eq!(bits(&to_vec::<C>(&d)), bits(&[c(2.0, 2.0), c(-2.0, 2.5)]));
    let n = kernels::neg(None, &ta).unwrap();
    assert_eq!(bits(&to_vec::<C>(&n)), bits(&[c(-4.0, -2.0), c(1.5, -3.0)]));
    let q = kernels::div(None, &ta, &tb).unwrap();
    // (4+2i)/2 = 2+i; (-1.5+3i)/(0.5+0.5i) = 1.5+4.5i
    assert_eq!(bits(&to_vec::<C>(&q)), bits(&[c(2.0, 1.0), c(1.5, 4.5)]));
}

#[test]
fn sum_accumulates_in_complex_float() {
    let a = values(60, 5);
    let t = from_vec(&[3, 20], DType::BComplex32, &a);
    let all = kernels::sum(&t, &[], false).unwrap();
    assert_eq!(all.dtype(), DType::BComplex32);
    let rows = kernels::sum(&t, &[1], false).unwrap();
    assert_eq!(rows.sizes(), &[3]);
    // reference: f64 sums (exact for these values), rounded once
    let reference = |items: &[C]| {
        let (re, im) = items.iter().fold((0f64, 0f64), |(r, i), v| {
            (r + v.re.to_f64(), i + v.im.to_f64())
        });
        c(re as f32, im as f32)
    };
    assert_eq!(bits(&to_vec::<C>(&all)), bits(&[reference(&a)]));
    let want: Vec<C> = (0..3)
        .map(|r| reference(&a[r * 20..(r + 1) * 20]))
        .collect();
    assert_eq!(bits(&to_vec::<C>(&rows)), bits(&want));
}

#[test]
fn promotion_conversion_and_fill() {
    let tc = from_vec(&[2], DType::BComplex32, &[c(1.0, 2.0), c(-3.0, 0.5)]);
    let tb = from_vec(
        &[2],
        DType::BFloat16,
        &[bf16::from_f32(0.5), bf16::from_f32(2.0)],
    );
    let s = kernels::add(None, &tc, &tb, Scalar::Int(1)).unwrap();
    assert_eq!(s.dtype(), DType::BComplex32);
    assert_eq!(bits(&to_vec::<C>(&s)), bits(&[c(1.5, 2.0), c(-1.0, 0.5)]));
    let th = from_vec(&[2], DType::Half, &[half::f16::from_f32(1.0); 2]);
    let s = kernels::add(None, &tc, &th, Scalar::Int(1)).unwrap();
    assert_eq!(s.dtype(), DType::ComplexFloat);
    assert_eq!(
        to_vec::<Complex<f32>>(&s),
        [Complex::new(2.0, 2.0), Complex::new(-2.0, 0.5)]
    );
    // a conversion through ComplexFloat and back keeps the values
    let cf = tc.to_dtype(DType::ComplexFloat).unwrap();
    assert_eq!(
        to_vec::<Complex<f32>>(&cf),
        [Complex::new(1.0, 2.0), Complex::new(-3.0, 0.5)]
    );
    let back = cf.to_dtype(DType::BComplex32).unwrap();
    assert_eq!(bits(&to_vec::<C>(&back)), bits(&to_vec::<C>(&tc)));
    // 1/3 rounds to bfloat16's nearest
    tc.fill_(Scalar::Complex(1.0 / 3.0, -2.0)).unwrap();
    assert_eq!(
        bits(&to_vec::<C>(&tc)),
        bits(&[Complex::new(bf16::from_f64(1.0 / 3.0), bf16::from_f64(-2.0)); 2])
    );
}

/// The storage-only dtypes: one of each family.
const STORAGE_ONLY: [DType; 6] = [
    DType::Bits8,
    DType::Bits16,
    DType::UInt4,
    DType::Int3,
    DType::QUInt4x2,
    DType::QInt8,
];

#[test]
fn storage_only_dtypes_refuse_arithmetic_naming_the_dtype() {
    for d in STORAGE_ONLY {
        let t = Tensor::empty(&[4], d, Device::CPU).unwrap();
        let errors = [
            kernels::add(None, &t, &t, Scalar::Int(1)).unwrap_err(),
            kernels::mul(None, &t, &t).unwrap_err(),
            kernels::neg(None, &t).unwrap_err(),
            kernels::sum(&t, &[], false).unwrap_err(),
            t.fill_(Scalar::Int(1)).unwrap_err(),
        ];
        for e in errors {
            assert!(
                matches!(e.kind(), ErrorKind::Unsupported | ErrorKind::DType),
                "{d}: {e}"
            );
            assert!(e.message().contains(d.name()), "{d}: {e}");
        }
        // a conversion to or from another dtype is refused too
        let f = Tensor::empty(&[4], DType::Float, Device::CPU).unwrap();
        let e = kernels::copy_(&f, &t).unwrap_err();
        assert!(e.message().contains(d.name()), "{d}: {e}");
    }
}

#[test]
fn storage_only_dtypes_take_views_and_same_dtype_copies() {
    for d in STORAGE_ONLY {
        let n = 12 * d.itemsize();
        let bytes: Vec<u8> = (0..n as u8).map(|b| b.wrapping_mul(37)).collect();
        let src = from_vec(&[n as i64], DType::Byte, &bytes);
        let t = Tensor::from_storage(src.storage(), 0, &[3, 4], None, d).unwrap();
        let tt = t.transpose(0, 1).unwrap().narrow(0, 1, 2).unwrap();
        assert_eq!(tt.sizes(), &[2, 3]);
        let dst = Tensor::empty(&[2, 3], d, Device::CPU).unwrap();
        kernels::copy_(&dst, &tt).unwrap();
        let item = d.itemsize();
        let mut want = Vec::new();
        for i in 1..3 {
            for r in 0..3 {
                let e = r * 4 + i;
                want.extend_from_slice(&bytes[e * item..(e + 1) * item]);
            }
        }
        let got = to_vec::<u8>(
            &Tensor::from_storage(dst.storage(), 0, &[(6 * item) as i64], None, DType::Byte)
                .unwrap(),
        );
        assert_eq!(got, want, "{d}");
    }
}
