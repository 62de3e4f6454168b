//! Running the `tessera` command in tests (tests/cli.rs,
//! tests/cli_corpus.rs): the binary cargo built for this package, its
//! status, stdout and stderr.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "this_binary.rs"]
mod this_binary;

/// What one run of the command gave.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Panics, showing the run, unless it exited with `code`.
    #[track_caller]
    pub fn expect(self, code: i32) -> Run {
        assert_eq!(
            self.code, code,
            "exit status {} (expected {code}); stdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }
}

/// The `tessera` command, run through the emulator named by
/// `TESSERA_TEST_RUNNER` when that is set (split on whitespace): under
/// qemu-user (.ci/arm.sh) the kernel cannot execute the aarch64 binary.
pub fn command() -> Command {
    this_binary::through_runner(env!("CARGO_BIN_EXE_tessera"))
}

/// Runs `tessera ARGS...` (stderr is a pipe: no progress bar).
pub fn tessera<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Run {
    let mut out = command().args(args).output();
    // Under Wine, starting a process while the test's other threads start
    // theirs fails now and then with ERROR_INTERNAL_ERROR (1359, once in
    // a run of every command test): the start is tried again, at most
    // twice, before the test fails. Nothing else is retried.
    for _ in 0..2 {
        match &out {
            Err(e) if cfg!(windows) && e.raw_os_error() == Some(1359) => {
                std::thread::sleep(std::time::Duration::from_millis(100));
                out = command().args(args).output();
            }
            _ => break,
        }
    }
    let out = out.expect("the tessera command runs");
    Run {
        code: out.status.code().expect("exited, not killed by a signal"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A fresh directory of this test's own under the target directory,
/// removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// The names of the files in the directory, sorted (hidden ones too:
    /// a temporary file left behind shows).
    pub fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .expect("read scratch directory")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A safetensors file, written byte by byte: (name, dtype, shape, data)
/// and metadata.
pub fn safetensors(path: &Path, tensors: &[(&str, &str, &[u64], Vec<u8>)], meta: &[(&str, &str)]) {
    let mut header = serde_json::Map::new();
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.insert(
            name.to_string(),
            serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
        );
    }
    if !meta.is_empty() {
        let m: serde_json::Map<String, Value> = meta
            .iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect();
        header.insert("__metadata__".into(), Value::Object(m));
    }
    let mut h = serde_json::to_vec(&Value::Object(header)).unwrap();
    while h.len() % 8 != 0 {
        h.push(b' ');
    }
    let mut file = (h.len() as u64).to_le_bytes().to_vec();
    file.extend_from_slice(&h);
    file.extend_from_slice(&data);
    std::fs::write(path, file).unwrap();
}

pub fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// weights.safetensors: w [2, 3] float, b [3] float, steps [] int64,
/// mask [4] bool; metadata {"step": "7"}.
pub fn weights(dir: &Scratch) -> std::path::PathBuf {
    let p = dir.path("weights.safetensors");
    safetensors(
        &p,
        &[
            ("w", "F32", &[2, 3], f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
            ("b", "F32", &[3], f32s(&[0.5, -0.5, 0.0])),
            ("steps", "I64", &[], 7i64.to_le_bytes().to_vec()),
            ("mask", "BOOL", &[4], vec![1, 0, 0, 1]),
        ],
        &[("step", "7")],
    );
    p
}
