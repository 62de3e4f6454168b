//! The built-in kernels against straightforward reference loops: every
//! dtype, contiguous / broadcast / permuted / sliced / 0-size inputs,
//! half and bfloat16 rounding against the `half` crate, the dtype rules
//! of results, division by zero, empty reductions, alpha, in-place
//! aliasing, and the parallel, streaming, tiled and AVX2 paths.

use half::{bf16, f16};
use tessera::kernels::elem::{Bool, Complex, Elem};
use tessera::kernels::ops::{Arith, Div, Signed};
use tessera::kernels::reduce::SumAcc;
use tessera::kernels::{self, RoundingMode};
use tessera::{DType, Device, ErrorKind, Scalar, Tensor};

#[path = "common/kernel_values.rs"]
mod kernel_values;
use kernel_values::*;

// ------------------------------------------------------------- helpers

/// Input layouts of logical shape [rows, cols] holding `values::<T>`.
#[derive(Clone, Copy, Debug)]
enum Layout {
    Contiguous,
    /// A transposed view (strides [1, rows]).
    Permuted,
    /// Every other element of a larger tensor, at an offset.
    Sliced,
    /// One row broadcast (stride 0 along dim 0).
    Broadcast,
}

const LAYOUTS: [Layout; 4] = [
    Layout::Contiguous,
    Layout::Permuted,
    Layout::Sliced,
    Layout::Broadcast,
];

fn make<T: Elem>(layout: Layout, rows: i64, cols: i64, seed: usize) -> Tensor {
    let n = (rows * cols) as usize;
    match layout {
        Layout::Contiguous => from_vec(&[rows, cols], &values::<T>(n, seed)),
        Layout::Permuted => from_vec(&[cols, rows], &values::<T>(n, seed))
            .transpose(0, 1)
            .unwrap(),
        Layout::Sliced => {
            let big = from_vec(
                &[rows * 2 + 1, cols * 2 + 1],
                &values::<T>(((rows * 2 + 1) * (cols * 2 + 1)) as usize, seed),
            );
            big.as_strided(&[rows, cols], &[2 * (cols * 2 + 1), 2], 1)
                .unwrap()
        }
        Layout::Broadcast => from_vec(&[1, cols], &values::<T>(cols as usize, seed))
            .expand(&[rows, cols])
            .unwrap(),
    }
}

/// Runs `$m!(T)` for every dtype the kernels support.
macro_rules! for_all_types {
    ($m:ident) => {
        $m!(Bool);
        $m!(u8);
        $m!(i8);
        $m!(i16);
        $m!(i32);
        $m!(i64);
        $m!(u16);
        $m!(u32);
        $m!(u64);
        $m!(f16);
        $m!(bf16);
        $m!(f32);
        $m!(f64);
        $m!(Complex<f16>);
        $m!(Complex<f32>);
        $m!(Complex<f64>);
    };
}

fn scalar_of<T: Elem>(t: &Tensor) -> T {
    to_vec::<T>(t)[0]
}

// ----------------------------------------------------------------- copy

fn check_copy<S: Elem + std::fmt::Debug, D: Elem + std::fmt::Debug>() {
    for layout in LAYOUTS {
        for (rows, cols) in [(5, 7), (3, 40), (0, 4)] {
            let src = make::<S>(layout, rows, cols, 1);
            let dst = Tensor::empty(&[rows, cols], D::DTYPE, Device::CPU).unwrap();
            kernels::copy_(&dst, &src).unwrap();
            let want: Vec<D> = to_vec::<S>(&src)
                .into_iter()
                .map(|v| v.cast::<D>())
                .collect();
            let what = format!(
                "copy {:?} -> {:?}, {layout:?} {rows}x{cols}",
                S::DTYPE,
                D::DTYPE
            );
            assert_all_same(&to_vec::<D>(&dst), &want, &what);
        }
    }
    // A permuted destination, a broadcast source row.
    let dst = Tensor::empty(&[6, 5], D::DTYPE, Device::CPU)
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let src = from_vec(&[6], &values::<S>(6, 3));
    kernels::copy_(&dst, &src).unwrap();
    let row: Vec<D> = to_vec::<S>(&src)
        .into_iter()
        .map(|v| v.cast::<D>())
        .collect();
    let want: Vec<D> = (0..5).flat_map(|_| row.clone()).collect();
    assert_all_same(
        &to_vec::<D>(&dst),
        &want,
        "copy into a permuted destination",
    );
}

macro_rules! copy_from {
    ($s:ty) => {{
        macro_rules! copy_to {
            ($d:ty) => {
                check_copy::<$s, $d>()
            };
        }
        for_all_types!(copy_to);
    }};
}

#[test]
fn copy_every_dtype_pair_and_layout() {
    for_all_types!(copy_from);
}

#[test]
fn copy_refuses_float4_and_quantized_conversions_but_moves_their_bytes() {
    // Float8 types convert (tests/float8_copy.rs); Float4_e2m1fn_x2 does
    // not, as in c10.
    let a = Tensor::empty(&[4], DType::Float4E2M1FnX2, Device::CPU).unwrap();
    let f = Tensor::empty(&[4], DType::Float, Device::CPU).unwrap();
    let e = kernels::copy_(&f, &a).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
    assert!(e.message().contains("Float4_e2m1fn_x2"), "{e}");
    let q = Tensor::empty(&[4], DType::QInt8, Device::CPU).unwrap();
    assert_eq!(
        kernels::copy_(&q, &f).unwrap_err().kind(),
        ErrorKind::Unsupported
    );
    // Equal dtypes copy bytes, whatever they mean.
    let src = from_vec::<u8>(&[4], &[1, 2, 3, 4]);
    let src8 = Tensor::from_storage(src.storage(), 0, &[4], None, DType::Float8E5M2).unwrap();
    let dst8 = Tensor::empty(&[2, 4], DType::Float8E5M2, Device::CPU).unwrap();
    kernels::copy_(&dst8, &src8).unwrap();
    let bytes = Tensor::from_storage(dst8.storage(), 0, &[8], None, DType::Byte).unwrap();
    assert_eq!(to_vec::<u8>(&bytes), vec![1, 2, 3, 4, 1, 2, 3, 4]);
}

#[test]
fn copy_resolves_partial_overlap_and_ignores_self_copies() {
    let base = from_vec::<f32>(&[10], &(0..10).map(|i| i as f32).collect::<Vec<_>>());
    let dst = base.narrow(0, 0, 8).unwrap();
    let src = base.narrow(0, 2, 8).unwrap();
    kernels::copy_(&dst, &src).unwrap();
    assert_eq!(
        to_vec::<f32>(&base),
        vec![2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 8.0, 9.0]
    );
    let v0 = base.version();
    kernels::copy_(&base, &base).unwrap();
    assert_eq!(base.version(), v0, "a self-copy changes nothing");
    // The same memory through another view with another dtype of the same
    // size: an in-place conversion.
    let ints = Tensor::from_storage(base.storage(), 0, &[10], None, DType::Int).unwrap();
    kernels::copy_(&ints, &base).unwrap();
    assert_eq!(to_vec::<i32>(&ints)[..3], [2, 3, 4]);
}

