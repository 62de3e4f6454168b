use super::*;
use crate::dtype::{DType, Scalar};
use crate::error::ErrorKind;
use crate::storage::Storage;
use crate::tensor::MemoryFormat;

fn cpu() -> Device {
    Device::CPU
}

fn arange(sizes: &[i64], dtype: DType) -> Tensor {
    let t = Tensor::empty(sizes, dtype, cpu()).unwrap();
    let f = Tensor::empty(sizes, DType::Double, cpu()).unwrap();
    // SAFETY: f is contiguous with numel doubles.
    let s = unsafe { std::slice::from_raw_parts_mut(f.data_ptr() as *mut f64, f.numel() as usize) };
    for (i, v) in s.iter_mut().enumerate() {
        *v = i as f64;
    }
    crate::kernels::copy_(&t, &f).unwrap();
    t
}

fn to_f64(t: &Tensor) -> Vec<f64> {
    let c = Tensor::empty(t.sizes(), DType::Double, cpu()).unwrap();
    crate::kernels::copy_(&c, t).unwrap();
    // SAFETY: c is contiguous with numel doubles.
    unsafe { std::slice::from_raw_parts(c.data_ptr() as *const f64, c.numel() as usize) }.to_vec()
}

/// out = a + b for f64 operands through for_each.
fn add_f64(it: &TensorIterator) {
    it.for_each(
        &|d: &mut [*mut u8], s: &[i64], n0: i64, n1: i64| {
            for j in 0..n1 {
                for i in 0..n0 {
                    // SAFETY: the iterator keeps every offset inside its operands.
                    unsafe {
                        let o = d[0].offset((i * s[0] + j * s[3]) as isize) as *mut f64;
                        let a = d[1].offset((i * s[1] + j * s[4]) as isize) as *const f64;
                        let b = d[2].offset((i * s[2] + j * s[5]) as isize) as *const f64;
                        *o = *a + *b;
                    }
                }
            }
        },
        0,
    );
    it.cast_outputs().unwrap();
}

fn binary(out: Option<Tensor>, a: &Tensor, b: &Tensor) -> IterConfig {
    let mut c = IterConfig::new();
    c.add_output(out)
        .unwrap()
        .add_input(a.clone())
        .unwrap()
        .add_input(b.clone())
        .unwrap();
    c
}

#[test]
fn permuted_input_layout_propagates_to_the_output() {
    let base = Tensor::empty(&[2, 3, 4, 5], DType::Float, cpu()).unwrap();
    let a = base.permute(&[0, 2, 3, 1]).unwrap();
    assert_eq!(a.strides(), &[60, 5, 1, 20]);
    let b = Tensor::empty(&[2, 4, 5, 3], DType::Float, cpu()).unwrap();
    let it = binary(None, &a, &b).build().unwrap();
    assert_eq!(it.output(0).strides(), &[60, 5, 1, 20]);
}

#[test]
fn outputs_too_large_to_allocate_are_errors() {
    let one = Tensor::empty(&[1, 1], DType::Float, cpu()).unwrap();
    // 2^61 floats: the element count fits in int64, the bytes do not fit
    // in the address space.
    let wide = one.expand(&[1 << 31, 1]).unwrap();
    let tall = one.expand(&[1, 1 << 30]).unwrap();
    let e = binary(None, &wide, &tall).build().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    assert!(e.message().contains("[2147483648, 1073741824]"), "{e}");
    // 2^64 elements: the count itself overflows.
    let wide = one.expand(&[1 << 32, 1]).unwrap();
    let tall = one.expand(&[1, 1 << 32]).unwrap();
    let e = binary(None, &wide, &tall).build().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    assert!(e.message().contains("overflows"), "{e}");
}

