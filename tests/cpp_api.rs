//! The C++ layer and the examples gallery under `cargo test`:
//! - `cpp_tests/run.sh`: include/tessera.hpp and each of its parts in
//!   include/tessera/ compiled alone in every configuration, and every
//!   cpp_tests/test_*.cpp built and run with g++ (and clang++ when
//!   installed) in both error modes;
//! - `examples/run.sh`: every example built, run and its output compared
//!   with examples/expected/.
//!
//! Both run against the libtessera.so cargo built for this test run (passed
//! as TESSERA_LIB_DIR, so the scripts do not build it again). Without bash
//! or a C++ compiler the tests print why they skip and pass.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The directory of the libtessera shared library of this build: cargo
/// test leaves it in target/<profile>/deps (next to this test), cargo build
/// in target/<profile>.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("target/<profile>/deps");
    let name = format!(
        "{}tessera{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    [deps, deps.parent().expect("target/<profile>")]
        .iter()
        .find(|dir| dir.join(&name).exists())
        .map(|dir| dir.to_path_buf())
        .unwrap_or_else(|| panic!("{name} was not built next to {}", exe.display()))
}

/// Whether `program --version` runs.
fn installed(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Why the scripts cannot run here, if they cannot.
fn missing_tools(compilers: &[&str]) -> Option<String> {
    if !cfg!(unix) {
        return Some("the scripts need a Unix shell".into());
    }
    // .ci/arm.sh: this test runs under qemu-user, and the scripts would
    // build for the host with its compilers. There the examples are built
    // by the cross compilers and run under qemu instead (docs/PLATFORMS.md).
    if std::env::var("TESSERA_TEST_QEMU_USER").is_ok_and(|v| !v.is_empty() && v != "0") {
        return Some(
            "under qemu-user (TESSERA_TEST_QEMU_USER): the scripts use the host's compilers".into(),
        );
    }
    if !installed("bash") {
        return Some("bash is not installed".into());
    }
    compilers
        .iter()
        .find(|c| !installed(c))
        .map(|c| format!("{c} is not installed"))
}

/// Runs `script` (relative to the repository root) with the library of
/// this build and a scratch directory under target/; fails with its output.
fn run_script(script: &str, scratch_var: &str, scratch: &str, env: &[(&str, &str)]) {
    let lib_dir = library_dir();
    let scratch_dir = lib_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "target"))
        .map(Path::to_path_buf)
        .unwrap_or_else(|| root().join("target"))
        .join(scratch);
    let out = Command::new("bash")
        .arg(root().join(script))
        .current_dir(root())
        .env("TESSERA_LIB_DIR", &lib_dir)
        .env(scratch_var, &scratch_dir)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    // The summary line.
    println!("{}", stdout.lines().last().unwrap_or(""));
}

/// With g++ in both error modes; clang++ (which doubles the time: about
/// 60 s more on two cores) when TESSERA_CPP_COMPILERS names it, as CI's
/// own C++ stage does (`TESSERA_CPP_COMPILERS=clang++ cpp_tests/run.sh`).
#[test]
fn cpp_tests_pass_in_every_error_mode() {
    if let Some(why) = missing_tools(&["g++"]) {
        println!("SKIP: C++ tests not run: {why}");
        return;
    }
    let compilers = std::env::var("TESSERA_CPP_COMPILERS").unwrap_or_else(|_| "g++".into());
    run_script(
        "cpp_tests/run.sh",
        "TESSERA_CPP_TEST_DIR",
        "cpp_tests",
        &[("TESSERA_CPP_COMPILERS", &compilers)],
    );
}

#[test]
fn examples_print_their_expected_output() {
    if let Some(why) = missing_tools(&["cc", "c++"]) {
        println!("SKIP: examples not run: {why}");
        return;
    }
    run_script("examples/run.sh", "TESSERA_EXAMPLES_DIR", "examples", &[]);
}