#[test]
fn copy_of_transposed_layouts_uses_whole_tiles_and_edges() {
    // Sizes that are not multiples of the tile or the register block,
    // every element width, 2-D and 3-D permutations.
    macro_rules! check {
        ($t:ty) => {{
            for (rows, cols) in [(70, 300), (9, 1030), (300, 13)] {
                let src = make::<$t>(Layout::Permuted, rows, cols, 5);
                let dst = Tensor::empty(&[rows, cols], <$t>::DTYPE, Device::CPU).unwrap();
                kernels::copy_(&dst, &src).unwrap();
                assert_all_same(&to_vec::<$t>(&dst), &to_vec::<$t>(&src), "tiled 2-D");
            }
            let cube = from_vec(&[20, 30, 40], &values::<$t>(24000, 2));
            let perm = cube.permute(&[2, 1, 0]).unwrap();
            let dst = Tensor::empty(&[40, 30, 20], <$t>::DTYPE, Device::CPU).unwrap();
            kernels::copy_(&dst, &perm).unwrap();
            assert_all_same(&to_vec::<$t>(&dst), &to_vec::<$t>(&perm), "tiled 3-D");
            // A transposed copy with a cast goes through a temporary.
            let dstf = Tensor::empty(&[40, 30, 20], DType::Double, Device::CPU).unwrap();
            kernels::copy_(&dstf, &perm).unwrap();
            let want: Vec<f64> = to_vec::<$t>(&perm)
                .into_iter()
                .map(|v| v.cast::<f64>())
                .collect();
            assert_all_same(&to_vec::<f64>(&dstf), &want, "tiled with cast");
        }};
    }
    check!(u8);
    check!(f16);
    check!(f32);
    check!(f64);
    check!(Complex<f64>);
}

#[test]
fn streamed_transposed_copies_write_every_element() {
    // A transposed copy of 32 MiB or more streams its tiles: the rows of
    // one tile are written while the next is transposed, the last tile's
    // after the loop. Every element must arrive, in whole tiles and on the
    // edges, for 2-, 4- and 8-byte elements, on 1 and 2 threads.
    macro_rules! check {
        ($t:ty, $sizes:expr) => {{
            let sizes: [i64; 3] = $sizes;
            let n = sizes.iter().product::<i64>() as usize;
            assert!(n * std::mem::size_of::<$t>() >= 32 << 20);
            let x = values::<$t>(n, 7);
            let perm = from_vec(&sizes, &x).permute(&[2, 1, 0]).unwrap();
            let [s0, s1, s2] = sizes.map(|s| s as usize);
            for threads in [1, 2] {
                tessera::parallel::set_num_threads(threads);
                let dst = Tensor::empty(perm.sizes(), <$t>::DTYPE, Device::CPU).unwrap();
                kernels::copy_(&dst, &perm).unwrap();
                // SAFETY: dst is contiguous with n elements.
                let got = unsafe { std::slice::from_raw_parts(dst.data_ptr() as *const $t, n) };
                // dst[k][j][i] = x[i][j][k], compared as bits.
                let bad = (0..n).find(|&f| {
                    let (k, j, i) = (f / (s1 * s0), f / s0 % s1, f % s0);
                    got[f].to_bits() != x[(i * s1 + j) * s2 + k].to_bits()
                });
                let what = format!("{:?} {sizes:?}, {threads} threads", <$t>::DTYPE);
                assert_eq!(bad, None, "{what}: first wrong element (flat index)");
            }
        }};
    }
    check!(f32, [256, 130, 260]);
    check!(f64, [130, 130, 260]);
    check!(f16, [260, 260, 260]);
}

// ------------------------------------------------------- half rounding

fn check_rounding<S: Elem + std::fmt::Debug, D: Elem + std::fmt::Debug>(
    src: Vec<S>,
    reference: impl Fn(S) -> D,
) {
    let n = src.len() as i64;
    let want: Vec<D> = src.iter().map(|&v| reference(v)).collect();
    // Contiguous (slice conversions), strided (element-wise) and
    // broadcast sources.
    let s = from_vec(&[n], &src);
    let d = Tensor::empty(&[n], D::DTYPE, Device::CPU).unwrap();
    kernels::copy_(&d, &s).unwrap();
    let what = format!("{:?} -> {:?}", S::DTYPE, D::DTYPE);
    assert_all_same(&to_vec::<D>(&d), &want, &what);
    let wide = from_vec(
        &[n, 2],
        &src.iter().flat_map(|&v| [v, v]).collect::<Vec<_>>(),
    );
    let strided = wide.select(1, 1).unwrap();
    kernels::copy_(&d, &strided).unwrap();
    assert_all_same(&to_vec::<D>(&d), &want, &format!("{what}, strided"));
}

#[test]
fn half_and_bfloat16_round_as_the_half_crate() {
    let bits = random_bits(20000);
    let f32s: Vec<f32> = bits.iter().map(|&b| f32::from_bits(b as u32)).collect();
    let f64s: Vec<f64> = bits.iter().map(|&b| f64::from_bits(b)).collect();
    // Values near half's range and rounding boundaries too.
    let mut near: Vec<f32> = (0..4000)
        .map(|i| (i as f32 - 2000.0) * 37.013 + 0.5)
        .collect();
    near.extend([
        65504.0,
        65519.99,
        65520.0,
        1e-8,
        6.0e-8,
        2.98e-8,
        -0.0,
        f32::NAN,
    ]);
    let near64: Vec<f64> = near.iter().map(|&v| v as f64 + 1e-9).collect();
    let h16: Vec<f16> = bits.iter().map(|&b| f16::from_bits(b as u16)).collect();
    let b16: Vec<bf16> = bits.iter().map(|&b| bf16::from_bits(b as u16)).collect();
    let ints: Vec<i32> = bits.iter().map(|&b| (b as i32) >> 7).collect();
    for avx2 in [true, false] {
        kernels::simd::set_avx2_enabled(avx2);
        check_rounding(f32s.clone(), f16::from_f32);
        check_rounding(near.clone(), f16::from_f32);
        check_rounding(f64s.clone(), f16::from_f64);
        check_rounding(near64.clone(), f16::from_f64);
        check_rounding(f32s.clone(), bf16::from_f32);
        check_rounding(f64s.clone(), bf16::from_f64);
        check_rounding(h16.clone(), f16::to_f32);
        check_rounding(h16.clone(), f16::to_f64);
        check_rounding(b16.clone(), bf16::to_f32);
        check_rounding(h16.clone(), |v: f16| bf16::from_f32(v.to_f32()));
        check_rounding(b16.clone(), |v: bf16| f16::from_f32(v.to_f32()));
        check_rounding(ints.clone(), |v: i32| f16::from_f32(v as f32));
        check_rounding(ints.clone(), |v: i32| bf16::from_f32(v as f32));
        check_rounding(h16.clone(), |v: f16| v.to_f32() as i32);
    }
    kernels::simd::set_avx2_enabled(true);
}

// ---------------------------------------------------------------- fill

fn check_fill<T: Elem + std::fmt::Debug>() {
    for value in [
        Scalar::Int(-3),
        Scalar::Float(2.7),
        Scalar::Bool(true),
        Scalar::Complex(1.5, -2.0),
    ] {
        let want = T::from_scalar(value).unwrap();
        for layout in [
            Layout::Contiguous,
            Layout::Permuted,
            Layout::Sliced,
            Layout::Broadcast,
        ] {
            let t = make::<T>(layout, 4, 9, 0);
            let v0 = t.version();
            kernels::fill_(&t, value).unwrap();
            assert!(t.version() > v0);
            let got = to_vec::<T>(&t);
            assert!(
                got.iter().all(|&g| same(g, want)),
                "fill {:?} {layout:?} {value:?}",
                T::DTYPE
            );
        }
    }
    let empty = Tensor::empty(&[0, 3], T::DTYPE, Device::CPU).unwrap();
    kernels::fill_(&empty, Scalar::Int(1)).unwrap();
}