#[test]
fn channels_last_stays_channels_last() {
    let a = Tensor::empty_with_format(
        &[8, 32, 32, 64],
        DType::Float,
        cpu(),
        MemoryFormat::ChannelsLast,
    )
    .unwrap();
    let b = Tensor::empty(&[64], DType::Float, cpu()).unwrap();
    let it = binary(None, &a, &b).build().unwrap();
    assert!(it.output(0).is_contiguous(MemoryFormat::ChannelsLast));
    let a2 = Tensor::empty_with_format(
        &[2, 3, 4, 5],
        DType::Float,
        cpu(),
        MemoryFormat::ChannelsLast,
    )
    .unwrap();
    let it = binary(None, &a2, &a2).build().unwrap();
    assert_eq!(it.ndim(), 1, "fast set-up for channels-last operands");
    assert!(it.output(0).is_contiguous(MemoryFormat::ChannelsLast));
}

#[test]
fn broadcast_values_and_shapes() {
    let a = arange(&[2, 1, 3], DType::Double);
    let b = arange(&[4, 1], DType::Double);
    let it = binary(None, &a, &b).build().unwrap();
    assert_eq!(it.output(0).sizes(), &[2, 4, 3]);
    add_f64(&it);
    let v = to_f64(&it.output(0));
    for i in 0..2 {
        for j in 0..4 {
            for k in 0..3 {
                assert_eq!(v[i * 12 + j * 3 + k], (i * 3 + k) as f64 + j as f64);
            }
        }
    }
    let bad = arange(&[3, 2], DType::Double);
    let e = binary(None, &a, &bad).build().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Shape);
    assert!(
        e.message().contains("(3)")
            && e.message().contains("(2)")
            && e.message().contains("dimension"),
        "{e}"
    );
}

/// Loops of more dims than `LoopDims` keeps inline (8): operands that
/// run opposite ways keep all 10 dims apart, and a 1-dim input broadcast
/// to 11 dims grows the shape past the inline values.
#[test]
fn more_dims_than_kept_inline() {
    let two = [2i64; 10];
    let a = arange(&two, DType::Double);
    let reversed: Vec<i64> = (0..10).rev().collect();
    let b = arange(&two, DType::Double).permute(&reversed).unwrap();
    let it = binary(None, &a, &b).build().unwrap();
    assert_eq!(it.ndim(), 10, "opposite strides leave no dims to coalesce");
    add_f64(&it);
    let v = to_f64(&it.output(0));
    for (i, &got) in v.iter().enumerate() {
        // b's element at index i is arange's element at the reversed index.
        let flipped = (0..10).fold(0, |acc, d| acc | ((i >> d) & 1) << (9 - d));
        assert_eq!(got, (i + flipped) as f64, "element {i}");
    }

    let small = arange(&[2], DType::Double);
    let big = arange(&[2i64; 11], DType::Double);
    let it = binary(None, &small, &big).build().unwrap();
    assert_eq!(it.output(0).sizes(), &[2i64; 11]);
    add_f64(&it);
    let v = to_f64(&it.output(0));
    for (i, &got) in v.iter().enumerate() {
        assert_eq!(got, (i + (i & 1)) as f64, "element {i}");
    }
}

#[test]
fn dtype_rules() {
    let f = arange(&[3], DType::Float);
    let l = arange(&[3], DType::Long);
    let e = binary(None, &f, &l).build().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DType);
    assert!(
        e.message().contains("Float") && e.message().contains("Long"),
        "{e}"
    );
    // promotion computes in the common dtype and allocates it
    let mut c = binary(None, &f, &l);
    c.promote_inputs_to_common_dtype(true);
    let it = c.build().unwrap();
    assert_eq!(
        (it.dtype(0), it.dtype(1), it.dtype(2)),
        (DType::Float, DType::Float, DType::Float)
    );
    // integers promoted to float
    let mut c = binary(None, &l, &l);
    c.promote_inputs_to_common_dtype(true)
        .promote_integer_inputs_to_float(true);
    assert_eq!(c.build().unwrap().common_dtype(), Some(DType::Float));
    // safe casting refuses float -> int outputs
    let out = Tensor::empty(&[3], DType::Long, cpu()).unwrap();
    let e = IterConfig::binary_op(Some(&out), &f, &l)
        .unwrap()
        .build()
        .unwrap_err();
    assert!(e.message().contains("can't be cast"), "{e}");
    // a wrapped scalar does not widen within a category
    let i = arange(&[3], DType::Int);
    let mut c = IterConfig::new();
    c.add_output(None)
        .unwrap()
        .add_input(i.clone())
        .unwrap()
        .add_input_scalar(Scalar::Float(2.5))
        .unwrap();
    c.promote_inputs_to_common_dtype(true)
        .cast_common_dtype_to_outputs(true);
    assert_eq!(c.build().unwrap().output(0).dtype(), DType::Float);
    let mut c = IterConfig::new();
    c.add_output(None)
        .unwrap()
        .add_input(i)
        .unwrap()
        .add_input_scalar(Scalar::Int(1000))
        .unwrap();
    c.promote_inputs_to_common_dtype(true);
    assert_eq!(c.build().unwrap().output(0).dtype(), DType::Int);
}

