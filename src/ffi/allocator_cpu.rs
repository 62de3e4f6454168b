//! The built-in CPU allocator's process-wide options at the ABI: zero
//! and junk fill, huge pages, and the per-thread block cache.

use super::call::{guard, guard_value};
use super::types::*;
use crate::allocator::cpu;

fn update_cpu_options(fname: &str, f: impl FnOnce(&mut cpu::CpuOptions)) -> TsrStatus {
    guard(fname, || {
        let mut o = cpu::options();
        f(&mut o);
        cpu::set_options(o)
    })
}

/// Zero-fills new memory of the built-in CPU allocator (process-wide).
/// Errors: TSR_ERR_INVALID_ARGUMENT when turning it on while junk-fill is on.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_set_zero_fill(on: bool) -> TsrStatus {
    update_cpu_options("tsr_cpu_allocator_set_zero_fill", |o| o.zero_fill = on)
}

/// Fills new memory of the built-in CPU allocator with the pattern
/// 0x7fedbeef (reads as NaN / a huge integer), to expose reads of
/// uninitialized memory. Errors: TSR_ERR_INVALID_ARGUMENT when turning it
/// on while zero-fill is on.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_set_junk_fill(on: bool) -> TsrStatus {
    update_cpu_options("tsr_cpu_allocator_set_junk_fill", |o| o.junk_fill = on)
}

/// Aligns built-in CPU allocations of 2 MiB or more to 2 MiB and advises
/// transparent huge pages for them (madvise).
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_set_huge_pages(on: bool) -> TsrStatus {
    update_cpu_options("tsr_cpu_allocator_set_huge_pages", |o| o.huge_pages = on)
}

/// Sets the per-thread cache budget of the built-in CPU allocator, in
/// bytes (default 128 MiB; 0 turns the cache off). Freed blocks up to 256
/// MiB are kept by the freeing thread, a few per size class, until this
/// budget is reached, so repeated sizes skip malloc/free; a thread's cache
/// is freed when it exits or calls tsr_cpu_allocator_release_cache.
/// Applies to later frees.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_set_cache_limit(bytes: usize) {
    guard_value("tsr_cpu_allocator_set_cache_limit", (), || {
        cpu::set_cache_limit(bytes)
    })
}

/// The per-thread cache budget of the built-in CPU allocator, in bytes.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_cache_limit() -> usize {
    guard_value("tsr_cpu_allocator_cache_limit", 0, cpu::cache_limit)
}

/// Frees every block the calling thread keeps in the built-in CPU
/// allocator's cache; returns the bytes released.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_release_cache() -> usize {
    guard_value(
        "tsr_cpu_allocator_release_cache",
        0,
        cpu::release_thread_cache,
    )
}

/// Bytes the calling thread keeps in the built-in CPU allocator's cache.
#[no_mangle]
pub extern "C" fn tsr_cpu_allocator_cached_bytes() -> usize {
    guard_value(
        "tsr_cpu_allocator_cached_bytes",
        0,
        cpu::thread_cached_bytes,
    )
}
