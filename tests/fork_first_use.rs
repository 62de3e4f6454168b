//! A fork while another thread makes the process's first allocation: the
//! built-in CPU allocator is a `OnceLock`, and a child forked while its
//! initialization ran found it half-made and waited on it forever (seen
//! in CI, tests/memory_history.rs's fork test). Each round forks a fresh
//! process that has never touched tessera; there a thread makes the first
//! allocation while the main thread forks a grandchild at that moment,
//! and the grandchild must allocate and exit within the alarm.
//!
//! `harness = false`: main forks before any other thread exists, so each
//! round's process starts with tessera untouched. Messages go through
//! write(2) only (a forked child must not take Rust's stdio locks).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tessera::Allocator;

/// Rounds, each a fresh process.
const ROUNDS: usize = 200;
/// Seconds the grandchild may take before SIGALRM turns a hang into a
/// failure.
const ALARM_S: u32 = 10;

fn say(msg: &str) {
    // SAFETY: the pointer and length describe the live string.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
}

/// Waits for `pid`; its exit status, or -1 when it did not exit normally.
fn exit_status(pid: libc::pid_t) -> i32 {
    let mut status = 0;
    // SAFETY: waits for a child of this process.
    if unsafe { libc::waitpid(pid, &mut status, 0) } != pid || !libc::WIFEXITED(status) {
        return -1;
    }
    libc::WEXITSTATUS(status)
}

/// One round's process: the first allocation on a new thread, a fork
/// just as it starts. Exits 0 when the grandchild allocated and exited.
fn round() -> ! {
    let go = Arc::new(AtomicBool::new(false));
    let go2 = go.clone();
    let first = std::thread::spawn(move || {
        go2.store(true, Ordering::SeqCst);
        drop(Allocator::cpu().allocate(64));
    });
    while !go.load(Ordering::SeqCst) {
        std::hint::spin_loop();
    }
    // SAFETY: the grandchild allocates through tessera and leaves with
    // _exit; the alarm ends it if it hangs.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: alarm and _exit are async-signal-safe.
        unsafe { libc::alarm(ALARM_S) };
        let ok = Allocator::cpu().allocate(128).is_ok();
        // SAFETY: ends the grandchild without the parent's handlers.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let status = if pid > 0 { exit_status(pid) } else { -2 };
    let _ = first.join();
    // SAFETY: ends this round's process.
    unsafe { libc::_exit(if status == 0 { 0 } else { 3 }) };
}

fn main() {
    for i in 0..ROUNDS {
        // SAFETY: no thread exists in this process yet; the child runs one
        // round and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            round();
        }
        let status = exit_status(pid);
        if status != 0 {
            say(&format!(
                "FAIL: round {i}: the grandchild forked during the first allocation hung or \
                 failed (round status {status})\n"
            ));
            std::process::exit(1);
        }
    }
    say(&format!(
        "ok: {ROUNDS} forks during a process's first allocation, every child allocated\n"
    ));
}