#[test]
fn fill_every_dtype_and_layout() {
    macro_rules! fill {
        ($t:ty) => {
            check_fill::<$t>()
        };
    }
    for_all_types!(fill);
    let q = Tensor::empty(&[2], DType::QUInt8, Device::CPU).unwrap();
    assert_eq!(
        kernels::fill_(&q, Scalar::Int(1)).unwrap_err().kind(),
        ErrorKind::Unsupported
    );
}

// -------------------------------------------------------------- binary

/// The binary-op input pairs: (a, b) layouts of shape [rows, cols] or
/// broadcastable to it.
fn binary_inputs<T: Elem>() -> Vec<(String, Tensor, Tensor)> {
    let mut v = Vec::new();
    for la in LAYOUTS {
        for lb in LAYOUTS {
            v.push((
                format!("{la:?} op {lb:?}"),
                make::<T>(la, 6, 37, 1),
                make::<T>(lb, 6, 37, 2),
            ));
        }
    }
    let col = from_vec(&[6, 1], &values::<T>(6, 3));
    let row = from_vec(&[37], &values::<T>(37, 4));
    v.push(("[6,1] op [37]".into(), col, row));
    let scalar = from_vec(&[], &values::<T>(1, 7)[..]);
    v.push((
        "tensor op 0-dim".into(),
        make::<T>(Layout::Sliced, 6, 37, 5),
        scalar.clone(),
    ));
    v.push((
        "0-dim op tensor".into(),
        scalar,
        make::<T>(Layout::Permuted, 6, 37, 6),
    ));
    v.push((
        "0-size".into(),
        make::<T>(Layout::Contiguous, 0, 37, 1),
        row_of::<T>(37),
    ));
    v.push((
        "long".into(),
        make::<T>(Layout::Contiguous, 3, 50000, 1),
        make::<T>(Layout::Broadcast, 3, 50000, 2),
    ));
    v
}

fn row_of<T: Elem>(n: i64) -> Tensor {
    from_vec(&[n], &values::<T>(n as usize, 9))
}

/// Reference: the broadcast of a and b element by element.
fn reference_binary<T: Elem>(a: &Tensor, b: &Tensor, f: impl Fn(T, T) -> T) -> (Vec<i64>, Vec<T>) {
    let shape = tessera::tensor::shape::broadcast_shapes(a.sizes(), b.sizes()).unwrap();
    let (ea, eb) = (a.expand(&shape).unwrap(), b.expand(&shape).unwrap());
    let out = to_vec::<T>(&ea)
        .into_iter()
        .zip(to_vec::<T>(&eb))
        .map(|(x, y)| f(x, y))
        .collect();
    (shape.to_vec(), out)
}

fn check_binary<T: Elem + std::fmt::Debug>(
    name: &str,
    op: impl Fn(Option<&Tensor>, &Tensor, &Tensor) -> tessera::Result<Tensor>,
    f: impl Fn(T, T) -> T + Copy,
) {
    for (what, a, b) in binary_inputs::<T>() {
        let (shape, want) = reference_binary::<T>(&a, &b, f);
        let got = op(None, &a, &b).unwrap();
        assert_eq!(got.dtype(), T::DTYPE);
        assert_eq!(got.sizes(), &shape[..], "{name} {what}");
        let what = format!("{name} {:?} {what}", T::DTYPE);
        assert_all_same(&to_vec::<T>(&got), &want, &what);
        // Into a given output, and in place into a (when shapes allow).
        let out = Tensor::empty(&shape, T::DTYPE, Device::CPU).unwrap();
        let r = op(Some(&out), &a, &b).unwrap();
        assert!(Tensor::ptr_eq(&r, &out));
        assert_all_same(&to_vec::<T>(&out), &want, &format!("{what}, out="));
        if a.sizes() == &shape[..] {
            let a2 = Tensor::empty(a.sizes(), T::DTYPE, Device::CPU).unwrap();
            kernels::copy_(&a2, &a).unwrap();
            let r = op(Some(&a2), &a2, &b).unwrap();
            assert!(Tensor::ptr_eq(&r, &a2));
            assert_all_same(&to_vec::<T>(&a2), &want, &format!("{what}, in place"));
        }
    }
}

macro_rules! binary_all {
    ($t:ty) => {{
        type T = $t;
        type O = <T as Elem>::Op;
        let one = |x: T, y: T| T::from_op(x.to_op().add(y.to_op()));
        check_binary::<T>("add", |o, a, b| kernels::add(o, a, b, Scalar::Int(1)), one);
        let two =
            |x: T, y: T| T::from_op(x.to_op().add(O::from_alpha(Scalar::Int(2)).mul(y.to_op())));
        check_binary::<T>(
            "add alpha 2",
            |o, a, b| kernels::add(o, a, b, Scalar::Int(2)),
            two,
        );
        let mul = |x: T, y: T| T::from_op(x.to_op().mul(y.to_op()));
        check_binary::<T>("mul", kernels::mul, mul);
    }};
}

macro_rules! signed_all {
    ($t:ty) => {{
        type T = $t;
        type O = <T as Elem>::Op;
        let sub3 =
            |x: T, y: T| T::from_op(x.to_op().sub(O::from_alpha(Scalar::Int(3)).mul(y.to_op())));
        check_binary::<T>(
            "sub alpha 3",
            |o, a, b| kernels::sub(o, a, b, Scalar::Int(3)),
            sub3,
        );
        // neg, against the reference, in place too.
        for layout in LAYOUTS {
            let a = make::<T>(layout, 5, 33, 8);
            let want: Vec<T> = to_vec::<T>(&a)
                .into_iter()
                .map(|v| T::from_op(v.to_op().neg()))
                .collect();
            let got = kernels::neg(None, &a).unwrap();
            assert_all_same(
                &to_vec::<T>(&got),
                &want,
                &format!("neg {:?} {layout:?}", T::DTYPE),
            );
        }
        let a = make::<T>(Layout::Contiguous, 4, 20, 1);
        let want: Vec<T> = to_vec::<T>(&a)
            .into_iter()
            .map(|v| T::from_op(v.to_op().neg()))
            .collect();
        let r = kernels::neg(Some(&a), &a).unwrap();
        assert!(Tensor::ptr_eq(&r, &a));
        assert_all_same(&to_vec::<T>(&a), &want, "neg in place");
    }};
}

macro_rules! div_all {
    ($t:ty) => {{
        type T = $t;
        let div = |x: T, y: T| T::from_op(x.to_op().div(y.to_op()));
        check_binary::<T>("div", kernels::div, div);
    }};
}

#[test]
fn add_and_mul_every_dtype_and_layout() {
    for_all_types!(binary_all);
}

#[test]
fn sub_and_neg_every_signed_dtype_and_layout() {
    signed_all!(u8);
    signed_all!(i8);
    signed_all!(i16);
    signed_all!(i32);
    signed_all!(i64);
    signed_all!(u16);
    signed_all!(u32);
    signed_all!(u64);
    signed_all!(f16);
    signed_all!(bf16);
    signed_all!(f32);
    signed_all!(f64);
    signed_all!(Complex<f16>);
    signed_all!(Complex<f32>);
    signed_all!(Complex<f64>);
}

#[test]
fn true_division_every_floating_dtype_and_layout() {
    div_all!(f16);
    div_all!(bf16);
    div_all!(f32);
    div_all!(f64);
    div_all!(Complex<f16>);
    div_all!(Complex<f32>);
    div_all!(Complex<f64>);
}

