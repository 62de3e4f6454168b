//! amax, amin, prod and mean against a straightforward reference fold:
//! every dtype each takes, layouts (contiguous, permuted, sliced,
//! expanded), every dims subset, keepdim, empty dims, NaN placement; the
//! AVX2 amax and amin against the portable lanes, bit for bit, on 1 and 2
//! threads; the dtype rules and refusals.

use half::{bf16, f16};
use tessera::kernels::elem::{Bool, Complex, Elem};
use tessera::kernels::ops::{Arith, Div, Max};
use tessera::kernels::reduce::SumAcc;
use tessera::kernels::{self, simd};
use tessera::{DType, Device, ErrorKind, Tensor};

#[path = "common/kernel_values.rs"]
mod kernel_values;
use kernel_values::*;

type Op = fn(&Tensor, &[i64], bool) -> tessera::Result<Tensor>;

/// amax (MAX) or amin, with its name and the reference step.
fn op(max: bool) -> (&'static str, Op) {
    if max {
        ("amax", kernels::amax)
    } else {
        ("amin", kernels::amin)
    }
}

fn check_pick<T: Elem + std::fmt::Debug>(max: bool)
where
    T::Op: Max,
{
    let (name, f) = op(max);
    for (what, a) in reduce_inputs::<T>() {
        for dims in DIMS {
            if dims.iter().any(|&d| d >= a.ndim() as i64) {
                continue;
            }
            for keepdim in [false, true] {
                let mask = mask_of(a.ndim(), dims);
                let init = if max {
                    <T::Op as Max>::LOWEST
                } else {
                    <T::Op as Max>::HIGHEST
                };
                let want = reference_reduce::<T, T>(&a, &mask, T::from_op(init), |m, x| {
                    let (m, x) = (m.to_op(), x.to_op());
                    T::from_op(if max { m.max_nan(x) } else { m.min_nan(x) })
                });
                let got = f(&a, dims, keepdim).unwrap();
                assert_eq!(got.dtype(), T::DTYPE);
                assert_eq!(got.sizes(), &final_sizes(&a, &mask, keepdim)[..]);
                let label = format!(
                    "{name} {:?} {what} dims {dims:?} keepdim {keepdim}",
                    T::DTYPE
                );
                assert_all_same(&to_vec::<T>(&got), &want, &label);
            }
        }
    }
}

#[test]
fn amax_and_amin_every_real_dtype_layout_and_dims() {
    macro_rules! both {
        ($($t:ty),*) => {$(
            check_pick::<$t>(true);
            check_pick::<$t>(false);
        )*};
    }
    both!(Bool, u8, i8, i16, i32, i64, u16, u32, u64, f16, bf16, f32, f64);
    let c = from_vec::<Complex<f32>>(&[1], &[Complex::new(1.0, 0.0)]);
    for max in [true, false] {
        let (name, f) = op(max);
        let e = f(&c, &[], false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported, "{name}");
        assert!(e.message().contains(name), "{e}");
    }
}

#[test]
fn amax_and_amin_propagate_nan() {
    let mut v: Vec<f32> = (0..1000).map(|i| i as f32).collect();
    v[617] = f32::NAN;
    let t = from_vec(&[10, 100], &v);
    for max in [true, false] {
        let (name, f) = op(max);
        assert!(
            to_vec::<f32>(&f(&t, &[], false).unwrap())[0].is_nan(),
            "{name}"
        );
        let rows = to_vec::<f32>(&f(&t, &[1], false).unwrap());
        assert!(rows[6].is_nan(), "{name}");
        assert_eq!(rows[5], if max { 599.0 } else { 500.0 }, "{name}");
        let cols = to_vec::<f32>(&f(&t, &[0], false).unwrap());
        assert!(cols[17].is_nan(), "{name}");
        assert_eq!(cols[18], if max { 918.0 } else { 18.0 }, "{name}");
    }
}

