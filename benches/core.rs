//! The Rust-level cost of tessera's core paths and kernels, without the C
//! ABI in between (benches/bench.cpp measures the C API against its
//! anchors). Every case prints the median ns per operation over ROUNDS
//! samples; the cases are interleaved round by round.
//!
//! `cargo bench --bench core [-- FILTER]`

use std::hint::black_box;
use std::time::Instant;
use tessera::iterator::TensorIterator;
use tessera::kernels;
use tessera::{Allocator, DType, Device, Scalar, Storage, Tensor};

const ROUNDS: usize = 9;

struct Case {
    name: String,
    /// Runs the operation n times.
    run: Box<dyn FnMut(u64)>,
    iters: u64,
    samples: Vec<f64>,
}

fn case(name: &str, run: impl FnMut(u64) + 'static) -> Case {
    Case {
        name: name.to_string(),
        run: Box::new(run),
        iters: 1,
        samples: Vec::new(),
    }
}

/// Calibrates each case to about `sample_ms` per sample, then runs the
/// cases round-robin and prints medians.
fn measure(mut cases: Vec<Case>, sample_ms: f64, filter: &Option<String>) {
    cases.retain(|c| filter.as_ref().is_none_or(|f| c.name.contains(f.as_str())));
    for c in cases.iter_mut() {
        (c.run)(1);
        let mut n = 1u64;
        loop {
            let t = Instant::now();
            (c.run)(n);
            let ns = t.elapsed().as_nanos() as f64;
            if ns > sample_ms * 1e6 / 8.0 || n > 1 << 30 {
                c.iters = ((n as f64) * sample_ms * 1e6 / ns.max(1.0)).max(1.0) as u64;
                break;
            }
            n *= 4;
        }
    }
    for _ in 0..ROUNDS {
        for c in cases.iter_mut() {
            let t = Instant::now();
            (c.run)(c.iters);
            c.samples
                .push(t.elapsed().as_nanos() as f64 / c.iters as f64);
        }
    }
    for c in cases.iter_mut() {
        c.samples.sort_by(f64::total_cmp);
        let m = c.samples[c.samples.len() / 2];
        if m >= 1e6 {
            println!("{:<64} {:>10.3} ms", c.name, m / 1e6);
        } else {
            println!("{:<64} {:>10.1} ns", c.name, m);
        }
    }
}

