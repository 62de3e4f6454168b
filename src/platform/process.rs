//! The process: its id, the fork handlers (`pthread_atfork`; Windows has
//! no fork, so nothing is registered and nothing ever runs them), and a
//! memory barrier on every running thread of the process (Linux:
//! membarrier(2); Windows: FlushProcessWriteBuffers; macOS has none).

/// This process's id.
#[inline]
pub(crate) fn id() -> u64 {
    #[cfg(unix)]
    // SAFETY: getpid has no preconditions.
    let id = unsafe { libc::getpid() } as u64;
    #[cfg(not(unix))]
    let id = u64::from(std::process::id());
    id
}

/// A fork handler.
pub(crate) type ForkHandler = unsafe extern "C" fn();

/// Registers the three fork handlers; false when registering failed (out
/// of memory: the caller tries again later). Windows: there is no fork,
/// so there is nothing to register: true.
pub(crate) fn register_fork_handlers(
    prepare: ForkHandler,
    parent: ForkHandler,
    child: ForkHandler,
) -> bool {
    #[cfg(unix)]
    {
        // SAFETY: the three handlers are extern "C" functions without
        // arguments, valid for the whole process lifetime.
        unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) == 0 }
    }
    #[cfg(not(unix))]
    {
        let _ = (prepare, parent, child);
        true
    }
}

/// A full memory barrier on every running thread of the process; false
/// where the OS has none (macOS, a Linux kernel without membarrier).
#[cfg(any(target_os = "linux", target_os = "android"))]
pub(crate) fn barrier_on_every_thread() -> bool {
    const CMD_GLOBAL: libc::c_int = 1;
    const CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;
    static REGISTERED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let membarrier = |cmd: libc::c_int| -> bool {
        // SAFETY: membarrier takes two integer arguments and touches no
        // memory of ours.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_uint) == 0 }
    };
    if *REGISTERED.get_or_init(|| membarrier(CMD_REGISTER_PRIVATE_EXPEDITED))
        && membarrier(CMD_PRIVATE_EXPEDITED)
    {
        return true;
    }
    membarrier(CMD_GLOBAL)
}

/// Windows: FlushProcessWriteBuffers, a barrier on every processor
/// running a thread of the process.
#[cfg(windows)]
pub(crate) fn barrier_on_every_thread() -> bool {
    // SAFETY: no arguments, no preconditions.
    unsafe { windows_sys::Win32::System::Threading::FlushProcessWriteBuffers() };
    true
}

/// No such barrier here (macOS and other Unixes).
#[cfg(not(any(target_os = "linux", target_os = "android", windows)))]
pub(crate) fn barrier_on_every_thread() -> bool {
    false
}
