//! The running test binary as a command, for tests that run themselves
//! again as a child process (included with `#[path]`).

use std::process::Command;

/// This test binary as a [`Command`], run through the emulator named by
/// `TESSERA_TEST_RUNNER` when that is set (split on whitespace): under
/// qemu-user (.ci/arm.sh) the aarch64 binary cannot be executed directly
/// by the x86_64 kernel, so its child goes through the same
/// `qemu-aarch64 -L SYSROOT` the parent runs under.
pub fn command() -> Command {
    through_runner(std::env::current_exe().expect("the test binary's path"))
}

/// The program `exe` as a [`Command`], through `TESSERA_TEST_RUNNER`
/// when that is set (as [`command`]).
pub fn through_runner(exe: impl AsRef<std::ffi::OsStr>) -> Command {
    let runner = std::env::var("TESSERA_TEST_RUNNER").unwrap_or_default();
    let mut words = runner.split_whitespace();
    match words.next() {
        Some(program) => {
            let mut cmd = Command::new(program);
            cmd.args(words).arg(exe);
            cmd
        }
        None => Command::new(exe),
    }
}
