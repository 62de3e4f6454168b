//! `kernels::vector_norm` (c10's `linalg.vector_norm`) against a
//! straightforward reference: every floating and complex dtype, layouts,
//! every dims subset, keepdim, each ord kind (2, 1, inf, -inf, 0, other
//! p), NaN, empty dims, the dtype rules and refusals.

use half::{bf16, f16};
use tessera::kernels;
use tessera::kernels::elem::{Complex, Elem};
use tessera::{DType, Device, ErrorKind, Tensor};

#[path = "common/kernel_values.rs"]
mod kernel_values;
use kernel_values::*;

const ORDS: [f64; 7] = [2.0, 1.0, f64::INFINITY, f64::NEG_INFINITY, 0.0, 3.0, 0.5];

/// The reference norm of each output's magnitudes, in f64.
fn reference<T: Elem>(a: &Tensor, mask: &[bool], ord: f64) -> Vec<f64> {
    let mag = |x: T| {
        let c = x.cast::<Complex<f64>>();
        c.re.hypot(c.im)
    };
    let init = if ord == f64::NEG_INFINITY {
        f64::INFINITY
    } else {
        0.0
    };
    let acc = reference_reduce::<T, f64>(a, mask, init, |s, x| {
        let m = mag(x);
        if ord == f64::INFINITY {
            if s.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                s.max(m)
            }
        } else if ord == f64::NEG_INFINITY {
            if s.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                s.min(m)
            }
        } else if ord == 0.0 {
            s + if m != 0.0 { 1.0 } else { 0.0 }
        } else {
            s + m.powf(ord)
        }
    });
    acc.into_iter()
        .map(|s| {
            if ord == 0.0 || ord == 1.0 || ord.is_infinite() {
                s
            } else {
                s.powf(1.0 / ord)
            }
        })
        .collect()
}

fn check_norm<T: Elem>(tolerance: f64) {
    let real = T::DTYPE.to_real();
    for (what, a) in reduce_inputs::<T>() {
        for dims in DIMS {
            if dims.iter().any(|&d| d >= a.ndim() as i64) {
                continue;
            }
            let mask = mask_of(a.ndim(), dims);
            for ord in ORDS {
                for keepdim in [false, true] {
                    let got = kernels::vector_norm(&a, ord, dims, keepdim).unwrap();
                    let label = format!(
                        "norm {ord} {:?} {what} dims {dims:?} keepdim {keepdim}",
                        T::DTYPE
                    );
                    assert_eq!(got.dtype(), real, "{label}");
                    assert_eq!(got.sizes(), &final_sizes(&a, &mask, keepdim)[..], "{label}");
                    let got: Vec<f64> = to_vec_real(&got);
                    let want: Vec<f64> = reference::<T>(&a, &mask, ord)
                        .into_iter()
                        .map(|w| round_to(real, w))
                        .collect();
                    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                        let exact = ord == 1.0 || ord == 0.0 || ord.is_infinite();
                        let tol = if exact && !T::DTYPE.is_complex() {
                            0.0
                        } else {
                            tolerance
                        };
                        assert!(
                            g == w
                                || (g.is_nan() && w.is_nan())
                                || (g - w).abs() <= tol * w.abs().max(1.0),
                            "{label}: element {i}: got {g}, want {w}"
                        );
                    }
                }
            }
        }
    }
}

/// `v` rounded to a real dtype (as the result is narrowed), as f64.
fn round_to(dtype: DType, v: f64) -> f64 {
    match dtype {
        DType::Half => f16::from_f64(v).to_f64(),
        DType::BFloat16 => bf16::from_f64(v).to_f64(),
        DType::Float => v as f32 as f64,
        _ => v,
    }
}

/// A real tensor's elements as f64.
fn to_vec_real(t: &Tensor) -> Vec<f64> {
    match t.dtype() {
        DType::Half => to_vec::<f16>(t).into_iter().map(|v| v.to_f64()).collect(),
        DType::BFloat16 => to_vec::<bf16>(t).into_iter().map(|v| v.to_f64()).collect(),
        DType::Float => to_vec::<f32>(t).into_iter().map(f64::from).collect(),
        DType::Double => to_vec::<f64>(t),
        other => panic!("not a real dtype: {other:?}"),
    }
}

#[test]
fn vector_norm_every_floating_dtype_ord_layout_and_dims() {
    // Half types: the result is rounded to 8 or 11 bits.
    check_norm::<f16>(2e-3);
    check_norm::<bf16>(1e-2);
    check_norm::<f32>(1e-5);
    check_norm::<f64>(1e-12);
    check_norm::<Complex<f16>>(2e-3);
    check_norm::<Complex<bf16>>(1e-2);
    check_norm::<Complex<f32>>(1e-5);
    check_norm::<Complex<f64>>(1e-12);
}