fn floats(sizes: &[i64]) -> Tensor {
    let t = Tensor::empty(sizes, DType::Float, Device::CPU).unwrap();
    kernels::fill_(&t, Scalar::Float(1.5)).unwrap();
    t
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    tessera::parallel::set_num_threads(1);

    let storage = Storage::new(64, Device::CPU, false).unwrap();
    let weak = storage.downgrade();
    let (s1, w1) = (storage.clone(), weak.clone());
    let alloc = Allocator::cpu();
    measure(
        vec![
            case("strong incref+decref (Storage clone + drop)", move |n| {
                for _ in 0..n {
                    drop(black_box(s1.clone()));
                }
            }),
            case("weak lock + release", move |n| {
                for _ in 0..n {
                    drop(black_box(w1.lock()));
                }
            }),
            case("allocate+free 4 KiB (Allocator::allocate)", move |n| {
                for _ in 0..n {
                    drop(black_box(alloc.allocate(black_box(4096)).unwrap()));
                }
            }),
            case("empty tensor [1000] float, create+drop", |n| {
                for _ in 0..n {
                    drop(black_box(
                        Tensor::empty(&[1000], DType::Float, Device::CPU).unwrap(),
                    ));
                }
            }),
        ],
        20.0,
        &filter,
    );

    let (a, b, out) = (floats(&[1000]), floats(&[1000]), floats(&[1000]));
    let (a3, b2) = (floats(&[64, 1, 128]), floats(&[32, 128]));
    let cl = Tensor::empty_strided(
        &[8, 32, 32, 64],
        &[65536, 1, 2048, 32],
        DType::Float,
        Device::CPU,
    )
    .unwrap();
    let (c64, h) = (
        floats(&[64]),
        Tensor::empty(&[1000], DType::Half, Device::CPU).unwrap(),
    );
    let d = Tensor::empty(&[1000], DType::Double, Device::CPU).unwrap();
    let (x1, y1, o1) = (a.clone(), b.clone(), out.clone());
    let (x2, y2) = (a.clone(), b.clone());
    let (x5, y5, o5) = (a.clone(), b.clone(), out.clone());
    let it = TensorIterator::binary_op(Some(&out), &a, &b).unwrap();
    measure(
        vec![
            case(
                "iterator build, binary op, given output, 1000 floats",
                move |n| {
                    for _ in 0..n {
                        drop(black_box(
                            TensorIterator::binary_op(Some(&o1), &x1, &y1).unwrap(),
                        ));
                    }
                },
            ),
            case("iterator build, binary op, allocated output", move |n| {
                for _ in 0..n {
                    drop(black_box(
                        TensorIterator::binary_op(None, &x2, &y2).unwrap(),
                    ));
                }
            }),
            case(
                "iterator build, broadcast [64,1,128] + [32,128]",
                move |n| {
                    for _ in 0..n {
                        drop(black_box(
                            TensorIterator::binary_op(None, &a3, &b2).unwrap(),
                        ));
                    }
                },
            ),
            case(
                "iterator build, channels-last [8,32,32,64] + [64]",
                move |n| {
                    for _ in 0..n {
                        drop(black_box(
                            TensorIterator::binary_op(None, &cl, &c64).unwrap(),
                        ));
                    }
                },
            ),
            case("iterator build, half + double with promotion", move |n| {
                for _ in 0..n {
                    drop(black_box(TensorIterator::binary_op(None, &h, &d).unwrap()));
                }
            }),
            case("for_each over 1000 elements, empty closure", move |n| {
                for _ in 0..n {
                    it.for_each(
                        &|d: &mut [*mut u8], _: &[i64], _: i64, _: i64| {
                            black_box(d);
                        },
                        0,
                    );
                }
            }),
            case("kernels::add into out, 1000 floats (whole op)", move |n| {
                for _ in 0..n {
                    kernels::add(Some(&o5), &x5, &y5, Scalar::Int(1)).unwrap();
                }
            }),
        ],
        20.0,
        &filter,
    );

    let big = 16 << 20;
    let (p, q, r) = (floats(&[big]), floats(&[big]), floats(&[big]));
    let hh = Tensor::empty(&[big], DType::Half, Device::CPU).unwrap();
    let cube = floats(&[256, 256, 256]);
    let perm = cube.permute(&[2, 1, 0]).unwrap();
    let dst = floats(&[256, 256, 256]);
    let (p2, p3, p4, r2) = (p.clone(), p.clone(), p.clone(), r.clone());
    let (cube2, dst2) = (cube.clone(), dst.clone());
    measure(
        vec![
            case("add 16M floats, 1 thread", move |n| {
                for _ in 0..n {
                    kernels::add(Some(&r), &p, &q, Scalar::Int(1)).unwrap();
                }
            }),
            case("copy f32 -> f16, 16M, 1 thread", move |n| {
                for _ in 0..n {
                    kernels::copy_(&hh, &p2).unwrap();
                }
            }),
            case("sum of 16M floats, 1 thread", move |n| {
                for _ in 0..n {
                    black_box(kernels::sum(&p3, &[], false).unwrap());
                }
            }),
            case("copy 16M floats, contiguous, 1 thread", move |n| {
                for _ in 0..n {
                    kernels::copy_(&r2, &p4).unwrap();
                }
            }),
            case(
                "copy permuted 256^3 floats to contiguous, 1 thread",
                move |n| {
                    for _ in 0..n {
                        kernels::copy_(&dst, &perm).unwrap();
                    }
                },
            ),
            case("copy contiguous 256^3 floats, 1 thread", move |n| {
                for _ in 0..n {
                    kernels::copy_(&dst2, &cube2).unwrap();
                }
            }),
        ],
        100.0,
        &filter,
    );
}
