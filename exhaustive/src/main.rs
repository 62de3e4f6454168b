//! Every one of the 2^32 float32 bit patterns through tessera's float8
//! conversions, against c10: the FNV-1a 64 hash of the encodings, in
//! bit-pattern order, must equal the one scripts/float8_exhaustive.cpp
//! computed with libtorch 2.15's c10 types. Two checks:
//! - `Float8Format::encode` of the five formats (src/dtype/float8.rs);
//! - the copy kernel's f32 -> e4m3fn and e5m2 paths (AVX2 where the CPU
//!   has it), 16M elements a call.
//!
//! 7 x 2^32 conversions: too long for `cargo test` (CI runs this in
//! release: `cargo run --release -p tessera-exhaustive`). The one-byte
//! patterns, the ties and the edges are tests/float8_formats.rs's.

use std::process::ExitCode;
use std::time::Instant;
use tessera::dtype::float8::Float8Format;
use tessera::{kernels, DType, Device, Tensor};

/// c10's hashes (scripts/float8_exhaustive.cpp, libtorch 2.15).
const C10_HASHES: [(Float8Format, u64); 5] = [
    (Float8Format::E5M2, 0xfcf769a137e22325),
    (Float8Format::E4M3Fn, 0xc7114836d2622325),
    (Float8Format::E5M2Fnuz, 0x0c3678ef29a223a5),
    (Float8Format::E4M3Fnuz, 0x452e47b5bfa223a5),
    (Float8Format::E8M0Fnu, 0x16b551d22a222325),
];

const FNV_OFFSET: u64 = 0xcbf29ce484222325;
const FNV_PRIME: u64 = 0x100000001b3;

/// The hash of `encode` over every f32 bit pattern.
fn encode_hash(f: Float8Format) -> u64 {
    let mut h = FNV_OFFSET;
    for i in 0..=u32::MAX {
        h = (h ^ f.encode(f32::from_bits(i)) as u64).wrapping_mul(FNV_PRIME);
    }
    h
}

/// The hash of the copy kernel's f32 -> `d` over every f32 bit pattern.
fn copy_hash(d: DType) -> u64 {
    const CHUNK: u64 = 1 << 24;
    let src = Tensor::empty(&[CHUNK as i64], DType::Float, Device::CPU).expect("src");
    let dst = Tensor::empty(&[CHUNK as i64], d, Device::CPU).expect("dst");
    let mut h = FNV_OFFSET;
    for c in 0..(1u64 << 32) / CHUNK {
        // SAFETY: src holds CHUNK contiguous 4-byte elements, and nothing
        // else reads or writes them while this slice lives.
        let s =
            unsafe { std::slice::from_raw_parts_mut(src.data_ptr() as *mut u32, CHUNK as usize) };
        for (k, x) in s.iter_mut().enumerate() {
            *x = (c * CHUNK) as u32 + k as u32;
        }
        kernels::copy_(&dst, &src).expect("copy_");
        // SAFETY: dst holds CHUNK contiguous bytes, written by copy_ above.
        let out =
            unsafe { std::slice::from_raw_parts(dst.data_ptr() as *const u8, CHUNK as usize) };
        for b in out {
            h = (h ^ *b as u64).wrapping_mul(FNV_PRIME);
        }
    }
    h
}

/// Prints one check's line; true when the hash is c10's.
fn report(what: &str, got: u64, want: u64, seconds: f64) -> bool {
    let ok = got == want;
    println!(
        "{} {what}: hash {got:#018x}, c10's {want:#018x} ({seconds:.1} s)",
        if ok { "ok  " } else { "FAIL" }
    );
    ok
}

fn main() -> ExitCode {
    let start = Instant::now();
    // The five encodes are independent: one thread each, the cores share
    // them (two on CI's machine).
    let encodes: Vec<(Float8Format, u64, u64, f64)> = std::thread::scope(|s| {
        let handles: Vec<_> = C10_HASHES
            .iter()
            .map(|&(f, want)| {
                s.spawn(move || {
                    let t = Instant::now();
                    (f, encode_hash(f), want, t.elapsed().as_secs_f64())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("encode thread"))
            .collect()
    });
    let mut ok = true;
    for (f, got, want, seconds) in encodes {
        ok &= report(&format!("encode {}", f.name()), got, want, seconds);
    }
    // The copy kernel runs on tessera's own pool.
    for (d, want) in [
        (DType::Float8E5M2, C10_HASHES[0].1),
        (DType::Float8E4M3Fn, C10_HASHES[1].1),
    ] {
        let t = Instant::now();
        let got = copy_hash(d);
        ok &= report(
            &format!("copy f32 -> {d}"),
            got,
            want,
            t.elapsed().as_secs_f64(),
        );
    }
    println!("{:.1} s in all", start.elapsed().as_secs_f64());
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