#[test]
fn integer_division_promotes_and_divides_by_zero_as_ieee() {
    let a = from_vec::<i32>(&[4], &[7, -7, 0, 6]);
    let b = from_vec::<i32>(&[4], &[2, 0, 0, -4]);
    let q = kernels::div(None, &a, &b).unwrap();
    assert_eq!(q.dtype(), DType::Float);
    let got = to_vec::<f32>(&q);
    assert_eq!(got[0], 3.5);
    assert_eq!(got[1], f32::NEG_INFINITY);
    assert!(got[2].is_nan());
    assert_eq!(got[3], -1.5);
    // Float division by zero: inf / NaN, never an error.
    let x = from_vec::<f64>(&[3], &[1.0, -2.0, 0.0]);
    let z = from_vec::<f64>(&[1], &[0.0]);
    let r = to_vec::<f64>(&kernels::div(None, &x, &z).unwrap());
    assert_eq!(r[..2], [f64::INFINITY, f64::NEG_INFINITY]);
    assert!(r[2].is_nan());
    // Bool / bool is Float too.
    let t = from_vec::<Bool>(&[2], &[Bool(1), Bool(0)]);
    assert_eq!(kernels::div(None, &t, &t).unwrap().dtype(), DType::Float);
    // An integer output cannot receive the Float quotient.
    let e = kernels::div(Some(&a.clone()), &a, &b).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DType);
}

#[test]
fn rounding_division_and_integer_division_by_zero() {
    let a = from_vec::<i64>(&[4], &[7, -7, 7, -7]);
    let b = from_vec::<i64>(&[4], &[2, 2, -2, -2]);
    let t = kernels::div_rounding(None, &a, &b, RoundingMode::Trunc).unwrap();
    assert_eq!(t.dtype(), DType::Long);
    assert_eq!(to_vec::<i64>(&t), vec![3, -3, -3, 3]);
    let f = kernels::div_rounding(None, &a, &b, RoundingMode::Floor).unwrap();
    assert_eq!(to_vec::<i64>(&f), vec![3, -4, -4, 3]);
    let none = kernels::div_rounding(None, &a, &b, RoundingMode::None).unwrap();
    assert_eq!(none.dtype(), DType::Float);
    for mode in [RoundingMode::Trunc, RoundingMode::Floor] {
        let zero = from_vec::<u8>(&[3], &[1, 0, 2]);
        let e = kernels::div_rounding(None, &zero, &zero, mode).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::ZeroDivision);
        assert!(e.message().contains("division by zero"), "{e}");
    }
    let x = from_vec::<f32>(&[3], &[-7.5, 1.0, -1.0]);
    let y = from_vec::<f32>(&[3], &[2.0, 0.0, 0.0]);
    let r = to_vec::<f32>(&kernels::div_rounding(None, &x, &y, RoundingMode::Floor).unwrap());
    assert_eq!(r, vec![-4.0, f32::INFINITY, f32::NEG_INFINITY]);
    let r = to_vec::<f32>(&kernels::div_rounding(None, &x, &y, RoundingMode::Trunc).unwrap());
    assert_eq!(r[0], -3.0);
    let bools = from_vec::<Bool>(&[1], &[Bool(1)]);
    let e = kernels::div_rounding(None, &bools, &bools, RoundingMode::Floor).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported);
}

#[test]
fn result_dtypes_follow_c10_promotion() {
    let ints = from_vec::<i32>(&[3], &[1, 2, 3]);
    let r = kernels::add(
        None,
        &ints,
        &Tensor::wrapped_scalar(Scalar::Float(2.5)).unwrap(),
        Scalar::Int(1),
    )
    .unwrap();
    assert_eq!(r.dtype(), DType::Float);
    assert_eq!(to_vec::<f32>(&r), vec![3.5, 4.5, 5.5]);
    let bytes = from_vec::<u8>(&[2], &[250, 1]);
    let r = kernels::add(
        None,
        &bytes,
        &Tensor::wrapped_scalar(Scalar::Int(10)).unwrap(),
        Scalar::Int(1),
    )
    .unwrap();
    assert_eq!(r.dtype(), DType::Byte, "a wrapped int does not widen uint8");
    assert_eq!(to_vec::<u8>(&r), vec![4, 11]);
    let chars = from_vec::<i8>(&[2], &[-1, 1]);
    let r = kernels::add(None, &bytes, &chars, Scalar::Int(1)).unwrap();
    assert_eq!(r.dtype(), DType::Short);
    assert_eq!(to_vec::<i16>(&r), vec![249, 2]);
    let h = from_vec::<f16>(&[2], &[f16::from_f32(1.5), f16::from_f32(-2.0)]);
    let d = from_vec::<f64>(&[2], &[0.25, 0.5]);
    assert_eq!(kernels::mul(None, &h, &d).unwrap().dtype(), DType::Double);
    let d0 = from_vec::<f64>(&[], &[0.25]);
    let r = kernels::mul(None, &h, &d0).unwrap();
    assert_eq!(r.dtype(), DType::Half, "a 0-dim double does not widen half");
    assert_eq!(
        to_vec::<f16>(&r),
        vec![f16::from_f32(0.375), f16::from_f32(-0.5)]
    );
    let t = from_vec::<Bool>(&[3], &[Bool(1), Bool(0), Bool(0)]);
    let u = from_vec::<Bool>(&[3], &[Bool(0), Bool(0), Bool(1)]);
    let or = kernels::add(None, &t, &u, Scalar::Bool(true)).unwrap();
    assert_eq!(or.dtype(), DType::Bool);
    assert_eq!(to_vec::<Bool>(&or), vec![Bool(1), Bool(0), Bool(1)]);
    let and = kernels::mul(None, &t, &u).unwrap();
    assert_eq!(to_vec::<Bool>(&and), vec![Bool(0); 3]);
    let c = from_vec::<Complex<f32>>(&[1], &[Complex::new(1.0, 2.0)]);
    assert_eq!(
        kernels::add(None, &c, &ints, Scalar::Int(1))
            .unwrap()
            .dtype(),
        DType::ComplexFloat
    );
    // A given output of a wider dtype receives the result cast.
    let out = Tensor::empty(&[3], DType::Double, Device::CPU).unwrap();
    kernels::add(Some(&out), &ints, &ints, Scalar::Int(1)).unwrap();
    assert_eq!(to_vec::<f64>(&out), vec![2.0, 4.0, 6.0]);
    // ... but not a narrower kind.
    let out = Tensor::empty(&[3], DType::Int, Device::CPU).unwrap();
    let f = from_vec::<f32>(&[3], &[1.0, 2.0, 3.0]);
    assert_eq!(
        kernels::add(Some(&out), &f, &f, Scalar::Int(1))
            .unwrap_err()
            .kind(),
        ErrorKind::DType
    );
    // A resizable output of the wrong shape is resized.
    let out = Tensor::empty(&[0], DType::Int, Device::CPU).unwrap();
    let r = kernels::add(Some(&out), &ints, &ints, Scalar::Int(1)).unwrap();
    assert_eq!(r.sizes(), &[3]);
    assert_eq!(to_vec::<i32>(&out), vec![2, 4, 6]);
}

