//! A save from a read-only mapped load (what `tessera convert` does)
//! whose input file shrinks after the load fails with an error naming the
//! input, and leaves no temporary file: it never reads the mapping, whose
//! pages past the new end would be SIGBUS (issue 65, finding 6: the
//! CRC-32 of a torch record was computed from the mapping on a second
//! thread, and the process died).
//!
//! Each case runs in a child process (this test binary again, the
//! `child_saves_shrunk` test, active only with TESSERA_SHRUNK_CHILD set):
//! it loads the input mapped and read-only, truncates it, and saves. The
//! parent checks the child exited (not killed by a signal), reported the
//! error naming the input, and left only the input in its directory.

#[path = "common/this_binary.rs"]
mod this_binary;

use std::path::{Path, PathBuf};
use tessera::device::Device;
use tessera::dtype::DType;
use tessera::serialize::{self, Format, LoadFlags, TensorDict};
use tessera::tensor::Tensor;

const CHILD_ENV: &str = "TESSERA_SHRUNK_CHILD";

/// (input format, output format, floats per tensor, bytes the input is
/// truncated to): 4 MiB tensors (copied by the kernel, the torch record's
/// CRC-32 read back) and 64 KiB ones (read with pread), cut in the
/// middle of the data or to nothing.
const CASES: [(Format, Format, i64, u64); 6] = [
    (Format::Torch, Format::Torch, 1 << 20, 3 << 20),
    (Format::Safetensors, Format::Torch, 1 << 20, 0),
    (Format::Safetensors, Format::Safetensors, 1 << 20, 5 << 20),
    (Format::Torch, Format::Safetensors, 1 << 20, 1 << 20),
    (Format::Safetensors, Format::Torch, 1 << 14, 70_000),
    (Format::Torch, Format::Safetensors, 1 << 14, 0),
];

/// Two float tensors of `numel` elements.
fn dict(numel: i64) -> TensorDict {
    let mut d = TensorDict::new();
    for k in 0..2 {
        let t = Tensor::empty(&[numel], DType::Float, Device::CPU).unwrap();
        // SAFETY: a fresh contiguous CPU tensor of numel floats.
        let v = unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, numel as usize) };
        for (i, x) in v.iter_mut().enumerate() {
            *x = k as f32 + i as f32;
        }
        d.set(&format!("t{k}"), t).unwrap();
    }
    d
}

fn ext(f: Format) -> &'static str {
    if f == Format::Torch {
        "pt"
    } else {
        "safetensors"
    }
}

/// The child: case TESSERA_SHRUNK_CHILD=DIR:K in directory DIR.
#[test]
fn child_saves_shrunk() {
    let Some(arg) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let arg = arg.into_string().unwrap();
    let (dir, k) = arg.rsplit_once(':').unwrap();
    let (from, to, numel, cut) = CASES[k.parse::<usize>().unwrap()];
    let dir = Path::new(dir);
    let input = dir.join(format!("input.{}", ext(from)));
    serialize::save(&dict(numel), &input, from).unwrap();
    let flags = LoadFlags {
        mmap: true,
        read_only: true,
        ..Default::default()
    };
    let mapped = serialize::load(&input, from, flags).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&input)
        .unwrap()
        .set_len(cut)
        .unwrap();
    match serialize::save(&mapped, &dir.join(format!("out.{}", ext(to))), to) {
        Ok(()) => println!("SAVE-OK"),
        Err(e) => println!("SAVE-ERR: {e}"),
    }
}

#[test]
fn a_save_from_an_input_that_shrank_fails_naming_it() {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("save-shrunk-{}", std::process::id()));
    for (k, (from, to, numel, cut)) in CASES.iter().enumerate() {
        let what = format!(
            "{} -> {}, {numel} floats, cut to {cut}",
            from.name(),
            to.name()
        );
        let dir = base.join(k.to_string());
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let out = this_binary::command()
            .args([
                "--exact",
                "child_saves_shrunk",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, format!("{}:{k}", dir.display()))
            .output()
            .expect("running the test binary again");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{what}: the child did not exit cleanly ({:?}); stdout:\n{stdout}\nstderr:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let input = dir.join(format!("input.{}", ext(*from)));
        let line = stdout
            .lines()
            .find(|l| l.contains("SAVE-"))
            .unwrap_or_else(|| panic!("{what}: no result:\n{stdout}"));
        assert!(
            line.contains("SAVE-ERR") && line.contains(&input.display().to_string()),
            "{what}: expected an error naming the input: {line}"
        );
        assert!(line.contains("truncated"), "{what}: {line}");
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            left,
            [format!("input.{}", ext(*from))],
            "{what}: files left"
        );
    }
    std::fs::remove_dir_all(&base).unwrap();
}
