//! The AVX2 products of f32, f16, bfloat16 and f64 (one run, four runs in
//! one pass, four or eight rows multiplied into a row) have the bits of
//! the portable lanes: the same lanes, tails and tree as the sums
//! (src/kernels/reduce/avx2_sum.rs), multiplied. Values near 1 with many
//! fraction bits, so that any other order rounds differently while the
//! products of 280 000 of them stay normal numbers.

use half::{bf16, f16};
use tessera::kernels::elem::Elem;
use tessera::kernels::{self, simd};
use tessera::Tensor;

#[path = "common/kernel_values.rs"]
mod kernel_values;
use kernel_values::*;

fn check_prod_bits_with_and_without_avx2<T: Elem + std::fmt::Debug>() {
    let bits = random_bits(4 * 70_001 + 1);
    // 1 + k / 2^18 for |k| <= 2000: within 0.8% of 1.
    let vals: Vec<T> = bits
        .iter()
        .map(|&b| T::from_complex(1.0 + ((b % 4001) as f64 - 2000.0) / 262_144.0, 0.0))
        .collect();
    let flat = from_vec(&[vals.len() as i64], &vals);
    let view = |start: i64, rows: i64, cols: i64| {
        flat.narrow(0, start, rows * cols)
            .unwrap()
            .view(&[rows, cols])
            .unwrap()
    };
    let cases: Vec<(Tensor, &[i64])> = vec![
        // One run past the four-stream length, from an odd address.
        (flat.narrow(0, 1, 70_001).unwrap(), &[]),
        (flat.narrow(0, 0, 4 * 70_001).unwrap(), &[]),
        // Rows each into one output, four a pass, with tails.
        (view(1, 9, 5000), &[1]),
        (view(0, 3, 12_000), &[1]),
        (view(1, 8, 4099), &[1]),
        (view(0, 4, 4096), &[1]),
        // Rows into a row of outputs: four or eight a pass, the rest one
        // by one.
        (view(1, 9, 4099), &[0]),
        (view(0, 64, 1000), &[0]),
        (view(1, 24, 999), &[0]),
        (view(1, 17, 999), &[0]),
        // Two dims of three.
        (
            flat.narrow(0, 3, 6 * 50 * 70)
                .unwrap()
                .view(&[6, 50, 70])
                .unwrap(),
            &[0, 2],
        ),
    ];
    for threads in [1, 2] {
        tessera::parallel::set_num_threads(threads);
        for (t, dims) in &cases {
            let run = |avx2: bool| {
                simd::set_avx2_enabled(avx2);
                to_vec::<T>(&kernels::prod(t, dims, false).unwrap())
            };
            let (with, without) = (run(true), run(false));
            simd::set_avx2_enabled(true);
            let what = format!(
                "prod {:?} {:?} over {dims:?}, {threads} threads",
                T::DTYPE,
                t.sizes()
            );
            // Normal numbers: a product that under- or overflowed would
            // hide its order.
            for v in &with {
                let x = v.cast::<f64>();
                assert!(x.is_finite() && x.abs() > 1e-30, "{what}: {x}");
            }
            assert_all_same(&with, &without, &what);
        }
    }
}

#[test]
fn floating_products_have_the_same_bits_with_and_without_avx2() {
    check_prod_bits_with_and_without_avx2::<f32>();
    check_prod_bits_with_and_without_avx2::<f16>();
    check_prod_bits_with_and_without_avx2::<bf16>();
    check_prod_bits_with_and_without_avx2::<f64>();
}
