//! The tensors and reference readers the kernel tests share
//! (tests/kernels.rs, tests/reductions.rs): tensors from values, elements
//! read back through strides, comparisons that treat NaNs as one value,
//! and the reductions' reference fold, inputs and dims.
#![allow(dead_code)]

use tessera::kernels::elem::{Complex, Elem};
use tessera::{Device, Tensor};

/// A contiguous tensor holding `data`.
pub fn from_vec<T: Elem>(sizes: &[i64], data: &[T]) -> Tensor {
    let t = Tensor::empty(sizes, T::DTYPE, Device::CPU).unwrap();
    assert_eq!(t.numel() as usize, data.len());
    let p = t.data_ptr() as *mut T;
    for (i, v) in data.iter().enumerate() {
        // SAFETY: the tensor holds data.len() contiguous elements.
        unsafe { p.add(i).write_unaligned(*v) };
    }
    t
}

/// The elements of `t` in row-major logical order, read through its
/// strides (the reference reader: an odometer, no kernels).
pub fn to_vec<T: Elem>(t: &Tensor) -> Vec<T> {
    assert_eq!(t.dtype(), T::DTYPE);
    let n = t.numel() as usize;
    if n == 0 {
        return Vec::new();
    }
    let (sizes, strides) = (t.sizes().to_vec(), t.strides().to_vec());
    let base = t.data_ptr() as *const T;
    let mut idx = vec![0i64; sizes.len()];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let off: i64 = idx.iter().zip(&strides).map(|(i, s)| i * s).sum();
        // SAFETY: idx stays inside the sizes, so the offset is inside the
        // tensor's storage.
        out.push(unsafe { base.offset(off as isize).read_unaligned() });
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

/// Deterministic test values: small multiples of 1/8 (sums and products
/// of a few of them are exact in every floating type), with a few zeros.
pub fn values<T: Elem>(n: usize, seed: usize) -> Vec<T> {
    (0..n)
        .map(|i| {
            let k = (i * 7919 + seed * 104729) % 97;
            let re = (k as f64 - 48.0) * 0.125;
            let im = ((k * 31) % 17) as f64 * 0.25 - 2.0;
            T::from_complex(re, im)
        })
        .collect()
}

/// Two elements are the same value: equal bytes, or both NaN.
pub fn same<T: Elem>(a: T, b: T) -> bool {
    let size = std::mem::size_of::<T>();
    // SAFETY: both are plain values of `size` bytes.
    let (x, y) = unsafe {
        (
            std::slice::from_raw_parts(&a as *const T as *const u8, size),
            std::slice::from_raw_parts(&b as *const T as *const u8, size),
        )
    };
    if x == y {
        return true;
    }
    let (p, q) = (a.cast::<Complex<f64>>(), b.cast::<Complex<f64>>());
    let nan = |c: Complex<f64>| c.re.is_nan() || c.im.is_nan();
    nan(p) && nan(q) && !T::DTYPE.is_integral(true)
}

pub fn assert_all_same<T: Elem + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(same(*g, *w), "{what}: element {i}: got {g:?}, want {w:?}");
    }
}

/// Pseudo-random bit patterns (every class: normals, subnormals, zeros,
/// infinities, NaNs).
pub fn random_bits(n: usize) -> Vec<u64> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        })
        .collect()
}

/// Reference reduction: every element of `a` folded into its output slot
/// in logical order.
pub fn reference_reduce<T: Elem, A: Copy>(
    a: &Tensor,
    mask: &[bool],
    init: A,
    f: impl Fn(A, T) -> A,
) -> Vec<A> {
    let sizes = a.sizes().to_vec();
    let out_sizes: Vec<i64> = sizes
        .iter()
        .zip(mask)
        .map(|(&s, &r)| if r { 1 } else { s })
        .collect();
    let out_n: i64 = out_sizes.iter().product();
    let mut out = vec![init; out_n as usize];
    let vals = to_vec::<T>(a);
    let mut idx = vec![0i64; sizes.len()];
    for v in vals {
        let mut o = 0i64;
        for d in 0..sizes.len() {
            o = o * out_sizes[d] + if mask[d] { 0 } else { idx[d] };
        }
        out[o as usize] = f(out[o as usize], v);
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

pub fn reduce_inputs<T: Elem>() -> Vec<(String, Tensor)> {
    reduce_inputs_of(values::<T>)
}

/// The reductions' inputs (contiguous, permuted, sliced, expanded, a
/// large transposed one) holding `values(n, seed)`.
pub fn reduce_inputs_of<T: Elem>(values: fn(usize, usize) -> Vec<T>) -> Vec<(String, Tensor)> {
    let cube = from_vec(&[3, 4, 5], &values(60, 1));
    vec![
        ("contiguous".into(), cube.clone()),
        ("permuted".into(), cube.permute(&[2, 0, 1]).unwrap()),
        (
            "sliced".into(),
            from_vec(&[6, 4, 11], &values(264, 2))
                .as_strided(&[3, 4, 5], &[88, 11, 2], 1)
                .unwrap(),
        ),
        (
            "expanded".into(),
            from_vec(&[1, 4, 5], &values(20, 3))
                .expand(&[3, 4, 5])
                .unwrap(),
        ),
        (
            "large".into(),
            from_vec(&[70, 1100], &values(77000, 4))
                .transpose(0, 1)
                .unwrap(),
        ),
    ]
}

pub const DIMS: [&[i64]; 7] = [&[], &[0], &[1], &[-1], &[0, 2], &[2, 0, 1], &[1, 2]];

pub fn mask_of(ndim: usize, dims: &[i64]) -> Vec<bool> {
    if dims.is_empty() {
        return vec![true; ndim];
    }
    let mut m = vec![false; ndim];
    for &d in dims {
        m[if d < 0 {
            (d + ndim as i64) as usize
        } else {
            d as usize
        }] = true;
    }
    m
}

pub fn final_sizes(a: &Tensor, mask: &[bool], keepdim: bool) -> Vec<i64> {
    a.sizes()
        .iter()
        .zip(mask)
        .filter_map(|(&s, &r)| match (r, keepdim) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(s),
        })
        .collect()
}
