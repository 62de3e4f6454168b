//! Fuzzes the iterator build: arbitrary operands (views with arbitrary
//! shapes, strides, offsets and dtypes over a few storages, allocated
//! outputs, wrapped scalars), arbitrary flags and static declarations, or
//! one of the c10 presets. Building may fail; it must not panic. A built
//! iterator must only ever hand its loop addresses inside each operand's
//! storage, visit exactly numel elements, cover every element of every
//! operand, and release every reference it took.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicI64, Ordering};
use tessera::iterator::{IterConfig, TensorIterator};
use tessera::{Device, DeviceType, Scalar, Storage, Tensor};
use tessera_fuzz::{
    byte_offset, check_tensor, check_traversal, dtypes, element_offsets, indices, Input,
};

const MAX_COLLECT: i64 = 2048;

fn storages(input: &mut Input) -> Vec<Storage> {
    let n = 1 + input.range(0, 2) as usize;
    (0..n)
        .map(|k| {
            let nbytes = input.range(0, 640) as usize;
            let s = Storage::new(nbytes, Device::CPU, input.bool()).expect("a small storage");
            // A recognizable pattern, so loops read initialized bytes.
            s.fill(k as u8 + 1).expect("fill a CPU storage");
            s
        })
        .collect()
}

/// A view over one of the storages, or None when the arguments are
/// refused (which must be an error, not a panic).
fn view(input: &mut Input, pool: &[Storage]) -> Option<Tensor> {
    let s = &pool[input.u8() as usize % pool.len()];
    let dtype = input.pick(dtypes());
    let ndim = input.range(0, 4) as usize;
    let sizes: Vec<i64> = (0..ndim).map(|_| input.int(0, 4)).collect();
    let strides: Option<Vec<i64>> = if input.bool() {
        None
    } else {
        Some((0..ndim).map(|_| input.int(0, 6)).collect())
    };
    let offset = input.int(0, 8);
    let t = Tensor::from_storage(s, offset, &sizes, strides.as_deref(), dtype).ok()?;
    check_tensor(&t);
    // Expanded views (stride 0) may have 2^40 elements: casting or
    // allocating for those only measures the machine. Empty ones may keep
    // huge sizes and strides.
    (t.numel() <= 1 << 16).then_some(t)
}

fn scalar(input: &mut Input) -> Scalar {
    match input.range(0, 4) {
        0 => Scalar::Int(input.int(-3, 3)),
        1 => Scalar::Float(input.int(-3, 3) as f64 * 0.5),
        2 => Scalar::Bool(input.bool()),
        3 => Scalar::UInt(input.u64()),
        _ => Scalar::Complex(1.0, -1.0),
    }
}

fn device(input: &mut Input) -> Device {
    match input.range(0, 3) {
        0 => Device::CPU,
        1 => Device::new(DeviceType::Meta, -1).expect("meta"),
        2 => Device::new(DeviceType::Cuda, 0).expect("cuda:0"),
        _ => Device::new(DeviceType::PrivateUse1, 0).expect("privateuse1:0"),
    }
}

/// An iterator from an arbitrary config, or from a preset, and the static
/// shape it was declared with, if any.
fn build(input: &mut Input, pool: &[Storage]) -> Option<(TensorIterator, Option<Vec<i64>>)> {
    let mode = input.range(0, 9);
    if mode >= 3 {
        let out = if input.bool() {
            view(input, pool)
        } else {
            None
        };
        let a = view(input, pool)?;
        let b = view(input, pool)?;
        return match mode {
            3 => TensorIterator::binary_op(out.as_ref(), &a, &b),
            4 => TensorIterator::binary_float_op(out.as_ref(), &a, &b),
            5 => TensorIterator::comparison_op(out.as_ref(), &a, &b),
            6 => TensorIterator::unary_op(out.as_ref(), &a),
            7 => TensorIterator::unary_float_op(out.as_ref(), &a),
            8 => TensorIterator::nullary_op(&a),
            _ => TensorIterator::reduce_op(&a, &b),
        }
        .ok()
        .map(|it| (it, None));
    }
    let mut config = IterConfig::new();
    for _ in 0..input.range(0, 2) {
        let out = if input.bool() {
            view(input, pool)
        } else {
            None
        };
        config.add_output(out).expect("outputs before inputs");
    }
    for _ in 0..input.range(0, 3) {
        if input.range(0, 5) == 0 {
            config
                .add_input_scalar(scalar(input))
                .expect("room for a scalar");
        } else if let Some(t) = view(input, pool) {
            config.add_input(t).expect("room for an input");
        }
    }
    let flags = input.u16();
    let bit = |i: u32| flags & (1 << i) != 0;
    config
        .check_mem_overlap(!bit(0))
        .allow_cpu_scalars(bit(1))
        .is_reduction(bit(2))
        .resize_outputs(!bit(3))
        .check_all_same_dtype(!bit(4))
        .check_all_same_device(!bit(5))
        .enforce_safe_casting_to_output(bit(6))
        .enforce_linear_iteration(bit(7))
        .promote_inputs_to_common_dtype(bit(8))
        .promote_integer_inputs_to_float(bit(9))
        .cast_common_dtype_to_outputs(bit(10))
        .resolve_overlap_by_copy(bit(11));
    if bit(12) {
        config.declare_static_dtype(input.pick(dtypes()));
    }
    if bit(13) {
        config.declare_static_device(device(input));
    }
    let mut static_shape = None;
    if bit(14) {
        let shape: Vec<i64> = (0..input.range(0, 4)).map(|_| input.int(0, 4)).collect();
        config.declare_static_shape(&shape);
        static_shape = Some(shape);
    }
    let it = config.build().ok();
    // The config still holds its references; dropping it must release them.
    drop(config);
    it.map(|it| (it, static_shape))
}