#[test]
fn vector_norm_values_nan_and_refusals() {
    let t = from_vec::<f32>(&[2, 2], &[3.0, -4.0, 0.0, 1.0]);
    let n = |ord: f64, dims: &[i64]| {
        to_vec::<f32>(&kernels::vector_norm(&t, ord, dims, false).unwrap())
    };
    assert_eq!(n(2.0, &[1]), [5.0, 1.0]);
    assert_eq!(n(1.0, &[]), [8.0]);
    assert_eq!(n(f64::INFINITY, &[0]), [3.0, 4.0]);
    assert_eq!(n(f64::NEG_INFINITY, &[]), [0.0]);
    assert_eq!(n(0.0, &[]), [3.0]);
    let c = from_vec::<Complex<f32>>(&[1], &[Complex::new(3.0, 4.0)]);
    let r = kernels::vector_norm(&c, 2.0, &[], false).unwrap();
    assert_eq!((r.dtype(), to_vec::<f32>(&r)), (DType::Float, vec![5.0]));
    let nan = from_vec::<f32>(&[3], &[1.0, f32::NAN, 2.0]);
    for ord in ORDS {
        let r = kernels::vector_norm(&nan, ord, &[], false).unwrap();
        assert_eq!(to_vec::<f32>(&r)[0].is_nan(), ord != 0.0, "ord {ord}");
    }
    // Integers refused, naming the dtype; NaN ord; empty sets without an
    // identity.
    let i = Tensor::empty(&[2], DType::Long, Device::CPU).unwrap();
    let e = kernels::vector_norm(&i, 2.0, &[], false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DType);
    assert!(
        e.message().contains("Long") && e.message().contains("cast"),
        "{e}"
    );
    let e = kernels::vector_norm(&t, f64::NAN, &[], false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    let empty = Tensor::empty(&[3, 0], DType::Float, Device::CPU).unwrap();
    let zero = to_vec::<f32>(&kernels::vector_norm(&empty, 2.0, &[1], false).unwrap());
    assert_eq!(zero, [0.0; 3]);
    for ord in [f64::INFINITY, f64::NEG_INFINITY, -1.0] {
        let e = kernels::vector_norm(&empty, ord, &[1], false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Shape, "ord {ord}");
    }
}

/// The 2-norm of a real input is one pass (the sum of squares); for
/// float and double it has the bits of the two passes it replaced, the
/// sum of the squared tensor (same layout, same pairwise order), and
/// the same bits with and without AVX2, on 1 and 2 threads, over every
/// dim and all; half and bfloat16 the same with and without AVX2.
#[test]
fn the_two_norm_is_one_pass_with_the_bits_of_the_sum_of_squares() {
    // Without AVX2 (aarch64, or a CPU without it) both runs take the
    // portable path: each is run once, and 16-bit types, which have no
    // two-pass check, are left out (under qemu-user the second run cost
    // a minute of emulation for nothing).
    let avx2 = kernels::simd::set_avx2_enabled(true);
    fn check<T: Elem>(two_pass: bool, avx2: bool) {
        let n = 4 * 70_001 + 3;
        let v: Vec<T> = random_bits(n)
            .iter()
            .map(|&b| T::from_complex((b % 100_003) as f64 * 0.001_37 - 60.0, 0.0))
            .collect();
        let flat = from_vec(&[n as i64], &v);
        let m =
            |off: i64, r: i64, c: i64| flat.narrow(0, off, r * c).unwrap().view(&[r, c]).unwrap();
        let inputs = [
            flat.clone(),
            m(0, 40, 4099),
            m(1, 9, 4099),
            m(3, 64, 1000),
            m(0, 4099, 3),
            m(1, 5, 20000),
            flat.narrow(0, 2, 6300).unwrap().view(&[3, 300, 7]).unwrap(),
        ];
        let bits = |t: &Tensor| -> Vec<u64> {
            let r = t.to_dtype(DType::Double).unwrap();
            to_vec::<f64>(&r).iter().map(|x| x.to_bits()).collect()
        };
        for threads in [1, 2] {
            tessera::parallel::set_num_threads(threads);
            for t in &inputs {
                let dims: Vec<Vec<i64>> = (0..t.ndim() as i64)
                    .map(|d| vec![d])
                    .chain([vec![]])
                    .collect();
                for d in &dims {
                    let run = |avx2: bool| {
                        kernels::simd::set_avx2_enabled(avx2);
                        kernels::vector_norm(t, 2.0, d, false).unwrap()
                    };
                    let with = run(true);
                    let label = format!(
                        "{:?} {:?} over {d:?}, {threads} threads",
                        T::DTYPE,
                        t.sizes()
                    );
                    if avx2 {
                        let without = run(false);
                        kernels::simd::set_avx2_enabled(true);
                        assert_eq!(
                            bits(&with),
                            bits(&without),
                            "{label}: AVX2 against portable"
                        );
                    }
                    if two_pass {
                        let squares = kernels::mul(None, t, t).unwrap();
                        let sums = to_vec::<f64>(
                            &kernels::sum(&squares, d, false)
                                .unwrap()
                                .to_dtype(DType::Double)
                                .unwrap(),
                        );
                        let want: Vec<u64> = sums
                            .iter()
                            .map(|&s| {
                                let root = if T::DTYPE == DType::Float {
                                    (s as f32).sqrt() as f64
                                } else {
                                    s.sqrt()
                                };
                                root.to_bits()
                            })
                            .collect();
                        assert_eq!(bits(&with), want, "{label}: against sqrt(sum(x * x))");
                    }
                }
            }
        }
    }
    check::<f32>(true, avx2);
    check::<f64>(true, avx2);
    if avx2 {
        check::<f16>(false, avx2);
        check::<bf16>(false, avx2);
    }
}