#[test]
fn cast_temporaries_are_written_back() {
    let a = arange(&[5], DType::Float);
    let b = arange(&[5], DType::Float);
    let out = Tensor::empty(&[5], DType::Double, cpu()).unwrap();
    let mut c = binary(Some(out.clone()), &a, &b);
    c.promote_inputs_to_common_dtype(true)
        .cast_common_dtype_to_outputs(true);
    let it = c.build().unwrap();
    assert_eq!(it.dtype(0), DType::Float, "computed in Float");
    assert!(Tensor::ptr_eq(&it.output(0), &out));
    it.for_each(
        &|d: &mut [*mut u8], s: &[i64], n0: i64, _n1: i64| {
            for i in 0..n0 {
                // SAFETY: in bounds per the iterator.
                unsafe {
                    let o = d[0].offset((i * s[0]) as isize) as *mut f32;
                    *o = *(d[1].offset((i * s[1]) as isize) as *const f32) * 2.0;
                }
            }
        },
        0,
    );
    it.cast_outputs().unwrap();
    assert_eq!(to_f64(&out), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
}

#[test]
fn overlap_rules() {
    let s = Storage::new(40, cpu(), false).unwrap();
    let view = |off: i64, n: i64, st: i64| {
        Tensor::from_storage(&s, off, &[n], Some(&[st]), DType::Float).unwrap()
    };
    let e = binary(Some(view(0, 5, 0)), &view(5, 5, 1), &view(5, 5, 1))
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Overlap);
    let e = binary(Some(view(1, 5, 1)), &view(0, 5, 1), &view(5, 5, 1))
        .build()
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Overlap);
    assert!(
        e.message().contains("input 0") && e.message().contains("output 0"),
        "{e}"
    );
    let same = view(0, 5, 1);
    let it = binary(Some(same.clone()), &same, &view(5, 5, 1))
        .build()
        .unwrap();
    assert!(it.is_read_write(0));
    let mut c = binary(Some(view(1, 5, 1)), &view(0, 5, 1), &view(5, 5, 1));
    c.check_mem_overlap(false);
    assert!(
        c.build().is_ok(),
        "check_mem_overlap(false) accepts partial overlap"
    );
}