/// The byte offsets of `t`'s elements that a loop over `shape` reaches: a
/// static shape (not broadcast) walks the block of indices below it.
fn expected_offsets(t: &Tensor, static_shape: Option<&[i64]>) -> Option<BTreeSet<usize>> {
    let Some(shape) = static_shape else {
        return element_offsets(t, MAX_COLLECT);
    };
    assert_eq!(
        shape.len(),
        t.ndim(),
        "the build accepted a static shape of other ndim"
    );
    let block: Vec<i64> = shape
        .iter()
        .zip(t.sizes())
        .map(|(&s, &n)| s.min(n))
        .collect();
    let idx = indices(&block, MAX_COLLECT)?;
    Some(idx.iter().map(|i| byte_offset(t, i) as usize).collect())
}

fn check(it: &TensorIterator, static_shape: Option<&[i64]>) {
    let numel: i64 = it.shape().iter().product();
    assert_eq!(it.numel(), numel, "numel of shape {:?}", it.shape());
    assert_eq!(it.noutputs() + it.ninputs(), it.ntensors());
    for arg in 0..it.ntensors() {
        check_tensor(it.tensor(arg));
        assert_eq!(it.strides(arg).len(), it.ndim());
    }
    for i in 0..it.noutputs() {
        check_tensor(&it.output(i));
    }

    // Whatever the size: the lowest and highest address the loop can form
    // for each operand, from the shape and its byte strides.
    for arg in 0..it.ntensors() {
        let t = it.tensor(arg);
        if numel == 0 {
            break;
        }
        let first = it.data_ptr(arg) as i128;
        let (mut lo, mut hi) = (first, first);
        for (&size, &stride) in it.shape().iter().zip(it.strides(arg)) {
            let span = (size as i128 - 1) * stride as i128;
            lo += span.min(0);
            hi += span.max(0);
        }
        let start = t.storage().data() as i128;
        let end = start + t.storage().nbytes() as i128;
        assert!(
            lo >= start && hi + t.itemsize() as i128 <= end,
            "operand {arg}: the loop reaches [{lo:#x}, {hi:#x}] outside [{start:#x}, {end:#x})"
        );
    }
    if numel > 1 << 16 {
        return;
    }

    // Serial walk: every address inside the storages, numel elements, and
    // each operand's elements exactly the set its tensor describes.
    let collect = numel <= MAX_COLLECT;
    let (visited, seen) = check_traversal(it, collect);
    assert_eq!(visited, numel, "elements visited by serial_for_each");
    if collect && numel > 0 {
        for (arg, seen) in seen.iter().enumerate() {
            if let Some(expected) = expected_offsets(it.tensor(arg), static_shape) {
                assert_eq!(
                    seen, &expected,
                    "operand {arg}: the loop visits other elements than the tensor has"
                );
            }
        }
    }

    // Parallel walk with a small grain: the same count, from any thread.
    {
        let count = AtomicI64::new(0);
        let nt = it.ntensors();
        let ranges: Vec<(usize, usize)> = (0..nt)
            .map(|arg| {
                let s = it.tensor(arg).storage();
                (s.data() as usize, s.data() as usize + s.nbytes())
            })
            .collect();
        let items: Vec<i128> = (0..nt).map(|a| it.tensor(a).itemsize() as i128).collect();
        it.for_each(
            &|data: &mut [*mut u8], strides: &[i64], n0: i64, n1: i64| {
                count.fetch_add(n0 * n1, Ordering::Relaxed);
                for arg in 0..nt {
                    let first = data[arg] as i128;
                    let (s0, s1) = (strides[arg] as i128, strides[nt + arg] as i128);
                    // The extreme corners of the 2-D block bound every element.
                    let a = first + (n0 as i128 - 1) * s0;
                    let b = first + (n1 as i128 - 1) * s1;
                    let lo = first + (a - first).min(0) + (b - first).min(0);
                    let hi = first + (a - first).max(0) + (b - first).max(0);
                    let (start, end) = ranges[arg];
                    assert!(
                        lo >= start as i128 && hi + items[arg] <= end as i128,
                        "for_each: operand {arg} block outside its storage"
                    );
                }
            },
            1 + (numel / 7).max(1),
        );
        assert_eq!(
            count.load(Ordering::Relaxed),
            numel,
            "elements visited by for_each"
        );
        // Cast temporaries go back to the caller's outputs (or fail cleanly).
        let _ = it.cast_outputs();
    }

    // 32-bit pieces cover the iteration and stay inside the storages.
    {
        let mut total = 0;
        it.for_each_32bit_piece(&mut |piece: &TensorIterator| {
            total += check_traversal(piece, false).0;
        });
        assert_eq!(total, numel, "elements of the 32-bit pieces");
    }

    // Reduction groups: each sub-iterator stays inside the storages.
    if it.noutputs() >= 1 && numel <= 1 << 12 {
        let total = AtomicI64::new(0);
        it.foreach_reduced_elt(
            &|sub: &TensorIterator| {
                total.fetch_add(check_traversal(sub, false).0, Ordering::Relaxed);
            },
            false,
        );
        if it.output(0).numel() > 0 {
            assert_eq!(
                total.load(Ordering::Relaxed),
                numel,
                "elements of reduced groups"
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let pool = storages(&mut input);
    if let Some((it, static_shape)) = build(&mut input, &pool) {
        check(&it, static_shape.as_deref());
    }
    // Every tensor, config and iterator is gone: only our handles remain.
    for s in &pool {
        assert_eq!(s.use_count(), 1, "a storage reference leaked");
        assert_eq!(
            tessera::Ref::weak_use_count(s.as_rc()),
            1,
            "a weak reference leaked"
        );
    }
});
