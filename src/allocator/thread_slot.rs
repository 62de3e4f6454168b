//! A few words of plain thread-local memory for the allocation hot paths:
//! the CPU allocator's statistics shard and block cache
//! (cpu_thread_cache.rs) and the memory history's event buffer
//! (history/buffer.rs). Zero when a thread starts; no initializer, no
//! destructor, so a read is only the address computation and a load.
//!
//! Why not `thread_local!`: in the shared library, rustc reaches every
//! thread-local through `__tls_get_addr` (the general-dynamic model, a PLT
//! call and a dozen instructions), and stable Rust cannot pick another
//! model. On x86-64 Linux with glibc this module therefore defines the
//! slot itself and reaches it through a TLS descriptor (the `gnu2`
//! dialect, what `-mtls-dialect=gnu2` makes a C compiler emit): the
//! linker turns it into a constant offset in an executable, and in a
//! shared library glibc's resolver returns the offset in two instructions
//! while the slot lives in the static TLS block (always, for a library the
//! program links; for a dlopen-ed one while glibc has static TLS to
//! spare), with the `__tls_get_addr` path as the fallback, so loading the
//! library with dlopen never fails for want of static TLS (as the
//! initial-exec model can). Elsewhere it is a const `thread_local!`.

use std::cell::Cell;

/// The slot's words.
pub(crate) type Words = [Cell<usize>; 3];

/// The word of the CPU allocator's statistics shard.
pub(crate) const CPU_SHARD: usize = 0;
/// The word of the CPU allocator's block cache.
pub(crate) const CPU_CACHE: usize = 1;
/// The word of the memory history's event buffer.
pub(crate) const HISTORY_BUFFER: usize = 2;

/// Runs `f` on the calling thread's slot.
#[inline(always)]
pub(crate) fn with<R>(f: impl FnOnce(&Words) -> R) -> R {
    imp::with(f)
}

#[cfg(all(
    target_arch = "x86_64",
    target_os = "linux",
    target_env = "gnu",
    not(miri)
))]
mod imp {
    use super::Words;

    // The slot: 24 bytes of .tbss (zero in every new thread), hidden so
    // that it stays inside the library.
    std::arch::global_asm!(
        ".pushsection .tbss.tessera_thread_slot,\"awT\",@nobits",
        ".p2align 3",
        ".globl tessera_thread_slot",
        ".hidden tessera_thread_slot",
        ".type tessera_thread_slot,@object",
        ".size tessera_thread_slot,24",
        "tessera_thread_slot:",
        ".zero 24",
        ".popsection",
        options(att_syntax)
    );

    /// The address of the calling thread's slot.
    #[inline(always)]
    fn address() -> *const Words {
        let addr: usize;
        // SAFETY: the psABI's TLS descriptor sequence for the slot defined
        // above: the call returns the slot's offset from the thread pointer
        // in rax, and %fs:0 holds the thread pointer itself. The resolver
        // may run glibc's dynamic-TLS path (a C call that can allocate), so
        // every register the C ABI lets a call clobber is declared
        // clobbered; the stack is not `nostack`, so the call may push.
        // Pure and nomem: the result depends only on the thread, and the
        // sequence touches no memory Rust can see.
        unsafe {
            std::arch::asm!(
                "leaq tessera_thread_slot@TLSDESC(%rip), %rax",
                "call *tessera_thread_slot@TLSCALL(%rax)",
                "addq %fs:0, %rax",
                out("rax") addr,
                clobber_abi("C"),
                options(att_syntax, pure, nomem),
            );
        }
        addr as *const Words
    }

    #[inline(always)]
    pub(super) fn with<R>(f: impl FnOnce(&Words) -> R) -> R {
        // SAFETY: the calling thread's slot: 24 bytes, 8-aligned, zeroed
        // at thread start, alive until the thread ends (longer than this
        // call), and reached only through shared Cells on this thread.
        f(unsafe { &*address() })
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
        static SLOT: Words = const { [Cell::new(0), Cell::new(0), Cell::new(0)] };
    }

    #[inline(always)]
    pub(super) fn with<R>(f: impl FnOnce(&Words) -> R) -> R {
        SLOT.with(f)
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
