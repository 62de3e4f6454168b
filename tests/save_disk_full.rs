//! A save that runs out of space fails with Io naming ENOSPC and leaves
//! the old file intact and no temporary file.
//!
//! Needs a small file system: the test mounts a 1 MiB tmpfs, which takes
//! root (or root in a user and mount namespace: `.ci/disk-full.sh` runs it
//! under `unshare -rm` when not root). Otherwise it prints SKIPPED with
//! the reason and passes.

use std::path::{Path, PathBuf};
use std::process::Command;
use tessera::device::Device;
use tessera::dtype::DType;
use tessera::error::ErrorKind;
use tessera::serialize::{self, Format, TensorDict};
use tessera::tensor::Tensor;

/// A dict of one float tensor of `numel` elements.
fn dict(numel: i64) -> TensorDict {
    let t = Tensor::empty(&[numel], DType::Float, Device::CPU).unwrap();
    // SAFETY: a fresh contiguous CPU tensor of numel floats.
    let v = unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut f32, numel as usize) };
    for (i, x) in v.iter_mut().enumerate() {
        *x = i as f32;
    }
    let mut d = TensorDict::new();
    d.set("w", t).unwrap();
    d
}

/// A tmpfs mounted at a new directory, unmounted and removed on drop.
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not running as root (try .ci/disk-full.sh)".into());
        }
        let dir = std::env::temp_dir().join(format!("tessera-disk-full-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err(format!(
                "mount -t tmpfs -o size={size} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs(dir))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_save_past_a_full_disk_keeps_the_old_file() {
    let fs = match Tmpfs::mount("1m") {
        Ok(fs) => fs,
        Err(why) => {
            println!("SKIPPED a_save_past_a_full_disk_keeps_the_old_file: {why}");
            return;
        }
    };
    // 2 MiB of floats on a 1 MiB file system: refused when the save
    // reserves the tensors' bytes. 2 MiB of metadata beside 4 KB of
    // floats (too few to reserve): refused by a write.
    let mut meta = dict(1000);
    meta.set_metadata("notes", &"x".repeat(2 << 20)).unwrap();
    for (name, big) in [
        ("m.pt", dict(1 << 19)),
        ("m.safetensors", dict(1 << 19)),
        ("meta.safetensors", meta),
    ] {
        let dest = fs.0.join(name);
        serialize::save(&dict(1000), &dest, Format::Auto).unwrap();
        let old = std::fs::read(&dest).unwrap();
        let e = serialize::save(&big, &dest, Format::Auto).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io, "{name}: {e}");
        assert!(e.message().contains("ENOSPC"), "{name}: {e}");
        assert!(e.message().contains(name), "{name}: {e}");
        assert!(
            std::fs::read(&dest).unwrap() == old,
            "{name}: the old file changed"
        );
        assert_eq!(entries(&fs.0), [name], "{name}: a temporary file was left");
        std::fs::remove_file(&dest).unwrap();
        println!("{name}: {e}");
    }
}
