//! Property test of the iterator's traversal: random strided, broadcast
//! and permuted operands; every output element is visited exactly once and
//! sees the right input elements, for 1 and 2 threads and several grain
//! sizes.

use proptest::prelude::*;
use tessera::iterator::IterConfig;
use tessera::{DType, Device, Tensor};

/// An input: a view of a fresh tensor built by permuting and slicing, then
/// broadcast against the loop shape by its own size-1 dims.
#[derive(Debug, Clone)]
struct ViewSpec {
    sizes: Vec<i64>, // the view's sizes (1 where it broadcasts)
    perm_seed: u64,  // how to permute the base
    step: Vec<i64>,  // slicing step per dim (1 or 2)
}

fn view_spec(shape: Vec<i64>) -> impl Strategy<Value = ViewSpec> {
    let n = shape.len();
    (
        proptest::collection::vec(any::<bool>(), n),
        any::<u64>(),
        proptest::collection::vec(1i64..=2, n),
        0..=n,
    )
        .prop_map(move |(bcast, perm_seed, step, drop_leading)| {
            let sizes: Vec<i64> = shape
                .iter()
                .zip(&bcast)
                .map(|(&s, &b)| if b { 1 } else { s })
                .skip(drop_leading)
                .collect();
            let k = sizes.len();
            ViewSpec {
                sizes,
                perm_seed,
                step: step[n - k..].to_vec(),
            }
        })
}

fn permutation(n: usize, seed: u64) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    let mut s = seed;
    for i in (1..n).rev() {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        p.swap(i, (s >> 33) as usize % (i + 1));
    }
    p
}

/// Builds the view and fills its base with distinct values.
fn make_view(spec: &ViewSpec, tag: f64) -> Tensor {
    let n = spec.sizes.len();
    let perm = permutation(n, spec.perm_seed);
    // base sizes: the view's sizes times the step, laid out in permuted order
    let want: Vec<i64> = spec
        .sizes
        .iter()
        .zip(&spec.step)
        .map(|(s, st)| (s * st).max(1))
        .collect();
    let base_sizes: Vec<i64> = perm.iter().map(|&p| want[p]).collect();
    let base = Tensor::empty(&base_sizes, DType::Double, Device::CPU).unwrap();
    let count = base.numel() as usize;
    if count > 0 {
        // SAFETY: base is contiguous with `count` doubles.
        let s = unsafe { std::slice::from_raw_parts_mut(base.data_ptr() as *mut f64, count) };
        for (i, v) in s.iter_mut().enumerate() {
            *v = tag + i as f64;
        }
    }
    // undo the permutation, then slice with steps
    let mut inv = vec![0i64; n];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i as i64;
    }
    let t = base.permute(&inv).unwrap();
    let strides: Vec<i64> = t
        .strides()
        .iter()
        .zip(&spec.step)
        .map(|(s, st)| s * st)
        .collect();
    t.as_strided(&spec.sizes, &strides, t.storage_offset())
        .unwrap()
}

/// The element of `t` at the loop index `index` (broadcasting from the right).
fn at(t: &Tensor, index: &[i64]) -> f64 {
    let off = index.len() - t.ndim();
    let mut e = t.storage_offset();
    for d in 0..t.ndim() {
        let i = if t.sizes()[d] == 1 { 0 } else { index[off + d] };
        e += i * t.strides()[d];
    }
    // SAFETY: e is inside the storage (bounds-checked view).
    unsafe { *(t.storage().data() as *const f64).offset(e as isize) }
}

fn at_i64(t: &Tensor, index: &[i64]) -> i64 {
    let e = t.storage_offset()
        + index
            .iter()
            .zip(t.strides())
            .map(|(i, s)| i * s)
            .sum::<i64>();
    // SAFETY: as at().
    unsafe { *(t.storage().data() as *const i64).offset(e as isize) }
}

fn case() -> impl Strategy<Value = (Vec<i64>, ViewSpec, ViewSpec, u64)> {
    proptest::collection::vec(0i64..5, 0..5).prop_flat_map(|shape| {
        (
            Just(shape.clone()),
            view_spec(shape.clone()),
            view_spec(shape),
            any::<u64>(),
        )
    })
}

fn check(shape: &[i64], a: &Tensor, b: &Tensor, count_seed: u64, grain: i64) {
    // the counting output has a random dim order too
    let perm = permutation(shape.len(), count_seed);
    let base_sizes: Vec<i64> = perm.iter().map(|&p| shape[p]).collect();
    let base = Tensor::empty(&base_sizes, DType::Long, Device::CPU).unwrap();
    base.fill_(tessera::Scalar::Int(0)).unwrap();
    let mut inv = vec![0i64; shape.len()];
    for (i, &p) in perm.iter().enumerate() {
        inv[p] = i as i64;
    }
    let count = base.permute(&inv).unwrap();
    let mut c = IterConfig::new();
    c.add_output(None).unwrap();
    c.add_output(Some(count.clone())).unwrap();
    c.add_input(a.clone())
        .unwrap()
        .add_input(b.clone())
        .unwrap();
    c.check_all_same_dtype(false);
    let it = c.build().unwrap();
    it.for_each(
        &|d: &mut [*mut u8], s: &[i64], n0: i64, n1: i64| {
            for j in 0..n1 {
                for i in 0..n0 {
                    let p = |arg: usize| (i * s[arg] + j * s[4 + arg]) as isize;
                    // SAFETY: the iterator keeps offsets in bounds.
                    unsafe {
                        let x = *(d[2].offset(p(2)) as *const f64);
                        let y = *(d[3].offset(p(3)) as *const f64);
                        *(d[0].offset(p(0)) as *mut f64) = x + 1000.0 * y;
                        *(d[1].offset(p(1)) as *mut i64) += 1;
                    }
                }
            }
        },
        grain,
    );
    let out = it.output(0);
    assert_eq!(out.sizes(), shape);
    let numel: i64 = shape.iter().product();
    let mut index = vec![0i64; shape.len()];
    for _ in 0..numel {
        let want = at(a, &index) + 1000.0 * at(b, &index);
        assert_eq!(at(&out, &index), want, "value at {index:?}");
        assert_eq!(at_i64(&count, &index), 1, "visits of {index:?}");
        for d in (0..shape.len()).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn every_element_once_with_the_right_inputs((_shape, sa, sb, seed) in case()) {
        let a = make_view(&sa, 0.0);
        let b = make_view(&sb, 0.5);
        // the loop shape is the inputs' broadcast (dropped leading dims and
        // size-1 dims may make it smaller than the generated shape)
        let shape = tessera::tensor::shape::broadcast_shapes(a.sizes(), b.sizes()).unwrap().to_vec();
        for threads in [1, 2] {
            tessera::parallel::set_num_threads(threads);
            for grain in [1, 7, 64, 32768] {
                check(&shape, &a, &b, seed, grain);
            }
        }
    }
}