#[test]
fn resolve_overlap_by_copy_gives_the_right_values() {
    // out[i] = x[i-1] + 0 where out and x overlap shifted by one element.
    let data = arange(&[6], DType::Double);
    let out = data.narrow(0, 1, 5).unwrap();
    let x = data.narrow(0, 0, 5).unwrap();
    let zero = Tensor::empty(&[5], DType::Double, cpu()).unwrap();
    zero.fill_(Scalar::Float(0.0)).unwrap();
    let mut c = binary(Some(out.clone()), &x, &zero);
    c.resolve_overlap_by_copy(true);
    let it = c.build().unwrap();
    add_f64(&it);
    assert_eq!(to_f64(&data), vec![0.0, 0.0, 1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn config_errors() {
    let a = arange(&[3], DType::Float);
    let mut c = IterConfig::new();
    c.add_input(a.clone()).unwrap();
    let e = c.add_output(None).unwrap_err();
    assert!(e.message().contains("before the inputs"), "{e}");
    let mut c = binary(None, &a, &a);
    c.promote_integer_inputs_to_float(true);
    assert!(c
        .build()
        .unwrap_err()
        .message()
        .contains("promote_inputs_to_common_dtype"));
    let mut c = binary(None, &a, &a);
    c.declare_static_dtype(DType::Bool);
    assert!(c
        .build()
        .unwrap_err()
        .message()
        .contains("check_all_same_dtype"));
    let mut c = binary(None, &a, &a);
    c.declare_static_shape(&[3]);
    assert!(c.build().unwrap_err().message().contains("resize_outputs"));
    let mut c = IterConfig::new();
    for _ in 0..MAX_OPERANDS {
        c.add_input(a.clone()).unwrap();
    }
    assert!(c.add_input(a.clone()).is_err());
    assert!(IterConfig::new().build().is_err());
    let many = vec![1i64; 65];
    let mut c = IterConfig::new();
    c.add_output(None).unwrap();
    c.check_all_same_dtype(false)
        .declare_static_dtype(DType::Float)
        .resize_outputs(false)
        .declare_static_shape(&many);
    assert_eq!(c.build().unwrap_err().kind(), ErrorKind::Shape);
}

#[test]
fn static_shape_must_fit_every_operand() {
    // A static shape is not broadcast: a loop over it must not leave any
    // operand's elements (a larger shape would read past the storage).
    let a = arange(&[2, 3], DType::Float);
    for bad in [&[2, 4][..], &[3, 3], &[2], &[2, 3, 1], &[]] {
        let mut c = IterConfig::new();
        c.add_input(a.clone()).unwrap();
        c.resize_outputs(false).declare_static_shape(bad);
        let e = c.build().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Shape, "{bad:?}");
        assert!(
            e.message().contains("input 0 (sizes [2, 3])"),
            "{}",
            e.message()
        );
    }
    let mut c = IterConfig::new();
    c.add_input(a.clone()).unwrap();
    c.resize_outputs(false).declare_static_shape(&[2, 1]);
    assert_eq!(c.build().unwrap().numel(), 2);
}

#[test]
fn empty_iteration_is_one_32bit_piece_whatever_its_strides() {
    // An empty tensor may have any strides; 2^40 * i64::MAX used to
    // overflow (a panic in debug builds, 2^40 empty pieces in release).
    let s = Storage::new(16, cpu(), false).unwrap();
    let big = i64::MAX;
    let t = Tensor::from_storage(&s, 0, &[1 << 40, 0, 0], Some(&[big, big, 1]), DType::Byte);
    let mut c = IterConfig::new();
    c.add_input(t.unwrap()).unwrap();
    c.add_input_scalar(crate::dtype::Scalar::Int(1)).unwrap();
    c.check_all_same_dtype(false);
    let it = c.build().unwrap();
    assert_eq!((it.numel(), it.ndim()), (0, 3));
    assert!(it.can_use_32bit_indexing());
    let mut pieces = 0;
    it.for_each_32bit_piece(&mut |_| pieces += 1);
    assert_eq!(pieces, 1);
}

#[test]
fn outputs_are_resized_or_refused() {
    let a = arange(&[2, 3], DType::Float);
    let out = Tensor::empty(&[5], DType::Float, cpu()).unwrap();
    let it = binary(Some(out.clone()), &a, &a).build().unwrap();
    assert_eq!(out.sizes(), &[2, 3], "resizable output resized in place");
    assert!(Tensor::ptr_eq(&it.output(0), &out));
    let s = Storage::new(8, cpu(), false).unwrap();
    let fixed = Tensor::from_storage(&s, 0, &[2], None, DType::Float).unwrap();
    let e = binary(Some(fixed), &a, &a).build().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotResizable);
    let small = Tensor::empty(&[3], DType::Float, cpu()).unwrap();
    let mut c = binary(Some(small), &a, &a);
    c.resize_outputs(false);
    let e = c.build().unwrap_err();
    assert!(
        e.message().contains("doesn't match the broadcast shape"),
        "{e}"
    );
}

#[test]
fn empty_and_zero_dim() {
    let a = Tensor::empty(&[0, 3], DType::Float, cpu()).unwrap();
    let it = binary(None, &a, &a).build().unwrap();
    assert_eq!(it.numel(), 0);
    it.for_each(
        &|_: &mut [*mut u8], _: &[i64], _: i64, _: i64| panic!("no element to visit"),
        0,
    );
    let z = arange(&[], DType::Double);
    let it = binary(None, &z, &z).build().unwrap();
    assert_eq!((it.ndim(), it.numel()), (0, 1));
    add_f64(&it);
    assert_eq!(it.output(0).ndim(), 0);
    let m = arange(&[3], DType::Double);
    let it = binary(None, &z, &m).build().unwrap();
    assert_eq!(it.output(0).sizes(), &[3]);
}

#[test]
fn linear_iteration_keeps_tensor_order() {
    let base = Tensor::empty(&[3, 4], DType::Float, cpu()).unwrap();
    let t = base.transpose(0, 1).unwrap();
    let mut c = binary(None, &t, &t);
    c.enforce_linear_iteration(true);
    let it = c.build().unwrap();
    assert_eq!(it.shape(), &[3, 4], "innermost = last tensor dim");
    assert_eq!(it.output(0).strides(), &[3, 1]);
}

#[test]
fn reductions() {
    let a = arange(&[4, 5, 6], DType::Double);
    let out = Tensor::empty(&[4, 1, 6], DType::Double, cpu()).unwrap();
    out.fill_(Scalar::Float(0.0)).unwrap();
    let it = TensorIterator::reduce_op(&out, &a).unwrap();
    assert_eq!(it.num_output_elements(), 24);
    assert_eq!(it.num_reduce_dims(), 1);
    assert_eq!(it.shape()[0], 5, "the reduced dim comes first");
    it.foreach_reduced_elt(
        &|sub: &TensorIterator| {
            sub.serial_for_each(
                &|d: &mut [*mut u8], s: &[i64], n0: i64, n1: i64| {
                    for j in 0..n1 {
                        for i in 0..n0 {
                            // SAFETY: in bounds per the iterator.
                            unsafe {
                                let o = d[0].offset((i * s[0] + j * s[2]) as isize) as *mut f64;
                                *o += *(d[1].offset((i * s[1] + j * s[3]) as isize) as *const f64);
                            }
                        }
                    }
                },
                0,
                sub.numel(),
            )
        },
        true,
    );
    let v = to_f64(&out);
    for i in 0..4 {
        for k in 0..6 {
            let want: f64 = (0..5).map(|j| (i * 30 + j * 6 + k) as f64).sum();
            assert_eq!(v[i * 6 + k], want);
        }
    }
    // a full reduction with per-chunk accumulators
    let big = arange(&[100_000], DType::Double);
    let total = Tensor::empty(&[1], DType::Double, cpu()).unwrap();
    let it = TensorIterator::reduce_op(&total, &big).unwrap();
    let sum = it.parallel_reduce(
        1000,
        || 0.0f64,
        |acc: &mut f64, d: &mut [*mut u8], s: &[i64], n0: i64, n1: i64| {
            for j in 0..n1 {
                for i in 0..n0 {
                    // SAFETY: in bounds per the iterator.
                    *acc += unsafe { *(d[1].offset((i * s[1] + j * s[3]) as isize) as *const f64) };
                }
            }
        },
        |a, b| a + b,
    );
    assert_eq!(sum, (0..100_000).map(|x| x as f64).sum::<f64>());
}

#[test]
fn splits_into_32bit_pieces() {
    let meta = Device::new(crate::device::DeviceType::Meta, -1).unwrap();
    let a = Tensor::empty(&[1 << 16, 1 << 15], DType::Float, meta).unwrap();
    let it = binary(None, &a, &a).build().unwrap();
    assert!(!it.can_use_32bit_indexing());
    let mut pieces = 0;
    let mut elements = 0i64;
    it.for_each_32bit_piece(&mut |p: &TensorIterator| {
        assert!(p.can_use_32bit_indexing());
        pieces += 1;
        elements += p.numel();
    });
    assert_eq!(elements, it.numel());
    // 2^31 floats span 2^33 bytes: four pieces of 2^29 floats each fit.
    assert_eq!(pieces, 4);
    let small = binary(
        None,
        &arange(&[4], DType::Float),
        &arange(&[4], DType::Float),
    )
    .build()
    .unwrap();
    assert!(small.can_use_32bit_indexing());
}

#[test]
fn presets() {
    let i = arange(&[4], DType::Int);
    let it = TensorIterator::binary_float_op(None, &i, &i).unwrap();
    assert_eq!(it.output(0).dtype(), DType::Float);
    let it = TensorIterator::comparison_op(None, &i, &arange(&[4], DType::Double)).unwrap();
    assert_eq!(
        (it.output(0).dtype(), it.common_dtype()),
        (DType::Bool, Some(DType::Double))
    );
    let it = TensorIterator::unary_float_op(None, &i).unwrap();
    assert_eq!(it.output(0).dtype(), DType::Float);
    let e = TensorIterator::unary_op(Some(&arange(&[4], DType::Float)), &i).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::DType);
    let o = arange(&[2, 2], DType::Float);
    let it = TensorIterator::nullary_op(&o).unwrap();
    assert_eq!(it.numel(), 4);
}