#[test]
fn alpha_rules_and_bool_refusals() {
    let ints = from_vec::<i64>(&[3], &[10, 20, 30]);
    let ones = from_vec::<i64>(&[3], &[1, 2, 3]);
    assert_eq!(
        to_vec::<i64>(&kernels::add(None, &ints, &ones, Scalar::Int(-2)).unwrap()),
        vec![8, 16, 24]
    );
    assert_eq!(
        to_vec::<i64>(&kernels::sub(None, &ints, &ones, Scalar::Int(3)).unwrap()),
        vec![7, 14, 21]
    );
    let f = from_vec::<f32>(&[2], &[1.0, 2.0]);
    assert_eq!(
        to_vec::<f32>(&kernels::sub(None, &f, &f, Scalar::Float(0.5)).unwrap()),
        vec![0.5, 1.0]
    );
    let e = kernels::add(None, &ints, &ones, Scalar::Float(0.5)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DType);
    assert!(e.message().contains("alpha"), "{e}");
    assert_eq!(
        kernels::add(None, &f, &f, Scalar::Bool(true))
            .unwrap_err()
            .kind(),
        ErrorKind::DType
    );
    assert_eq!(
        kernels::add(None, &f, &f, Scalar::Complex(1.0, 1.0))
            .unwrap_err()
            .kind(),
        ErrorKind::DType
    );
    let u = from_vec::<u8>(&[2], &[5, 6]);
    assert_eq!(
        to_vec::<u8>(&kernels::sub(None, &u, &u, Scalar::Int(2)).unwrap()),
        vec![251, 250]
    );
    let b = from_vec::<Bool>(&[2], &[Bool(1), Bool(0)]);
    let e = kernels::sub(None, &b, &b, Scalar::Int(1)).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DType);
    assert!(e.message().contains("xor"), "{e}");
    assert_eq!(
        kernels::sub(None, &b, &f, Scalar::Int(1))
            .unwrap_err()
            .kind(),
        ErrorKind::DType
    );
    let e = kernels::neg(None, &b).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DType);
    assert!(e.message().contains("Bool"), "{e}");
    assert_eq!(
        to_vec::<u8>(&kernels::neg(None, &u).unwrap()),
        vec![251, 250]
    );
}

#[test]
fn aliasing_outputs_and_errors() {
    let a = from_vec::<f32>(&[4], &[1.0, 2.0, 3.0, 4.0]);
    let b = from_vec::<f32>(&[4], &[10.0, 20.0, 30.0, 40.0]);
    kernels::add(Some(&b), &a, &b, Scalar::Int(1)).unwrap();
    assert_eq!(to_vec::<f32>(&b), vec![11.0, 22.0, 33.0, 44.0]);
    kernels::mul(Some(&a), &a, &a).unwrap();
    assert_eq!(to_vec::<f32>(&a), vec![1.0, 4.0, 9.0, 16.0]);
    // A partial overlap between output and input is refused.
    let base = from_vec::<f32>(&[5], &[0.0; 5]);
    let (o, i) = (base.narrow(0, 0, 4).unwrap(), base.narrow(0, 1, 4).unwrap());
    assert_eq!(
        kernels::add(Some(&o), &i, &i, Scalar::Int(1))
            .unwrap_err()
            .kind(),
        ErrorKind::Overlap
    );
    // Shapes that do not broadcast.
    let c = from_vec::<f32>(&[3], &[0.0; 3]);
    assert_eq!(
        kernels::add(None, &a, &c, Scalar::Int(1))
            .unwrap_err()
            .kind(),
        ErrorKind::Shape
    );
    // float8 has no arithmetic.
    let f8 = Tensor::empty(&[2], DType::Float8E5M2, Device::CPU).unwrap();
    assert_eq!(
        kernels::mul(None, &f8, &f8).unwrap_err().kind(),
        ErrorKind::Unsupported
    );
}

// ---------------------------------------------------------- reductions

fn check_sum<T: SumAcc + std::fmt::Debug>()
where
    T::Acc: std::fmt::Debug,
{
    let out_dtype = if T::DTYPE.is_integral(true) {
        DType::Long
    } else {
        T::DTYPE
    };
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
                let got = kernels::sum(&a, dims, keepdim).unwrap();
                assert_eq!(got.dtype(), out_dtype);
                assert_eq!(got.sizes(), &final_sizes(&a, &mask, keepdim)[..]);
                let label = format!("sum {:?} {what} dims {dims:?} keepdim {keepdim}", T::DTYPE);
                if out_dtype == DType::Long {
                    let want: Vec<i64> = acc.into_iter().map(|v| v.cast::<i64>()).collect();
                    assert_all_same(&to_vec::<i64>(&got), &want, &label);
                } else {
                    let want: Vec<T> = acc.into_iter().map(|v| v.cast::<T>()).collect();
                    assert_all_same(&to_vec::<T>(&got), &want, &label);
                }
            }
        }
    }
}

#[test]
fn sum_every_dtype_layout_and_dims() {
    macro_rules! sum {
        ($t:ty) => {
            check_sum::<$t>()
        };
    }
    for_all_types!(sum);
}

#[test]
fn empty_reductions() {
    let e = Tensor::empty(&[3, 0], DType::Float, Device::CPU).unwrap();
    let s = kernels::sum(&e, &[1], false).unwrap();
    assert_eq!(s.sizes(), &[3]);
    assert_eq!(to_vec::<f32>(&s), vec![0.0; 3]);
    let s = kernels::sum(&e, &[], false).unwrap();
    assert_eq!(s.sizes(), &[] as &[i64]);
    assert_eq!(scalar_of::<f32>(&s), 0.0);
    let ei = Tensor::empty(&[0], DType::Int, Device::CPU).unwrap();
    let s = kernels::sum(&ei, &[0], true).unwrap();
    assert_eq!((s.dtype(), s.sizes()), (DType::Long, &[1i64][..]));
    assert_eq!(scalar_of::<i64>(&s), 0);
    assert_eq!(kernels::sum(&e, &[0], false).unwrap().sizes(), &[0]);
    let err = kernels::amax(&e, &[1], false).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Shape);
    assert!(err.message().contains("dim 1"), "{err}");
    let err = kernels::amax(&e, &[], false).unwrap_err();
    assert!(err.message().contains("dim 1"), "{err}");
    // Reducing a non-empty dim of an empty tensor is fine.
    assert_eq!(kernels::amax(&e, &[0], false).unwrap().sizes(), &[0]);
    // A 0-dim tensor reduces to itself.
    let z = from_vec::<i16>(&[], &[-5]);
    assert_eq!(
        scalar_of::<i16>(&kernels::amax(&z, &[0], false).unwrap()),
        -5
    );
    assert_eq!(scalar_of::<i64>(&kernels::sum(&z, &[], true).unwrap()), -5);
}

#[test]
fn reduction_dim_errors() {
    let t = from_vec::<f32>(&[2, 3], &[0.0; 6]);
    let e = kernels::sum(&t, &[0, -2], false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("dim 0 appears multiple times"), "{e}");
    assert_eq!(
        kernels::sum(&t, &[2], false).unwrap_err().kind(),
        ErrorKind::Shape
    );
}

#[test]
fn large_float_sums_are_accurate() {
    // Pairwise summation: a million values with a large common part stay
    // within a few ulps of the exact (f64) sum, where a running f32 sum
    // drifts by about 1e-3 relative.
    let n = 1 << 20;
    let v: Vec<f32> = random_bits(n)
        .iter()
        .map(|&b| 1.0 + (b % 1000) as f32 * 1e-3)
        .collect();
    let exact: f64 = v.iter().map(|&x| x as f64).sum();
    let t = from_vec(&[n as i64], &v);
    for threads in [1, 2] {
        tessera::parallel::set_num_threads(threads);
        let got = scalar_of::<f32>(&kernels::sum(&t, &[], false).unwrap()) as f64;
        assert!(
            ((got - exact) / exact).abs() < 1e-6,
            "{threads} threads: {got} vs {exact}"
        );
        let halves = from_vec(&[2, (n / 2) as i64], &v);
        let rows = to_vec::<f32>(&kernels::sum(&halves, &[1], false).unwrap());
        let first: f64 = v[..n / 2].iter().map(|&x| x as f64).sum();
        assert!(((rows[0] as f64 - first) / first).abs() < 1e-6);
    }
    // Half values on a 1/8 grid: their float sum is exact, so the result
    // is the exact sum rounded once.
    let h: Vec<f16> = random_bits(20000)
        .iter()
        .map(|&b| f16::from_f32(1.0 + (b % 8) as f32 * 0.125))
        .collect();
    let exact_h: f64 = h.iter().map(|x| x.to_f64()).sum();
    let got =
        scalar_of::<f16>(&kernels::sum(&from_vec(&[h.len() as i64], &h), &[], false).unwrap());
    assert_eq!(got, f16::from_f64(exact_h), "half sums accumulate in float");
}