#[test]
fn amin_of_empty_dims() {
    let e = Tensor::empty(&[3, 0], DType::Float, Device::CPU).unwrap();
    let err = kernels::amin(&e, &[1], false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Shape);
    assert!(
        err.message().contains("dim 1") && err.message().contains("minimum"),
        "{err}"
    );
    assert_eq!(kernels::amin(&e, &[0], true).unwrap().sizes(), &[1, 0]);
    let z = from_vec::<i16>(&[], &[-5]);
    assert_eq!(to_vec::<i16>(&kernels::amin(&z, &[], false).unwrap()), [-5]);
}

/// Inputs for the AVX2 kernels: random values with ties of +0 and -0 (so
/// a different fold order shows in the sign), NaNs (with payloads) at
/// the start, in the middle, in a tail, in one column only, or none.
fn pick_inputs<T: Elem>() -> Vec<(String, Tensor)> {
    let n = 4 * 70_001 + 3;
    let bits = random_bits(n);
    let base: Vec<T> = bits
        .iter()
        .map(|&b| match b % 7 {
            0 => T::from_complex(0.0, 0.0),
            1 => T::from_complex(-0.0, 0.0),
            _ => T::from_complex((b % 100_003) as f64 * 0.001_37 - 60.0, 0.0),
        })
        .collect();
    let nan = T::from_complex(f64::NAN, 0.0);
    let mut out = Vec::new();
    for (what, places) in [
        ("no NaN", vec![]),
        ("NaN first", vec![0]),
        ("NaNs inside", vec![40_123, 100_000, 200_001]),
        ("NaN last", vec![n - 1]),
        ("NaN in column 7", (0..40).map(|r| r * 4099 + 7).collect()),
    ] {
        let mut v = base.clone();
        for p in places {
            v[p] = nan;
        }
        let flat = from_vec(&[n as i64], &v);
        let m =
            |off: i64, r: i64, c: i64| flat.narrow(0, off, r * c).unwrap().view(&[r, c]).unwrap();
        out.push((
            format!("{what} flat"),
            flat.narrow(0, 1, n as i64 - 1).unwrap(),
        ));
        out.push((format!("{what} [40, 4099]"), m(0, 40, 4099)));
        out.push((format!("{what} [9, 4099] at 1"), m(1, 9, 4099)));
        out.push((format!("{what} [64, 1000]"), m(3, 64, 1000)));
        out.push((format!("{what} [4099, 3]"), m(0, 4099, 3)));
        // Rows long enough to be read as four streams each.
        out.push((format!("{what} [5, 20000]"), m(1, 5, 20000)));
        out.push((
            format!("{what} [3, 300, 7]"),
            flat.narrow(0, 2, 6300).unwrap().view(&[3, 300, 7]).unwrap(),
        ));
        out.push((
            format!("{what} [40, 4099]^T"),
            m(0, 40, 4099).transpose(0, 1).unwrap(),
        ));
    }
    out
}

