//! Runs tests/python/test_dlpack_numpy.py (tessera <-> NumPy through
//! DLPack, with ctypes) against the libtessera.so cargo built for this
//! test run. Without python3 the tests print a SKIP line and pass; without
//! NumPy the script itself prints "SKIP: numpy not installed" and exits 0.

use std::path::PathBuf;
use std::process::{Command, Output};

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/test_dlpack_numpy.py")
}

/// The libtessera shared library of this build: cargo test leaves the
/// fresh one in target/<profile>/deps (next to this test), cargo build
/// copies it to target/<profile>.
fn library() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("target/<profile>/deps");
    let name = format!(
        "{}tessera{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    [deps, deps.parent().expect("target/<profile>")]
        .iter()
        .map(|dir| dir.join(&name))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{name} was not built next to {}", exe.display()))
}

/// Runs the script with `python3`, or None when there is no python3.
fn run_script(extra_env: &[(&str, &std::ffi::OsStr)]) -> Option<Output> {
    let lib = library();
    let mut cmd = Command::new("python3");
    cmd.arg(script()).arg(&lib);
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    match cmd.output() {
        Ok(out) => Some(out),
        Err(e) => {
            eprintln!("SKIP: python3 is not available ({e})");
            None
        }
    }
}

#[test]
fn numpy_exchange_through_dlpack() {
    let Some(out) = run_script(&[]) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "test_dlpack_numpy.py failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains("PASS:") || stdout.contains("SKIP:"),
        "the script reported neither PASS nor SKIP:\n{stdout}"
    );
}

#[test]
fn the_script_skips_cleanly_without_numpy() {
    // A `numpy` package that fails to import, first on the path, stands in
    // for a machine without NumPy.
    let dir = std::env::temp_dir().join(format!("tessera-no-numpy-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("numpy")).unwrap();
    std::fs::write(
        dir.join("numpy/__init__.py"),
        "raise ImportError('numpy hidden by tessera tests')\n",
    )
    .unwrap();
    let out = run_script(&[("PYTHONPATH", dir.as_os_str())]);
    std::fs::remove_dir_all(&dir).unwrap();
    let Some(out) = out else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "exit {}: {stdout}", out.status);
    assert_eq!(stdout.trim(), "SKIP: numpy not installed");
}