// ------------------------------------------------ parallel and SIMD paths

#[test]
fn parallel_streaming_and_scalar_paths_agree() {
    // Outputs over 32 MiB are written with streaming stores; views at odd
    // offsets start the aligned part mid-run.
    let n = (8 << 20) + 21;
    let a = from_vec(&[n as i64], &values::<f32>(n, 1));
    let b = from_vec(&[n as i64], &values::<f32>(n, 2));
    for threads in [1, 2] {
        tessera::parallel::set_num_threads(threads);
        let av = a.narrow(0, 3, (n - 3) as i64).unwrap();
        let bv = b.narrow(0, 1, (n - 3) as i64).unwrap();
        let out = Tensor::empty(&[(n - 3) as i64], DType::Float, Device::CPU).unwrap();
        let out_v = out.narrow(0, 1, (n - 4) as i64).unwrap();
        kernels::add(
            Some(&out_v),
            &av.narrow(0, 0, (n - 4) as i64).unwrap(),
            &bv.narrow(0, 0, (n - 4) as i64).unwrap(),
            Scalar::Int(1),
        )
        .unwrap();
        let (x, y, z) = (
            to_vec::<f32>(&av),
            to_vec::<f32>(&bv),
            to_vec::<f32>(&out_v),
        );
        assert!((0..n - 4).all(|i| z[i] == x[i] + y[i]), "{threads} threads");
        let h = Tensor::empty(&[(n - 3) as i64], DType::Half, Device::CPU).unwrap();
        kernels::copy_(&h, &av).unwrap();
        let hv = to_vec::<f16>(&h);
        assert!((0..n - 3)
            .step_by(997)
            .all(|i| hv[i] == f16::from_f32(x[i])));
        let c = Tensor::empty(&[(n - 3) as i64], DType::Float, Device::CPU).unwrap();
        kernels::copy_(
            &c.narrow(0, 1, (n - 4) as i64).unwrap(),
            &av.narrow(0, 0, (n - 4) as i64).unwrap(),
        )
        .unwrap();
        let cv = to_vec::<f32>(&c);
        assert!((0..n - 4).step_by(991).all(|i| cv[i + 1] == x[i]));
        kernels::fill_(&c, Scalar::Float(1.5)).unwrap();
        assert!(to_vec::<f32>(&c).iter().all(|&v| v == 1.5));
    }
}

#[test]
fn streamed_half_casts_convert_every_element() {
    // A half output of 32 MiB or more is streamed, and a long run is
    // converted as four parts at once: every element must still be the
    // `half` crate's rounding, at odd offsets on both sides.
    let n = (16 << 20) + 77;
    let x = values::<f32>(n, 5);
    let a = from_vec(&[n as i64], &x);
    for threads in [1, 2] {
        tessera::parallel::set_num_threads(threads);
        let h = Tensor::empty(&[n as i64], DType::Half, Device::CPU).unwrap();
        let m = (n - 3) as i64;
        kernels::copy_(&h.narrow(0, 1, m).unwrap(), &a.narrow(0, 2, m).unwrap()).unwrap();
        let hv = to_vec::<f16>(&h);
        let bad = (0..m as usize).find(|&i| hv[i + 1] != f16::from_f32(x[i + 2]));
        assert_eq!(bad, None, "{threads} threads");
    }
}

#[test]
fn avx2_and_baseline_loops_give_identical_bits() {
    let a = make::<f32>(Layout::Permuted, 300, 129, 1);
    let b = make::<f32>(Layout::Contiguous, 300, 129, 2);
    let h = make::<f16>(Layout::Contiguous, 3, 40001, 3);
    // Long enough to be read as four streams, with a rest after them.
    let long = make::<f32>(Layout::Contiguous, 1, 4 * 3 * 4096 + 4095, 4);
    let run = || {
        let s = kernels::add(None, &a, &b, Scalar::Float(0.3)).unwrap();
        let t = kernels::sum(&s, &[], false).unwrap();
        let l = kernels::sum(&long, &[], false).unwrap();
        let u = kernels::sum(&h, &[1], false).unwrap();
        let p = Tensor::empty(&[129, 300], DType::Float, Device::CPU).unwrap();
        kernels::copy_(&p, &s.transpose(0, 1).unwrap()).unwrap();
        (
            to_vec::<f32>(&s),
            to_vec::<f32>(&t),
            to_vec::<f16>(&u),
            to_vec::<f32>(&p),
            to_vec::<f32>(&l),
        )
    };
    kernels::simd::set_avx2_enabled(true);
    let with = run();
    kernels::simd::set_avx2_enabled(false);
    let without = run();
    kernels::simd::set_avx2_enabled(true);
    assert_eq!(with, without);
}

// ------------------------------------------------------------- read-only