/// The AVX2 amax and amin (one run, K rows into a row) have the bits of
/// the portable lanes, ±0 ties and NaN results included, on every dim.
fn check_pick_bits_with_and_without_avx2<T: Elem + std::fmt::Debug>() {
    for threads in [1, 2] {
        tessera::parallel::set_num_threads(threads);
        for (what, t) in pick_inputs::<T>() {
            let all: Vec<Vec<i64>> = (0..t.ndim() as i64)
                .map(|d| vec![d])
                .chain([vec![]])
                .collect();
            for dims in &all {
                for max in [true, false] {
                    let (name, f) = op(max);
                    let run = |avx2: bool| {
                        simd::set_avx2_enabled(avx2);
                        to_vec::<T>(&f(&t, dims, false).unwrap())
                    };
                    let (with, without) = (run(true), run(false));
                    simd::set_avx2_enabled(true);
                    let label = format!(
                        "{name} {:?} {what} over {dims:?}, {threads} threads",
                        T::DTYPE
                    );
                    assert_eq!(with.len(), without.len(), "{label}");
                    for (i, (a, b)) in with.iter().zip(&without).enumerate() {
                        let (x, y) = (a.cast::<f64>(), b.cast::<f64>());
                        let same_bits = x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan());
                        assert!(same_bits, "{label}: element {i}: {a:?} vs {b:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn floating_picks_have_the_same_bits_with_and_without_avx2() {
    check_pick_bits_with_and_without_avx2::<f32>();
    check_pick_bits_with_and_without_avx2::<f16>();
    check_pick_bits_with_and_without_avx2::<bf16>();
    check_pick_bits_with_and_without_avx2::<f64>();
}

#[test]
fn nan_payloads_and_bool() {
    // A NaN with a payload comes out NaN on both paths; bool max is "any",
    // min is "all".
    let q = f32::from_bits(0x7fc0_1234);
    let mut v = vec![1.0f32; 100];
    v[50] = q;
    let t = from_vec(&[100], &v);
    for max in [true, false] {
        for avx2 in [true, false] {
            simd::set_avx2_enabled(avx2);
            assert!(to_vec::<f32>(&op(max).1(&t, &[], false).unwrap())[0].is_nan());
        }
    }
    simd::set_avx2_enabled(true);
    let b = from_vec::<Bool>(&[2, 2], &[Bool(1), Bool(0), Bool(1), Bool(1)]);
    let max = to_vec::<Bool>(&kernels::amax(&b, &[1], false).unwrap());
    let min = to_vec::<Bool>(&kernels::amin(&b, &[1], false).unwrap());
    assert_eq!((max[0].0, max[1].0, min[0].0, min[1].0), (1, 1, 0, 1));
}

/// Values whose products are exact in any order: mostly ±1, a few 2 and
/// 0.5 (3 for integers, whose Long products wrap exactly).
fn prod_values<T: Elem>(n: usize, seed: usize) -> Vec<T> {
    let integral = T::DTYPE.is_integral(true);
    (0..n)
        .map(|i| {
            let k = (i * 7919 + seed * 104729) % 97;
            let v = match k {
                3 => 2.0,
                5 if integral => 3.0,
                5 => 0.5,
                _ if k % 2 == 0 => 1.0,
                _ => -1.0,
            };
            T::from_complex(v, 0.0)
        })
        .collect()
}

/// Equal values (±0 equal, NaN equal to NaN).
fn assert_all_equal<T: Elem + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let (a, b) = (g.cast::<Complex<f64>>(), w.cast::<Complex<f64>>());
        let nan = |c: Complex<f64>| c.re.is_nan() || c.im.is_nan();
        let ok = (a.re == b.re && a.im == b.im) || (nan(a) && nan(b));
        assert!(ok, "{what}: element {i}: got {g:?}, want {w:?}");
    }
}

fn check_prod<T: SumAcc + std::fmt::Debug>()
where
    T::Acc: std::fmt::Debug,
{
    let out_dtype = if T::DTYPE.is_integral(true) {
        DType::Long
    } else {
        T::DTYPE
    };
    for (what, a) in reduce_inputs_of(prod_values::<T>) {
        for dims in DIMS {
            if dims.iter().any(|&d| d >= a.ndim() as i64) {
                continue;
            }
            for keepdim in [false, true] {
                let mask = mask_of(a.ndim(), dims);
                let acc =
                    reference_reduce::<T, T::Acc>(&a, &mask, <T::Acc as Arith>::ONE, |s, x| {
                        s.mul(x.widen())
                    });
                let got = kernels::prod(&a, dims, keepdim).unwrap();
                assert_eq!(got.dtype(), out_dtype);
                assert_eq!(got.sizes(), &final_sizes(&a, &mask, keepdim)[..]);
                let label = format!("prod {:?} {what} dims {dims:?} keepdim {keepdim}", T::DTYPE);
                if out_dtype == DType::Long {
                    let want: Vec<i64> = acc.into_iter().map(|v| v.cast::<i64>()).collect();
                    assert_all_same(&to_vec::<i64>(&got), &want, &label);
                } else {
                    let want: Vec<T> = acc.into_iter().map(|v| v.cast::<T>()).collect();
                    assert_all_equal(&to_vec::<T>(&got), &want, &label);
                }
            }
        }
    }
}

macro_rules! for_all_types {
    ($m:ident) => {
        $m!(Bool, u8, i8, i16, i32, i64, u16, u32, u64, f16, bf16, f32, f64);
        $m!(Complex<f16>, Complex<bf16>, Complex<f32>, Complex<f64>);
    };
}

#[test]
fn prod_every_dtype_layout_and_dims() {
    macro_rules! prod {
        ($($t:ty),*) => {$( check_prod::<$t>(); )*};
    }
    for_all_types!(prod);
}

#[test]
fn prod_of_empty_dims_is_one_and_integers_wrap() {
    let e = Tensor::empty(&[3, 0], DType::Float, Device::CPU).unwrap();
    assert_eq!(
        to_vec::<f32>(&kernels::prod(&e, &[1], false).unwrap()),
        [1.0; 3]
    );
    let big = from_vec::<i32>(&[3], &[1 << 30, 1 << 30, 16]);
    let p = kernels::prod(&big, &[], false).unwrap();
    assert_eq!(p.dtype(), DType::Long);
    assert_eq!(to_vec::<i64>(&p), [((1i64 << 60).wrapping_mul(16))]);
    let h = from_vec::<f16>(&[2], &[f16::from_f32(300.0), f16::from_f32(300.0)]);
    // 90000 overflows half: computed in float, then narrowed.
    assert_eq!(
        to_vec::<f16>(&kernels::prod(&h, &[], false).unwrap()),
        [f16::INFINITY]
    );
}

fn check_mean<T: SumAcc + std::fmt::Debug>()
where
    T::Acc: std::fmt::Debug + Div,
{
    for (what, a) in reduce_inputs::<T>() {
        for dims in DIMS {
            if dims.iter().any(|&d| d >= a.ndim() as i64) {
                continue;
            }
            for keepdim in [false, true] {
                let mask = mask_of(a.ndim(), dims);
                let acc =
                    reference_reduce::<T, T::Acc>(&a, &mask, <T::Acc as Arith>::ZERO, |s, x| {
                        s.add(x.widen())
                    });
                let count: i64 = (0..a.ndim())
                    .filter(|&d| mask[d])
                    .map(|d| a.sizes()[d])
                    .product();
                let n = T::Acc::from_complex(count as f64, 0.0);
                let want: Vec<T> = acc.into_iter().map(|v| v.div(n).cast::<T>()).collect();
                let got = kernels::mean(&a, dims, keepdim).unwrap();
                assert_eq!(got.dtype(), T::DTYPE);
                assert_eq!(got.sizes(), &final_sizes(&a, &mask, keepdim)[..]);
                let label = format!("mean {:?} {what} dims {dims:?} keepdim {keepdim}", T::DTYPE);
                assert_all_same(&to_vec::<T>(&got), &want, &label);
            }
        }
    }
}

#[test]
fn mean_every_floating_dtype_layout_and_dims() {
    macro_rules! mean {
        ($($t:ty),*) => {$( check_mean::<$t>(); )*};
    }
    mean!(
        f16,
        bf16,
        f32,
        f64,
        Complex<f16>,
        Complex<bf16>,
        Complex<f32>,
        Complex<f64>
    );
}

#[test]
fn mean_refuses_integers_and_is_nan_over_empty_dims() {
    for dt in [
        DType::Bool,
        DType::Byte,
        DType::Int,
        DType::Long,
        DType::UInt64,
    ] {
        let t = Tensor::empty(&[2, 3], dt, Device::CPU).unwrap();
        let e = kernels::mean(&t, &[], false).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::DType, "{dt:?}");
        let msg = e.message();
        assert!(msg.contains(dt.name()) && msg.contains("cast"), "{msg}");
    }
    let e = Tensor::empty(&[3, 0], DType::Float, Device::CPU).unwrap();
    let m = to_vec::<f32>(&kernels::mean(&e, &[1], true).unwrap());
    assert!(m.len() == 3 && m.iter().all(|v| v.is_nan()));
    let h = from_vec::<f16>(&[3], &[f16::from_f32(60000.0); 3]);
    // The sum (180000) overflows half; c10 sums half in float, so the
    // mean is 60000, not inf.
    let m = to_vec::<f16>(&kernels::mean(&h, &[], false).unwrap());
    assert_eq!(m, [f16::from_f32(60000.0)]);
}

/// max / min along one dim against a reference that walks each output's
/// elements in order: the first strict improvement wins, the first NaN
/// ends the search.
fn check_along<T: Elem + std::fmt::Debug>(max: bool)
where
    T::Op: PartialOrd,
{
    let mut inputs = reduce_inputs::<T>();
    let mut v = values::<T>(60, 9);
    for i in [7, 8, 33] {
        v[i] = T::from_complex(f64::NAN, 0.0);
    }
    inputs.push(("with NaNs".into(), from_vec(&[3, 4, 5], &v)));
    check_along_on::<T>(max, inputs);
}

/// [`check_along`] on `inputs`.
fn check_along_on<T: Elem + std::fmt::Debug>(max: bool, inputs: Vec<(String, Tensor)>)
where
    T::Op: PartialOrd,
{
    let f = if max {
        kernels::max_dim
    } else {
        kernels::min_dim
    };
    for (what, a) in inputs {
        for dim in -(a.ndim() as i64)..a.ndim() as i64 {
            let mask = mask_of(a.ndim(), &[dim]);
            let init: (Option<T>, i64, i64) = (None, 0, 0);
            let want = reference_reduce::<T, _>(&a, &mask, init, |(best, at, k), x| {
                #[allow(clippy::eq_op)]
                let nan = |v: T| v.to_op() != v.to_op();
                let take = match best {
                    None => true,
                    Some(b) if nan(b) => false,
                    Some(_) if nan(x) => true,
                    Some(b) if max => x.to_op() > b.to_op(),
                    Some(b) => x.to_op() < b.to_op(),
                };
                if take {
                    (Some(x), k, k + 1)
                } else {
                    (best, at, k + 1)
                }
            });
            for keepdim in [false, true] {
                let (vals, idx) = f(&a, dim, keepdim).unwrap();
                let label = format!("{max} {:?} {what} dim {dim} keepdim {keepdim}", T::DTYPE);
                assert_eq!(
                    vals.sizes(),
                    &final_sizes(&a, &mask, keepdim)[..],
                    "{label}"
                );
                assert_eq!(idx.sizes(), vals.sizes(), "{label}");
                assert_eq!(
                    (vals.dtype(), idx.dtype()),
                    (T::DTYPE, DType::Long),
                    "{label}"
                );
                let wv: Vec<T> = want.iter().map(|w| w.0.unwrap()).collect();
                let wi: Vec<i64> = want.iter().map(|w| w.1).collect();
                assert_all_same(&to_vec::<T>(&vals), &wv, &label);
                assert_eq!(to_vec::<i64>(&idx), wi, "{label}");
            }
        }
    }
}

#[test]
fn max_and_min_along_a_dim_every_real_dtype() {
    macro_rules! along {
        ($($t:ty),*) => {$( check_along::<$t>(true); check_along::<$t>(false); )*};
    }
    along!(Bool, u8, i8, i16, i32, i64, u16, u32, u64, f16, bf16, f32, f64);
}

/// The three loops of max / min along a dim (a contiguous run read twice,
/// outputs side by side a row at a time, a walk) on long runs, rows of
/// several tiles, ±0 ties and NaNs inside or in one column: the
/// reference's values and indices, with and without AVX2 (1 thread) and
/// on 2 threads. (The reference walks every element: a subset of the
/// inputs and dtypes keeps it under a minute in a debug build; under
/// qemu-user it is left out, the three loops being portable code that
/// `max_and_min_along_a_dim_every_real_dtype` runs there on small inputs.)
#[test]
fn max_and_min_along_a_dim_on_long_runs_ties_and_nans() {
    if std::env::var("TESSERA_TEST_QEMU_USER").is_ok_and(|v| !v.is_empty() && v != "0") {
        eprintln!(
            "SKIPPED under qemu-user (TESSERA_TEST_QEMU_USER): minutes of emulated reference"
        );
        return;
    }
    fn check<T: Elem + std::fmt::Debug>()
    where
        T::Op: PartialOrd,
    {
        let inputs = || -> Vec<(String, Tensor)> {
            pick_inputs::<T>()
                .into_iter()
                .filter(|(w, _)| w.starts_with("NaNs inside") || w.starts_with("NaN in column"))
                .collect()
        };
        for (threads, avx2) in [(1, true), (1, false), (2, true)] {
            tessera::parallel::set_num_threads(threads);
            simd::set_avx2_enabled(avx2);
            check_along_on::<T>(true, inputs());
            check_along_on::<T>(false, inputs());
        }
        simd::set_avx2_enabled(true);
    }
    check::<f32>();
    check::<f64>();
    check::<bf16>();
}

/// A signaling NaN picked along a dim is returned with its own bits (the
/// AVX2 loops compare widened lanes, then read the value back from the
/// input), in all three loops.
#[test]
fn max_dim_returns_a_signaling_nan_with_its_bits() {
    let snan = f32::from_bits(0x7f80_0001);
    let mut v = vec![1.0f32; 4 * 40];
    v[2 * 40 + 17] = snan;
    let t = from_vec::<f32>(&[4, 40], &v);
    for avx2 in [true, false] {
        simd::set_avx2_enabled(avx2);
        // (input, dim, the output k holding the NaN, its index): outputs
        // side by side, contiguous runs, a walk down columns.
        let cases = [
            (t.clone(), 0, 17, 2),
            (t.clone(), 1, 2, 17),
            (t.transpose(0, 1).unwrap(), 1, 17, 2),
        ];
        for (input, dim, k, at) in cases {
            let (v, i) = kernels::max_dim(&input, dim, false).unwrap();
            let (v, i) = (to_vec::<f32>(&v), to_vec::<i64>(&i));
            assert_eq!(
                (v[k].to_bits(), i[k]),
                (0x7f80_0001, at),
                "dim {dim} of {:?}, AVX2 {avx2}",
                input.sizes()
            );
        }
    }
    simd::set_avx2_enabled(true);
}

#[test]
fn max_dim_ties_nan_and_errors() {
    // Ties: the first index, ±0 included; NaN: the first NaN's index.
    let t = from_vec::<f32>(&[6], &[0.0, -0.0, 3.0, 3.0, f32::NAN, f32::NAN]);
    let (v, i) = kernels::max_dim(&t.narrow(0, 0, 4).unwrap(), 0, false).unwrap();
    assert_eq!((to_vec::<f32>(&v), to_vec::<i64>(&i)), (vec![3.0], vec![2]));
    let (v, i) = kernels::min_dim(&t.narrow(0, 0, 2).unwrap(), 0, false).unwrap();
    assert_eq!(
        (to_vec::<f32>(&v)[0].to_bits(), to_vec::<i64>(&i)),
        (0, vec![0])
    );
    let (v, i) = kernels::min_dim(&t, -1, true).unwrap();
    assert!(to_vec::<f32>(&v)[0].is_nan());
    assert_eq!((i.sizes(), to_vec::<i64>(&i)), (&[1i64][..], vec![4]));
    // A 0-dim tensor is its own maximum, index 0.
    let z = from_vec::<i16>(&[], &[-5]);
    let (v, i) = kernels::max_dim(&z, -1, false).unwrap();
    assert_eq!((to_vec::<i16>(&v), to_vec::<i64>(&i)), (vec![-5], vec![0]));
    let e = Tensor::empty(&[3, 0], DType::Float, Device::CPU).unwrap();
    let err = kernels::max_dim(&e, 1, false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Shape);
    assert!(
        err.message().contains("dim 1") && err.message().contains("size 0"),
        "{err}"
    );
    let (v, _) = kernels::min_dim(&e, 0, false).unwrap();
    assert_eq!(v.sizes(), &[0]);
    assert_eq!(
        kernels::max_dim(&e, 2, false).unwrap_err().kind(),
        ErrorKind::Shape
    );
    let c = from_vec::<Complex<f32>>(&[1], &[Complex::new(1.0, 0.0)]);
    assert_eq!(
        kernels::max_dim(&c, 0, false).unwrap_err().kind(),
        ErrorKind::Unsupported
    );
}