#[test]
fn parallel_for_each_visits_every_element_once() {
    crate::parallel::set_num_threads(2);
    let a = arange(&[300, 301], DType::Double).transpose(0, 1).unwrap();
    let b = arange(&[301, 1], DType::Double);
    let it = binary(None, &a, &b).build().unwrap();
    add_f64(&it);
    let v = to_f64(&it.output(0));
    for i in 0..301 {
        for j in 0..300 {
            assert_eq!(v[i * 300 + j], (j * 301 + i) as f64 + i as f64);
        }
    }
}

#[test]
fn shortcut_equals_the_general_pipeline() {
    let check = |c: &IterConfig| {
        let fast = c.build().unwrap();
        let general = c.build_general().unwrap();
        assert_eq!(fast.shape(), general.shape());
        assert_eq!(fast.ntensors(), general.ntensors());
        assert_eq!(fast.common_dtype(), general.common_dtype());
        for arg in 0..fast.ntensors() {
            assert_eq!(fast.strides(arg), general.strides(arg), "operand {arg}");
            assert_eq!(fast.dtype(arg), general.dtype(arg));
            assert_eq!(fast.is_read_write(arg), general.is_read_write(arg));
        }
        for i in 0..fast.noutputs() {
            assert_eq!(fast.output(i).sizes(), general.output(i).sizes());
            assert_eq!(fast.output(i).strides(), general.output(i).strides());
        }
    };
    for sizes in [&[][..], &[0][..], &[7][..], &[3, 4][..], &[2, 3, 4, 5][..]] {
        for dtype in [DType::Float, DType::Long, DType::Bool, DType::Half] {
            let a = Tensor::empty(sizes, dtype, cpu()).unwrap();
            let b = Tensor::empty(sizes, dtype, cpu()).unwrap();
            check(&binary(None, &a, &b));
            check(&binary(Some(a.clone()), &a, &b));
            let mut c = binary(None, &a, &b);
            c.promote_inputs_to_common_dtype(true)
                .cast_common_dtype_to_outputs(true);
            check(&c);
            let mut c = binary(None, &a, &b);
            c.promote_inputs_to_common_dtype(true)
                .promote_integer_inputs_to_float(true);
            check(&c);
            let out = Tensor::empty(sizes, dtype, cpu()).unwrap();
            let mut c = IterConfig::new();
            c.add_output(Some(out))
                .unwrap()
                .add_output(None)
                .unwrap()
                .add_input(a.clone())
                .unwrap();
            check(&c);
        }
    }
}

