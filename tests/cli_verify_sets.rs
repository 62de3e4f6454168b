//! `tessera verify` of checkpoints of several files (issue 65, finding
//! 8): a Hugging Face shard index and a DCP directory (or its
//! `.metadata`), the fixtures of tests/data/shards/ that `ls` and
//! `convert` read, verified with every file they name reported; a record
//! damaged in one `.bin` shard or `.distcp` file fails naming that file.

#[path = "common/cli.rs"]
mod cli;
#[path = "common/damage.rs"]
mod damage;

use cli::{tessera, Scratch};
use std::path::{Path, PathBuf};

fn shards() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/shards")
}

/// The lines of `stdout` that report a file of the checkpoint.
fn file_lines(stdout: &str) -> Vec<&str> {
    stdout.lines().filter(|l| l.starts_with("  ok: ")).collect()
}

/// The number before " records CRC-checked" in `line` (0 when absent).
fn records(line: &str) -> usize {
    line.split(", ")
        .find_map(|p| p.strip_suffix(" records CRC-checked"))
        .map_or(0, |n| n.parse().unwrap())
}

#[test]
fn verify_follows_shard_indexes_and_checks_every_shard() {
    for (index, format, files) in [
        ("hf_bin/pytorch_model.bin.index.json", "torch", 4),
        (
            "hf_safetensors/model.safetensors.index.json",
            "safetensors",
            3,
        ),
    ] {
        let p = shards().join(index);
        let r = tessera(&["verify", p.to_str().unwrap()]).expect(0);
        let first = r.stdout.lines().next().unwrap();
        assert!(
            first.starts_with(&format!("ok: {}: {format}, ", p.display())),
            "{}",
            r.stdout
        );
        let lines = file_lines(&r.stdout);
        assert_eq!(lines.len(), files, "{}", r.stdout);
        for l in &lines {
            assert!(l.contains(&format!(": {format}, ")), "{l}");
            // A .bin shard is a torch archive: its records are checked.
            assert_eq!(records(l) > 0, format == "torch", "{l}");
        }
    }
}

#[test]
fn verify_checks_every_distcp_file_of_a_dcp_checkpoint() {
    for (dir, files) in [("dcp_1rank", 1), ("dcp_2ranks", 2)] {
        let d = shards().join(dir);
        for arg in [d.clone(), d.join(".metadata")] {
            let r = tessera(&["verify", arg.to_str().unwrap()]).expect(0);
            assert!(r.stdout.starts_with("ok: "), "{}", r.stdout);
            assert!(r.stdout.contains(": DCP, "), "{}", r.stdout);
            let lines = file_lines(&r.stdout);
            assert_eq!(lines.len(), files, "{}", r.stdout);
            for l in lines {
                assert!(l.contains(".distcp: DCP, "), "{l}");
                assert!(records(l) > 0, "{l}");
            }
        }
    }
}

/// A copy of fixture directory `name` in `dir`.
fn copy_dir(name: &str, dir: &Scratch) -> PathBuf {
    let to = dir.path(name);
    std::fs::create_dir_all(&to).unwrap();
    for e in std::fs::read_dir(shards().join(name)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
    to
}

#[test]
fn a_damaged_shard_or_distcp_file_fails_naming_it() {
    let dir = Scratch::new("verify-sets");
    for (fixture, damaged, arg) in [
        (
            "hf_bin",
            "pytorch_model-00002-of-00004.bin",
            "pytorch_model.bin.index.json",
        ),
        ("dcp_2ranks", "__1_0.distcp", ""),
    ] {
        let d = copy_dir(fixture, &dir);
        damage::flip_in_record(&d.join(damaged), "data/0", 1);
        // The load alone does not read the bytes: ls --no-crc still lists
        // it; ls checks every zip record of every file, naming it.
        let target = if arg.is_empty() {
            d.clone()
        } else {
            d.join(arg)
        };
        tessera(&["ls", "--no-crc", target.to_str().unwrap()]).expect(0);
        let r = tessera(&["ls", target.to_str().unwrap()]).expect(3);
        assert!(
            r.stderr.contains(damaged) && r.stderr.contains("CRC-32"),
            "ls {fixture}: {}",
            r.stderr
        );
        let r = tessera(&["verify", target.to_str().unwrap()]).expect(1);
        assert!(
            r.stderr.contains(damaged) && r.stderr.contains("CRC-32"),
            "{fixture}: {}",
            r.stderr
        );
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    }
}
