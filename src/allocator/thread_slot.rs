//! A few words of plain thread-local memory for the allocation hot paths:
//! the CPU allocator's statistics shard and block cache
//! (cpu_thread_cache.rs), the memory history's event buffer
//! (history/buffer.rs) and the caching allocators' thread front
//! (caching/thread_front.rs). Zero when a thread starts; no initializer, no
//! destructor, so a read is only the address computation and a load.
//!
//! Why not `thread_local!`: in the shared library, rustc reaches every
//! thread-local through `__tls_get_addr` (the general-dynamic model, a PLT
//! call and a dozen instructions), and stable Rust cannot pick another
//! model. On x86-64 Linux with glibc this module therefore defines the
//! slot itself. The first access goes through a TLS descriptor (the `gnu2`
//! dialect, what `-mtls-dialect=gnu2` makes a C compiler emit), which works
//! wherever the slot lives, dynamic TLS included, so loading the library
//! with dlopen never fails for want of static TLS (as the initial-exec
//! model can). When the descriptor shows the slot in the static TLS block
//! (always for a library the program links, and for a dlopen-ed one while
//! glibc has static TLS to spare), its offset from the thread pointer is
//! the same in every thread: it is kept, and every later access is the
//! thread pointer plus that offset, as in the initial-exec model, with no
//! indirect call (what it saves: benches/PERF_RESULTS.md, 2026-11-25 on
//! an Intel Xeon). Elsewhere it is a const `thread_local!`.

use std::cell::Cell;

/// The slot's words.
pub(crate) type Words = [Cell<usize>; 4];

/// The word of the CPU allocator's statistics shard.
pub(crate) const CPU_SHARD: usize = 0;
/// The word of the CPU allocator's block cache.
pub(crate) const CPU_CACHE: usize = 1;
/// The word of the memory history's event buffer.
pub(crate) const HISTORY_BUFFER: usize = 2;
/// The word of the caching allocators' thread front.
pub(crate) const CACHING_FRONT: usize = 3;

/// Runs `f` on the calling thread's slot.
#[inline(always)]
pub(crate) fn with<R>(f: impl FnOnce(&Words) -> R) -> R {
    imp::with(f)
}

/// As [`with`] where the slot's address is a fixed offset learned
/// already; None (and `f` not run) where finding it would take a call,
/// for a fast path that makes none (its general path calls [`with`]).
#[inline(always)]
pub(crate) fn with_known<R>(f: impl FnOnce(&Words) -> R) -> Option<R> {
    imp::with_known(f)
}

#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    target_env = "gnu",
    not(miri)
))]
mod imp {
    use super::Words;
    use std::sync::atomic::{AtomicIsize, Ordering::Relaxed};

    // The slot: 32 bytes of .tbss (zero in every new thread), hidden so
    // that it stays inside the library.
    std::arch::global_asm!(
        ".pushsection .tbss.tessera_thread_slot,\"awT\",@nobits",
        ".p2align 3",
        ".globl tessera_thread_slot",
        ".hidden tessera_thread_slot",
        ".type tessera_thread_slot,@object",
        ".size tessera_thread_slot,32",
        "tessera_thread_slot:",
        ".zero 32",
        ".popsection",
        options(att_syntax)
    );

    /// The slot's offset from the thread pointer once it is known to be
    /// the same in every thread (the slot is in the static TLS block); 0
    /// until then, or for good when glibc placed it in dynamic TLS. A
    /// static-TLS offset is never 0: on x86-64 the block lies below the
    /// thread pointer, at negative offsets.
    static STATIC_OFFSET: AtomicIsize = AtomicIsize::new(0);

    /// The address of the calling thread's slot: the thread pointer plus
    /// the static offset (a load and an add, what the initial-exec model
    /// would emit, without its refusal to dlopen), or the descriptor call.
    #[inline(always)]
    fn address() -> *const Words {
        let off = STATIC_OFFSET.load(Relaxed);
        if off == 0 {
            return resolve();
        }
        thread_pointer().wrapping_add_signed(off) as *const Words
    }

    /// The calling thread's thread pointer (%fs:0 holds its own address).
    #[inline(always)]
    fn thread_pointer() -> usize {
        let tp: usize;
        // SAFETY: reads one word at %fs:0, which the x86-64 psABI's TLS
        // layout (variant II) makes the thread pointer itself in every
        // thread; nothing else is touched.
        unsafe {
            std::arch::asm!(
                "movq %fs:0, {}",
                out(reg) tp,
                options(att_syntax, pure, readonly, nostack, preserves_flags),
            );
        }
        tp
    }