#[test]
fn boxed_builds_on_a_recycled_iterator_equal_fresh_builds() {
    let a = arange(&[4, 1, 3], DType::Float);
    let b = arange(&[2, 3], DType::Float);
    let l = arange(&[4, 2, 3], DType::Long);
    let out = Tensor::empty(&[4, 2, 3], DType::Float, cpu()).unwrap();
    let cl = Tensor::empty_with_format(
        &[2, 3, 4, 5],
        DType::Float,
        cpu(),
        MemoryFormat::ChannelsLast,
    )
    .unwrap();
    // A fresh config each time: builds resize the outputs they are given.
    let make = |kind: usize| -> IterConfig {
        let empty = |sizes: &[i64], dtype| Tensor::empty(sizes, dtype, cpu()).unwrap();
        match kind {
            0 => binary(None, &a, &b),
            1 => binary(Some(out.clone()), &out, &a),
            2 => IterConfig::binary_op(Some(&empty(&[0], DType::Double)), &a, &l).unwrap(),
            3 => IterConfig::unary_op(None, &cl).unwrap(),
            4 => IterConfig::reduce_op(&empty(&[4, 1, 1], DType::Float), &a).unwrap(),
            5 => {
                let mut c = IterConfig::new();
                c.add_output(None).unwrap().add_output(None).unwrap();
                c.add_input(a.clone())
                    .unwrap()
                    .add_input(b.clone())
                    .unwrap();
                c
            }
            _ => {
                let mut c = IterConfig::new();
                c.add_output(Some(empty(&[4, 2, 3], DType::Float)))
                    .unwrap()
                    .add_input(l.clone())
                    .unwrap();
                c.resize_outputs(false)
                    .check_all_same_dtype(false)
                    .declare_static_shape(&[4, 1, 3]);
                c
            }
        }
    };
    // Both orders of operand counts: each build reuses the slots the
    // previous one left.
    for kind in (0..7).chain((0..7).rev()) {
        let fresh = make(kind).build_general().unwrap();
        let boxed = make(kind).build_boxed().unwrap();
        assert_eq!(boxed.shape(), fresh.shape(), "config {kind}");
        assert_eq!(boxed.ntensors(), fresh.ntensors());
        assert_eq!(boxed.noutputs(), fresh.noutputs());
        assert_eq!(boxed.common_dtype(), fresh.common_dtype());
        assert_eq!(boxed.is_reduction, fresh.is_reduction);
        assert_eq!(boxed.shape_is_static, fresh.shape_is_static);
        assert_eq!(boxed.perm(), fresh.perm());
        for arg in 0..fresh.ntensors() {
            let (x, y) = (&boxed.operands[arg], &fresh.operands[arg]);
            assert_eq!(
                x.stride_bytes, y.stride_bytes,
                "config {kind} operand {arg}"
            );
            assert_eq!(x.is_output, y.is_output);
            assert_eq!(x.is_read_write, y.is_read_write);
            assert_eq!(x.will_resize, y.will_resize);
            assert_eq!(x.original.is_some(), y.original.is_some());
            assert_eq!(x.current_dtype, y.current_dtype);
            assert_eq!(x.target_dtype, y.target_dtype);
            assert_eq!(x.tensor.is_some(), y.tensor.is_some());
        }
        for i in 0..fresh.noutputs() {
            assert_eq!(boxed.output(i).sizes(), fresh.output(i).sizes());
            assert_eq!(boxed.output(i).strides(), fresh.output(i).strides());
        }
        recycle(boxed);
    }
    // A recycled iterator holds no tensor.
    let before = a.use_count();
    recycle(binary(None, &a, &b).build_boxed().unwrap());
    assert_eq!(a.use_count(), before);
}

