//! A save killed at any moment leaves the old file or the new one, whole.
//!
//! The test process runs itself again as a child (the `child_saves` test,
//! active only with TESSERA_SAVE_KILL_CHILD set) that saves a 32 MiB dict
//! over an existing file, and kills it with SIGKILL at delays spread over
//! the save's measured duration, in both formats. After each kill the
//! destination must be byte for byte the old file or the complete new
//! one. A kill during the save may leave the temporary file
//! `.NAME.tsr-tmp-PID-N` beside the destination (docs/RELIABILITY.md,
//! "Files"); the test counts and removes them.

#[path = "common/this_binary.rs"]
mod this_binary;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Instant;
use tessera::device::Device;
use tessera::dtype::DType;
use tessera::serialize::{self, Format, TensorDict};
use tessera::tensor::Tensor;

const CHILD_ENV: &str = "TESSERA_SAVE_KILL_CHILD";
/// Tensors of the child's dict, each of `numel()` floats (32 MiB in all).
const TENSORS: i64 = 8;
/// 1 Mi floats a tensor; an eighth of that under qemu-user
/// (TESSERA_TEST_QEMU_USER, inherited by the child), where filling and
/// saving 32 MiB 42 times took a minute of emulation: 4 MiB still spans
/// many writes, and the kills spread over the save's measured duration.
fn numel() -> i64 {
    let qemu = std::env::var("TESSERA_TEST_QEMU_USER").is_ok_and(|v| !v.is_empty() && v != "0");
    if qemu {
        1 << 17
    } else {
        1 << 20
    }
}
/// Kills per format.
const KILLS: u32 = 10;

/// A dict of `tensors` float tensors of `numel` elements, values from
/// `seed`.
fn dict(tensors: i64, numel: i64, seed: f32) -> TensorDict {
    let mut d = TensorDict::new();
    for k in 0..tensors {
        let t = Tensor::empty(&[numel], DType::Float, Device::CPU).unwrap();
        // SAFETY: a fresh contiguous CPU tensor of numel floats.
        let v = unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, numel as usize) };
        for (i, x) in v.iter_mut().enumerate() {
            *x = seed + (k as f32) * 0.5 + i as f32;
        }
        d.set(&format!("t{k}"), t).unwrap();
    }
    d
}

/// The child: saves the big dict to the path in TESSERA_SAVE_KILL_CHILD,
/// printing SAVE-START just before and SAVE-DONE after.
#[test]
fn child_saves() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        return;
    };
    let d = dict(TENSORS, numel(), 7.0);
    println!("SAVE-START");
    serialize::save(&d, Path::new(&path), Format::Auto).unwrap();
    println!("SAVE-DONE");
}

/// Starts a child saving to `dest` and waits until it starts the save.
fn start_child(dest: &Path) -> (Child, Instant) {
    let mut child = this_binary::command()
        .args(["--exact", "child_saves", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dest)
        .stdout(Stdio::piped())
        .spawn()
        .expect("running the test binary again");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the child ended before its save"
        );
        if line.contains("SAVE-START") {
            break;
        }
    }
    let started = Instant::now();
    // Drain the rest on a thread so the child never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    (child, started)
}

/// Removes the temporary files a killed save left beside `dest`; returns
/// how many.
fn remove_temps(dest: &Path) -> usize {
    let name = dest.file_name().unwrap().to_string_lossy().into_owned();
    let prefix = format!(".{name}.tsr-tmp-");
    let mut n = 0;
    for e in std::fs::read_dir(dest.parent().unwrap()).unwrap() {
        let e = e.unwrap();
        let entry = e.file_name().to_string_lossy().into_owned();
        if entry.starts_with(&prefix) {
            std::fs::remove_file(e.path()).unwrap();
            n += 1;
        } else {
            assert_eq!(entry, name, "an unexpected file beside the destination");
        }
    }
    n
}

fn run_format(dir: &Path, file: &str) {
    let dest: PathBuf = dir.join(file);
    serialize::save(&dict(2, 1000, 1.0), &dest, Format::Auto).unwrap();
    let old = std::fs::read(&dest).unwrap();

    // Calibration: one whole save gives the new bytes and the duration.
    let (mut child, started) = start_child(&dest);
    assert!(
        child.wait().unwrap().success(),
        "the calibration save failed"
    );
    let duration = started.elapsed();
    let new = std::fs::read(&dest).unwrap();
    assert_ne!(old, new);
    assert_eq!(
        remove_temps(&dest),
        0,
        "a complete save left a temporary file"
    );

    let (mut olds, mut news, mut temps) = (0, 0, 0);
    for i in 0..KILLS {
        std::fs::write(&dest, &old).unwrap();
        // From the start of the save to 20% past its calibrated end.
        let delay = duration.mul_f64(1.2 * f64::from(i) / f64::from(KILLS - 1));
        let (mut child, started) = start_child(&dest);
        if let Some(left) = delay.checked_sub(started.elapsed()) {
            std::thread::sleep(left);
        }
        let _ = child.kill(); // SIGKILL
        child.wait().unwrap();
        let now = std::fs::read(&dest).unwrap();
        if now == old {
            olds += 1;
        } else if now == new {
            news += 1;
        } else {
            panic!(
                "{file}: killed {delay:?} into a {duration:?} save, the destination holds {} \
                 bytes that are neither the old file ({}) nor the new one ({})",
                now.len(),
                old.len(),
                new.len()
            );
        }
        temps += remove_temps(&dest);
    }
    eprintln!(
        "{file}: save of {} bytes takes {duration:?}; {KILLS} kills: {olds} old, {news} new, \
         {temps} temporary files left",
        new.len()
    );
    std::fs::remove_file(&dest).unwrap();
}

#[test]
fn sigkill_during_a_save_leaves_the_old_or_the_new_file() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tessera-save-kill-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir(&dir).unwrap();
    run_format(&dir, "big.pt");
    run_format(&dir, "big.safetensors");
    std::fs::remove_dir(&dir).unwrap();
}
