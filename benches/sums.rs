//! Sums, amax, amin, prod, mean, the 2-norm (all dims, dim 0, dim 1) and
//! max with indices (dim 0, dim 1) of 64 MiB matrices (f32, f16,
//! bfloat16, f64; 1 and 2 threads) against a plain read of the same
//! bytes (benches/bench.cpp's four-stream read loop) and, for the 16-bit
//! dtypes, a plain loop that widens and adds the same values (the
//! decided anchor of 16-bit rows, docs/PERFORMANCE.md), in the same
//! process: cases interleaved round by round, each sample four calls;
//! prints medians, quartiles and the ratio to the read loop of the same
//! thread count, and for 16-bit rows to the widening loop (the C bench
//! adds libtorch; this one runs without it).
//!
//! `cargo bench --bench sums [-- FILTER[|FILTER...]]` (ROUNDS=n, 31)

use std::hint::black_box;
use std::time::Instant;
use tessera::{kernels, DType, Device, Scalar, Tensor};

/// The read loop: `n` floats as four streams (the four quarters at once,
/// 128 bytes of each per step into sixteen integer accumulators).
///
/// # Safety
/// The CPU must have AVX2; `n` readable floats at `p`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn read_floats(p: *const f32, n: usize) -> i32 {
    use std::arch::x86_64::*;
    // SAFETY: AVX2 and every read below n (the caller's).
    unsafe {
        let q = n / 4 / 32 * 32;
        let mut acc = [_mm256_setzero_si256(); 16];
        let mut k = 0;
        while k < q {
            for j in 0..4 {
                for u in 0..4 {
                    acc[4 * j + u] = _mm256_add_epi32(
                        acc[4 * j + u],
                        _mm256_loadu_si256(p.add(j * q + k + 8 * u) as *const __m256i),
                    );
                }
            }
            k += 32;
        }
        let mut t = acc[0];
        for a in &acc[1..] {
            t = _mm256_add_epi32(t, *a);
        }
        let mut s = _mm256_extract_epi32(t, 0);
        for k in 4 * q..n {
            s = s.wrapping_add(*p.add(k) as i32);
        }
        s
    }
}

/// The widening loop: `n` half (or, with `bf`, bfloat16) values as four
/// streams, widened to float (F16C's vcvtph2ps; a bfloat16 shifted into
/// the top half of a float) and added into sixteen float accumulators.
///
/// # Safety
/// The CPU must have AVX2 and F16C; `n` readable 16-bit values at `p`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn widen_halves(p: *const u16, n: usize, bf: bool) -> f32 {
    use std::arch::x86_64::*;
    // SAFETY: AVX2, F16C and every read below n (the caller's).
    unsafe {
        let q = n / 4 / 32 * 32;
        let mut acc = [_mm256_setzero_ps(); 16];
        let mut k = 0;
        while k < q {
            for j in 0..4 {
                for u in 0..4 {
                    let h = _mm_loadu_si128(p.add(j * q + k + 8 * u) as *const __m128i);
                    let v = if bf {
                        _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(h)))
                    } else {
                        _mm256_cvtph_ps(h)
                    };
                    acc[4 * j + u] = _mm256_add_ps(acc[4 * j + u], v);
                }
            }
            k += 32;
        }
        let mut t = acc[0];
        for a in &acc[1..] {
            t = _mm256_add_ps(t, *a);
        }
        let mut s = _mm256_cvtss_f32(t);
        for k in 4 * q..n {
            s += *p.add(k) as f32;
        }
        s
    }
}

/// Runs `f(lo, hi)` on `threads` parts of 0..n (cut at multiples of 32),
/// one per thread.
fn split(threads: usize, n: i64, f: impl Fn(usize, usize) + Sync) {
    tessera::parallel::set_num_threads(threads);
    tessera::parallel::parallel_for(0, threads as i64, 1, |b, e| {
        for part in b..e {
            let parts = threads as i64;
            let lo = n * part / parts / 32 * 32;
            let hi = if part + 1 == parts {
                n
            } else {
                n * (part + 1) / parts / 32 * 32
            };
            f(lo as usize, hi as usize);
        }
    });
}

struct Case {
    name: String,
    run: Box<dyn FnMut()>,
    samples: Vec<f64>,
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    eprintln!("sums: the read loop is x86-64 AVX2 only");
}