/// A backend that never allocates: only its device type matters.
struct NeverAllocates;

impl crate::allocator::RawAllocator for NeverAllocates {
    fn allocate(&self, nbytes: usize, _device: Device) -> crate::Result<crate::DataPtr> {
        crate::bail!(OutOfMemory, "never allocates ({nbytes} bytes)")
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[test]
fn output_allocator_of_another_device_type_is_refused() {
    let cuda = Device::new(crate::device::DeviceType::Cuda, 0).unwrap();
    let alloc = crate::Allocator::new("elsewhere", cuda, Box::new(NeverAllocates));
    let a = arange(&[3], DType::Float);
    let mut c = IterConfig::new();
    c.add_output(None).unwrap().add_input(a).unwrap();
    c.output_allocator(Some(alloc));
    let Err(e) = c.build() else {
        panic!("a CUDA allocator for a CPU output must be refused")
    };
    assert_eq!(e.kind(), ErrorKind::Device);
    assert!(
        e.message().contains("'elsewhere'") && e.message().contains("output 0"),
        "{e}"
    );
    // None goes back to the registry
    c.output_allocator(None);
    assert_eq!(c.build().unwrap().output(0).numel(), 3);
}

#[test]
fn boxed_builds_from_a_config_leave_it_as_it_was() {
    let a = arange(&[1000], DType::Float);
    let b = arange(&[1000], DType::Float);
    let out = Tensor::empty(&[1000], DType::Float, cpu()).unwrap();
    let c3 = arange(&[4, 1, 3], DType::Float);
    let c2 = arange(&[2, 3], DType::Float);
    // The shortcut (same-shape contiguous), the general pipeline
    // (broadcast, allocated output) and an error.
    let configs = [
        binary(Some(out.clone()), &a, &b),
        binary(None, &c3, &c2),
        binary(None, &a, &c2),
    ];
    for (kind, mut c) in configs.into_iter().enumerate() {
        let counts = (a.use_count(), c3.use_count(), out.use_count());
        let (nout, nin) = (c.noutputs(), c.ninputs());
        for _ in 0..2 {
            match (kind, c.build_boxed_from()) {
                (2, Err(e)) => assert_eq!(e.kind(), ErrorKind::Shape),
                (_, Ok(it)) => {
                    let fresh = c.build_general().unwrap();
                    assert_eq!(it.shape(), fresh.shape(), "config {kind}");
                    assert_eq!(it.ntensors(), fresh.ntensors());
                    for arg in 0..fresh.ntensors() {
                        assert_eq!(
                            it.operands[arg].stride_bytes,
                            fresh.operands[arg].stride_bytes
                        );
                    }
                    recycle(it);
                }
                (_, r) => panic!("config {kind}: {:?}", r.err()),
            }
            assert_eq!((c.noutputs(), c.ninputs()), (nout, nin), "config {kind}");
            assert!(c.outputs.iter().all(|o| o.is_none() || kind == 0));
            assert_eq!(c.inputs.len(), 2);
        }
        assert_eq!(
            (a.use_count(), c3.use_count(), out.use_count()),
            counts,
            "config {kind}"
        );
    }
}

#[test]
fn recycled_configs_come_back_empty_with_the_defaults() {
    let a = arange(&[3], DType::Float);
    let before = a.use_count();
    let mut c = IterConfig::new_boxed();
    c.add_output(None).unwrap().add_input(a.clone()).unwrap();
    c.check_mem_overlap(false)
        .is_reduction(true)
        .declare_static_shape(&[3]);
    let addr = &*c as *const IterConfig;
    IterConfig::recycle(c);
    assert_eq!(a.use_count(), before, "recycling drops the operands");
    let c = IterConfig::new_boxed();
    assert_eq!(
        &*c as *const IterConfig, addr,
        "the spare allocation is reused"
    );
    assert_eq!((c.noutputs(), c.ninputs()), (0, 0));
    let d = IterConfig::new();
    assert_eq!(format!("{:?}", c.flags), format!("{:?}", d.flags));
    assert!(c.static_shape.is_none() && c.output_allocator.is_none());
}