#[test]
fn read_only_outputs_are_refused_by_every_kernel_and_the_iterator() {
    let ro = from_vec::<f32>(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let w = from_vec::<f32>(&[2, 3], &[2.0; 6]);
    ro.storage().make_read_only();
    assert!(ro.is_read_only() && !w.is_read_only());
    let one = Scalar::Int(1);
    let results = [
        ("fill_", ro.fill_(Scalar::Float(0.0)).map(|_| ())),
        ("copy_", kernels::copy_(&ro, &w)),
        ("add", kernels::add(Some(&ro), &w, &w, one).map(|_| ())),
        ("sub", kernels::sub(Some(&ro), &w, &w, one).map(|_| ())),
        ("mul", kernels::mul(Some(&ro), &w, &w).map(|_| ())),
        ("div", kernels::div(Some(&ro), &w, &w).map(|_| ())),
        (
            "div_rounding",
            kernels::div_rounding(Some(&ro), &w, &w, RoundingMode::Floor).map(|_| ()),
        ),
        ("neg", kernels::neg(Some(&ro), &w).map(|_| ())),
        (
            "iterator build",
            tessera::iterator::TensorIterator::binary_op(Some(&ro), &w, &w).map(|_| ()),
        ),
    ];
    for (what, r) in results {
        let e = r.expect_err(what);
        assert_eq!(e.kind(), ErrorKind::ReadOnly, "{what}: {e}");
        assert!(e.message().contains("read-only"), "{what}: {e}");
    }
    assert_eq!(to_vec::<f32>(&ro), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    // reading works, and results are writable
    let r = kernels::add(None, &ro, &ro, one).unwrap();
    assert!(!r.is_read_only());
    assert_eq!(to_vec::<f32>(&r), [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
}

/// Small same-shape contiguous ops skip the iterator (kernels/flat.rs):
/// the results, aliasing, version bumps and fallbacks must be those of
/// the iterator path.
#[test]
fn flat_shortcut_matches_the_iterator_rules() {
    let n = 1000;
    let a = from_vec::<f32>(&[n], &values::<f32>(n as usize, 1));
    let b = from_vec::<f32>(&[n], &values::<f32>(n as usize, 2));
    let one = Scalar::Int(1);
    // Results against the reference loop, allocated and given.
    type Reference = fn(f32, f32) -> f32;
    let cases: [(&str, Reference); 4] = [
        ("add", |x, y| x + y),
        ("sub", |x, y| x - y),
        ("mul", |x, y| x * y),
        ("div", |x, y| x / y),
    ];
    for (name, f) in cases {
        let run = |out: Option<&Tensor>| match name {
            "add" => kernels::add(out, &a, &b, one),
            "sub" => kernels::sub(out, &a, &b, one),
            "mul" => kernels::mul(out, &a, &b),
            _ => kernels::div(out, &a, &b),
        };
        let (_, want) = reference_binary::<f32>(&a, &b, f);
        let got = run(None).unwrap();
        assert_eq!(got.sizes(), &[n]);
        assert!(got.is_contiguous(tessera::MemoryFormat::Contiguous));
        assert_all_same(&to_vec::<f32>(&got), &want, name);
        let out = Tensor::empty(&[n], DType::Float, Device::CPU).unwrap();
        let v0 = out.version();
        let r = run(Some(&out)).unwrap();
        assert!(Tensor::ptr_eq(&r, &out));
        assert_eq!(out.version(), v0 + 1, "{name} bumps the output's version");
        assert_all_same(&to_vec::<f32>(&out), &want, name);
    }
    // alpha scales b
    let r = kernels::add(None, &a, &b, Scalar::Float(0.5)).unwrap();
    let (_, want) = reference_binary::<f32>(&a, &b, |x, y| x + 0.5 * y);
    assert_all_same(&to_vec::<f32>(&r), &want, "add alpha 0.5");
    // An output that is another tensor over a's memory (full overlap) is
    // an in-place op, as through the iterator.
    let a2 = from_vec::<f32>(&[n], &values::<f32>(n as usize, 1));
    let alias = a2.as_strided(&[n], &[1], 0).unwrap();
    assert!(!Tensor::ptr_eq(&alias, &a2));
    kernels::add(Some(&alias), &a2, &b, one).unwrap();
    let (_, want) = reference_binary::<f32>(&a, &b, |x, y| x + y);
    assert_all_same(&to_vec::<f32>(&a2), &want, "add into an alias of a");
    // Mixed dtypes and wrapped numbers still promote.
    let i = from_vec::<i32>(&[n], &values::<i32>(n as usize, 3));
    assert_eq!(
        kernels::add(None, &i, &a, one).unwrap().dtype(),
        DType::Float
    );
    assert_eq!(kernels::div(None, &i, &i).unwrap().dtype(), DType::Float);
    let w = Tensor::wrapped_scalar(Scalar::Float(2.5)).unwrap();
    let one_elem = from_vec::<i32>(&[], &[4]);
    assert_eq!(
        kernels::mul(None, &one_elem, &w).unwrap().dtype(),
        DType::Float,
        "a wrapped number promotes an Int tensor to Float"
    );
    // An output of another shape is resized, of another dtype cast to.
    let small = Tensor::empty(&[3], DType::Float, Device::CPU).unwrap();
    kernels::add(Some(&small), &a, &b, one).unwrap();
    assert_eq!(small.sizes(), &[n]);
    let dbl = Tensor::empty(&[n], DType::Double, Device::CPU).unwrap();
    kernels::add(Some(&dbl), &a, &b, one).unwrap();
    let got: Vec<f32> = to_vec::<f64>(&dbl).iter().map(|&x| x as f32).collect();
    assert_all_same(&got, &want, "add into a Double output");
}

/// Sums along the innermost dim read four rows at once; each row's sum
/// must have the bits of that row summed alone (the same cascade of
/// blocks), for rows shorter and longer than one block, a row count that
/// is not a multiple of four, and two reduced dims sharing outputs.
#[test]
fn row_sums_read_four_rows_at_once_with_the_bits_of_one_row() {
    for (rows, cols) in [(7i64, 1000i64), (9, 5000), (4, 4096), (3, 12000)] {
        let data: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919) % 1013) as f32 * 0.37 - 150.0)
            .collect();
        let t = from_vec::<f32>(&[rows, cols], &data);
        let s = kernels::sum(&t, &[1], false).unwrap();
        let got = to_vec::<f32>(&s);
        for r in 0..rows {
            let row = t.narrow(0, r, 1).unwrap();
            let alone = to_vec::<f32>(&kernels::sum(&row, &[], false).unwrap())[0];
            assert_eq!(
                got[r as usize].to_bits(),
                alone.to_bits(),
                "[{rows},{cols}] row {r}"
            );
        }
    }
    // [2, 5, 300] over dims 0 and 2: runs of dim 2 from both dim-0 slices
    // add into the same 5 outputs.
    let data: Vec<f32> = (0..3000).map(|i| (i % 97) as f32 * 0.5).collect();
    let t = from_vec::<f32>(&[2, 5, 300], &data);
    let got = to_vec::<f32>(&kernels::sum(&t, &[0, 2], false).unwrap());
    for j in 0..5usize {
        let want: f32 = (0..2)
            .map(|i| {
                data[i * 1500 + j * 300..i * 1500 + j * 300 + 300]
                    .iter()
                    .sum::<f32>()
            })
            .sum();
        assert!(
            (got[j] - want).abs() <= 1e-3 * want.abs(),
            "column {j}: {} vs {want}",
            got[j]
        );
    }
}

/// A sum over an outer dim on two threads splits that dim (each task reads
/// a contiguous half into outputs of its own, combined in task order):
/// exact on integers, within rounding on floats, and unchanged on one
/// thread; amax and a 3-d tensor with the outer and inner dims reduced
/// take the same path.
#[test]
fn outer_dim_reductions_split_the_reduced_dim_across_threads() {
    let (rows, cols) = (4096i64, 64i64);
    let ints: Vec<i64> = (0..rows * cols).map(|i| (i * 31) % 1009 - 500).collect();
    let floats: Vec<f32> = ints.iter().map(|&v| v as f32 * 0.125).collect();
    let ti = from_vec::<i64>(&[rows, cols], &ints);
    let tf = from_vec::<f32>(&[rows, cols], &floats);
    let t3 = from_vec::<f32>(&[rows, 4, 16], &floats);
    let mut one_thread = Vec::new();
    for threads in [1, 2] {
        tessera::parallel::set_num_threads(threads);
        let si = to_vec::<i64>(&kernels::sum(&ti, &[0], false).unwrap());
        let sf = to_vec::<f32>(&kernels::sum(&tf, &[0], false).unwrap());
        let mf = to_vec::<f32>(&kernels::amax(&tf, &[0], false).unwrap());
        let s3 = to_vec::<f32>(&kernels::sum(&t3, &[0, 2], false).unwrap());
        for c in 0..cols as usize {
            let col = (0..rows as usize).map(|r| ints[r * cols as usize + c]);
            assert_eq!(
                si[c],
                col.clone().sum::<i64>(),
                "{threads} threads, column {c}"
            );
            let want = col.clone().sum::<i64>() as f32 * 0.125;
            assert!(
                (sf[c] - want).abs() <= 1e-3 * want.abs().max(1.0),
                "{threads}: {c}"
            );
            assert_eq!(
                mf[c],
                col.max().unwrap() as f32 * 0.125,
                "{threads}: amax {c}"
            );
        }
        for j in 0..4usize {
            let want: f64 = (0..rows as usize)
                .flat_map(|r| (0..16).map(move |k| (r, k)))
                .map(|(r, k)| floats[r * 64 + j * 16 + k] as f64)
                .sum();
            assert!(
                (s3[j] as f64 - want).abs() <= 1e-3 * want.abs().max(1.0),
                "{threads}: {j}"
            );
        }
        if threads == 1 {
            one_thread = sf;
        } else {
            assert!(one_thread
                .iter()
                .zip(&sf)
                .all(|(a, b)| (a - b).abs() <= 1e-3 * a.abs().max(1.0)));
        }
    }
}

// ------------------------------------------------ empty and misaligned

#[test]
fn small_op_shortcut_reads_nothing_of_empty_tensors() {
    // Contiguous same-shape operands take the small-op shortcut; an empty
    // tensor's data pointer is NULL, and the shortcut must not read it (a
    // debug build checks every read).
    for sizes in [&[0i64][..], &[3, 0], &[0, 5]] {
        for dtype in [
            DType::Float,
            DType::Double,
            DType::Int,
            DType::Half,
            DType::Byte,
        ] {
            let a = Tensor::empty(sizes, dtype, Device::CPU).unwrap();
            let b = Tensor::empty(sizes, dtype, Device::CPU).unwrap();
            let given = Tensor::empty(sizes, dtype, Device::CPU).unwrap();
            let one = Scalar::Int(1);
            let results = [
                kernels::add(None, &a, &b, one).unwrap(),
                kernels::add(Some(&given), &a, &b, one).unwrap(),
                kernels::sub(None, &a, &b, one).unwrap(),
                kernels::mul(Some(&given), &a, &b).unwrap(),
                kernels::div(None, &a, &b).unwrap(),
            ];
            let mut more = vec![
                a.to_dtype(DType::Double).unwrap(),
                a.clone_tensor(tessera::MemoryFormat::Preserve).unwrap(),
            ];
            if dtype != DType::Byte {
                more.push(kernels::neg(None, &a).unwrap());
            }
            for r in results.iter().chain(&more) {
                assert_eq!(r.sizes(), sizes, "{dtype:?} {sizes:?}");
                assert_eq!(r.numel(), 0);
            }
        }
    }
}

/// The AVX2 sums of f32, f16, bfloat16 and f64 (one run, four runs in one
/// pass, four or eight rows added into a row) have the bits of the portable lanes:
/// the same lanes, tails and tree (src/kernels/reduce/pairwise.rs, `lanes`).
/// Values with many fraction bits, so any other order rounds differently;
/// runs past the four-stream length, rows with tails, a row count not a
/// multiple of four, and a start one element past the allocation's.
fn check_sum_bits_with_and_without_avx2<T: Elem + std::fmt::Debug>() {
    let bits = random_bits(4 * 70_001 + 1);
    let vals: Vec<T> = bits
        .iter()
        .map(|&b| T::from_complex((b % 100_003) as f64 * 0.001_37 - 60.0, 0.0))
        .collect();
    let flat = from_vec(&[vals.len() as i64], &vals);
    let cases: Vec<(Tensor, &[i64])> = vec![
        (flat.narrow(0, 1, 70_001).unwrap(), &[]),
        (flat.narrow(0, 0, 4 * 70_001).unwrap(), &[]),
        (
            flat.narrow(0, 1, 9 * 5000)
                .unwrap()
                .view(&[9, 5000])
                .unwrap(),
            &[1],
        ),
        (
            flat.narrow(0, 0, 3 * 12_000)
                .unwrap()
                .view(&[3, 12_000])
                .unwrap(),
            &[1],
        ),
        (
            flat.narrow(0, 1, 8 * 4099)
                .unwrap()
                .view(&[8, 4099])
                .unwrap(),
            &[1],
        ),
        (
            flat.narrow(0, 1, 9 * 4099)
                .unwrap()
                .view(&[9, 4099])
                .unwrap(),
            &[0],
        ),
        (
            flat.narrow(0, 0, 64 * 1000)
                .unwrap()
                .view(&[64, 1000])
                .unwrap(),
            &[0],
        ),
    ];
    // Over dim 0, eight rows a pass (half, bfloat16) or four, from eight
    // (four) parts of the rows: rows 0 and 12 of 24 hold +big and -big
    // (2^14 and up), the others small values (2^-3 and up), so that the
    // order of the pass's tree shows even after the result is rounded to
    // 16 bits (big + small rounds the small part away in float; big -
    // big first keeps it).
    let spread: Vec<T> = bits
        .iter()
        .take(24 * 999)
        .enumerate()
        .map(|(i, &b)| {
            let (row, col) = (i / 999, i % 999);
            let big = 16384.0 * (1.0 + (col % 64) as f64 / 64.0);
            let small = (1.0 + (b % 256) as f64 / 256.0) * 0.125;
            let v = match row {
                0 => big,
                12 => -big,
                _ if (b >> 9) & 1 == 1 => -small,
                _ => small,
            };
            T::from_complex(v, 0.0)
        })
        .collect();
    let spread = from_vec(&[24, 999], &spread);
    let mut cases = cases;
    cases.push((spread.clone(), &[0]));
    cases.push((spread.narrow(0, 1, 17).unwrap(), &[0]));
    for threads in [1, 2] {
        tessera::parallel::set_num_threads(threads);
        for (t, dims) in &cases {
            let run = |avx2: bool| {
                kernels::simd::set_avx2_enabled(avx2);
                to_vec::<T>(&kernels::sum(t, dims, false).unwrap())
            };
            let (with, without) = (run(true), run(false));
            kernels::simd::set_avx2_enabled(true);
            let what = format!(
                "sum {:?} {:?} over {dims:?}, {threads} threads",
                T::DTYPE,
                t.sizes()
            );
            assert_all_same(&with, &without, &what);
        }
    }
}

#[test]
fn floating_sums_have_the_same_bits_with_and_without_avx2() {
    check_sum_bits_with_and_without_avx2::<f32>();
    check_sum_bits_with_and_without_avx2::<f16>();
    check_sum_bits_with_and_without_avx2::<bf16>();
    check_sum_bits_with_and_without_avx2::<f64>();
}

#[test]
fn float_sums_read_runs_at_any_address() {
    // A float tensor over external memory (as tsr_storage_from_data_ptr
    // makes) can start at an address that is not a multiple of 4; the
    // AVX2 lane sums and their tails must read it unaligned. Lengths with
    // n % 32 != 0 reach the tails; the 2-D case the four-row kernel.
    for sizes in [&[70_001i64][..], &[8, 4_099], &[37]] {
        let n: usize = sizes.iter().product::<i64>() as usize;
        let vals = values::<f32>(n, 3);
        let mut buf = vec![0u8; 4 * n + 8];
        let base = buf.as_mut_ptr();
        let off = if (base as usize + 1) % 4 != 0 { 1 } else { 2 };
        // SAFETY: off + 4 * n <= buf.len(); the writes are unaligned.
        let data = unsafe { base.add(off) } as *mut f32;
        assert_ne!(data as usize % 4, 0);
        for (i, v) in vals.iter().enumerate() {
            // SAFETY: i < n, inside the buffer (above).
            unsafe { data.add(i).write_unaligned(*v) };
        }
        // SAFETY: no deleter: the storage does not own the buffer, which
        // outlives every tensor over it (they drop at the loop's end).
        let dp = unsafe {
            tessera::DataPtr::from_raw_parts(
                data as *mut std::ffi::c_void,
                std::ptr::null_mut(),
                None,
                Device::CPU,
            )
        };
        let storage = tessera::Storage::from_data_ptr(dp, 4 * n);
        let t = Tensor::from_storage(&storage, 0, sizes, None, DType::Float).unwrap();
        let total: f64 = vals.iter().map(|&v| v as f64).sum();
        let got = scalar_of::<f32>(&kernels::sum(&t, &[], false).unwrap());
        assert_eq!(got as f64, total, "sum of all {sizes:?}");
        if sizes.len() == 2 {
            let cols = sizes[1] as usize;
            let rows = kernels::sum(&t, &[1], false).unwrap();
            let want: Vec<f32> = vals.chunks(cols).map(|r| r.iter().sum::<f32>()).collect();
            let got = to_vec::<f32>(&rows);
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g, w, "row sums of {sizes:?}");
            }
        }
        drop(t);
        drop(storage);
        drop(buf);
    }
}