#[cfg(target_arch = "x86_64")]
fn main() {
    assert!(
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c"),
        "sums: the read loops need AVX2 and F16C"
    );
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(31);
    let bytes: i64 = 64 << 20;
    let mut cases: Vec<Case> = Vec::new();
    for threads in [1usize, 2] {
        for (dt, name) in [
            (DType::Float, "f32"),
            (DType::Half, "f16"),
            (DType::BFloat16, "bf16"),
            (DType::Double, "f64"),
        ] {
            // The f32 matrix is the read loop's too.
            if dt != DType::Float && filter.as_ref().is_some_and(|f| !f.contains(name)) {
                continue;
            }
            let item = dt.itemsize() as i64;
            let cols = bytes / item / 4096;
            let t = Tensor::empty(&[4096, cols], dt, Device::CPU).unwrap();
            kernels::fill_(&t, Scalar::Float(1.5)).unwrap();
            type Op = fn(&Tensor, &[i64], bool) -> tessera::Result<Tensor>;
            let ops: [(&str, Op); 7] = [
                ("sum", kernels::sum),
                ("amax", kernels::amax),
                ("amin", kernels::amin),
                ("prod", kernels::prod),
                ("mean", kernels::mean),
                ("norm2", |t, d, k| kernels::vector_norm(t, 2.0, d, k)),
                ("max", |t, d, k| kernels::max_dim(t, d[0], k).map(|r| r.0)),
            ];
            for (op, f) in ops {
                for (what, dims) in [("all", vec![]), ("dim0", vec![0i64]), ("dim1", vec![1])] {
                    if op == "max" && dims.is_empty() {
                        continue; // max with indices takes one dim
                    }
                    let t = t.clone();
                    // Sums keep their old names: "f32 [4096,4096] all 1t".
                    let op = if op == "sum" {
                        String::new()
                    } else {
                        format!("{op} ")
                    };
                    cases.push(Case {
                        name: format!("{name} [4096,{cols}] {op}{what} {threads}t"),
                        run: Box::new(move || {
                            tessera::parallel::set_num_threads(threads);
                            black_box(f(&t, &dims, false).unwrap());
                        }),
                        samples: vec![],
                    });
                }
            }
            let p = t.data_ptr() as usize;
            let keep = t.clone();
            if dt == DType::Float {
                let n = bytes / 4;
                cases.push(Case {
                    name: format!("read loop 64 MiB {threads}t"),
                    run: Box::new(move || {
                        black_box(&keep);
                        split(threads, n, |lo, hi| {
                            // SAFETY: lo..hi lies inside the f32 matrix (kept
                            // alive by `keep`); main asserted AVX2.
                            black_box(unsafe { read_floats((p as *const f32).add(lo), hi - lo) });
                        });
                    }),
                    samples: vec![],
                });
            } else if item == 2 {
                let (n, bf) = (bytes / 2, dt == DType::BFloat16);
                cases.push(Case {
                    name: format!("widen loop {name} 64 MiB {threads}t"),
                    run: Box::new(move || {
                        black_box(&keep);
                        split(threads, n, |lo, hi| {
                            // SAFETY: lo..hi lies inside the 16-bit matrix
                            // (kept alive by `keep`); main asserted AVX2, F16C.
                            black_box(unsafe {
                                widen_halves((p as *const u16).add(lo), hi - lo, bf)
                            });
                        });
                    }),
                    samples: vec![],
                });
            }
        }
    }
    cases.retain(|c| {
        c.name.contains(" loop ")
            || filter
                .as_ref()
                .is_none_or(|f| f.split('|').any(|f| c.name.contains(f)))
    });
    for c in cases.iter_mut() {
        (c.run)();
    }
    for _ in 0..rounds {
        for c in cases.iter_mut() {
            let t = Instant::now();
            for _ in 0..4 {
                (c.run)();
            }
            c.samples.push(t.elapsed().as_nanos() as f64 / 4e6);
        }
    }
    let med = |c: &Case| {
        let mut s = c.samples.clone();
        s.sort_by(f64::total_cmp);
        (s[s.len() / 2], s[s.len() / 4], s[3 * s.len() / 4])
    };
    let anchor = |name: &str| {
        cases
            .iter()
            .find(|c| c.name == name)
            .map(|c| med(c).0)
            .unwrap_or(f64::NAN)
    };
    for c in &cases {
        let (m, lo, hi) = med(c);
        let t = if c.name.ends_with("2t") { 2 } else { 1 };
        let mut line = format!(
            "{:<34} {:>7.3} ms [{:.3}-{:.3}]  {:.2}x read",
            c.name,
            m,
            lo,
            hi,
            m / anchor(&format!("read loop 64 MiB {t}t"))
        );
        for half in ["f16", "bf16"] {
            if c.name.starts_with(&format!("{half} ")) {
                let w = anchor(&format!("widen loop {half} 64 MiB {t}t"));
                line += &format!("  {:.2}x widen", m / w);
            }
        }
        println!("{line}");
    }
}