    /// The slot's address through its TLS descriptor, learning the static
    /// offset on the way when there is one.
    #[cold]
    #[inline(never)]
    fn resolve() -> *const Words {
        let (desc, off): (isize, isize);
        // SAFETY: the psABI's TLS descriptor sequence for the slot defined
        // above: the call returns the slot's offset from the thread pointer
        // in rax. The descriptor's address is kept in r12 (callee-saved:
        // any call leaves it). The resolver may run glibc's dynamic-TLS
        // path (a C call that can allocate), so every register the C ABI
        // lets a call clobber is declared clobbered; the stack is not
        // `nostack`, so the call may push. When the program is linked
        // statically against the library, the linker rewrites the lea
        // into a load of the offset itself and the call into a no-op, and
        // r12 then holds the offset.
        unsafe {
            std::arch::asm!(
                "leaq tessera_thread_slot@TLSDESC(%rip), %rax",
                "movq %rax, %r12",
                "call *tessera_thread_slot@TLSCALL(%rax)",
                out("rax") off,
                out("r12") desc,
                clobber_abi("C"),
                options(att_syntax),
            );
        }
        let fixed = if desc < 0 {
            // Rewritten by the linker: a constant offset.
            desc == off
        } else {
            // SAFETY: desc is the address of the slot's descriptor in the
            // library's GOT, two words (resolver, argument), relocated
            // before the call above returned. Its argument is the offset
            // itself when the slot is in static TLS (glibc's
            // `_dl_tlsdesc_return` returns it), and a pointer (positive)
            // to glibc's bookkeeping when it is in dynamic TLS.
            let arg = unsafe { *(desc as *const isize).add(1) };
            off < 0 && arg == off
        };
        if fixed {
            STATIC_OFFSET.store(off, Relaxed);
        }
        thread_pointer().wrapping_add_signed(off) as *const Words
    }

    #[inline(always)]
    pub(super) fn with<R>(f: impl FnOnce(&Words) -> R) -> R {
        // SAFETY: the calling thread's slot: 32 bytes, 8-aligned, zeroed
        // at thread start, alive until the thread ends (longer than this
        // call), and reached only through shared Cells on this thread.
        f(unsafe { &*address() })
    }

    #[inline(always)]
    pub(super) fn with_known<R>(f: impl FnOnce(&Words) -> R) -> Option<R> {
        let off = STATIC_OFFSET.load(Relaxed);
        if off == 0 {
            return None;
        }
        let slot = thread_pointer().wrapping_add_signed(off) as *const Words;
        // SAFETY: as in `with`: a learned static offset from the thread
        // pointer is the calling thread's slot.
        Some(f(unsafe { &*slot }))
    }
}

#[cfg(not(all(
    target_arch = "x86_64",
    target_os = "linux",
    target_env = "gnu",
    not(miri)
)))]
mod imp {
    use super::Words;
    use std::cell::Cell;

    thread_local! {
        static SLOT: Words = const { [Cell::new(0), Cell::new(0), Cell::new(0), Cell::new(0)] };
    }

    #[inline(always)]
    pub(super) fn with<R>(f: impl FnOnce(&Words) -> R) -> R {
        SLOT.with(f)
    }

    #[inline(always)]
    pub(super) fn with_known<R>(f: impl FnOnce(&Words) -> R) -> Option<R> {
        Some(SLOT.with(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    /// In fresh threads that never allocate through tessera (the slot is
    /// the allocators'), put back to zero before they end.
    #[test]
    fn each_thread_has_its_own_zeroed_slot() {
        let barrier = Barrier::new(2);
        std::thread::scope(|s| {
            for t in 1..=2usize {
                let barrier = &barrier;
                s.spawn(move || {
                    with(|w| assert!(w.iter().all(|c| c.get() == 0), "zero at start"));
                    with(|w| w.iter().enumerate().for_each(|(k, c)| c.set(10 * t + k)));
                    barrier.wait();
                    with(|w| {
                        for (k, c) in w.iter().enumerate() {
                            assert_eq!(c.get(), 10 * t + k, "thread {t} keeps word {k}");
                        }
                    });
                    with(|w| w.iter().for_each(|c| c.set(0)));
                });
            }
        });
    }
}
