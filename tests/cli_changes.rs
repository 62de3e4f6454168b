//! Issue 68: `tessera convert` changes nothing silently (item 1), zip
//! records are CRC-checked by `convert` and `ls` (item 4), and messages
//! name what matters (item 5): an output that is a directory, the tensors
//! of a truncated legacy file's missing storage.

#[path = "common/cli.rs"]
mod cli;
#[path = "common/damage.rs"]
mod damage;

use cli::{f32s, safetensors, tessera, weights, Scratch};
use tessera::serialize::{self, Format, LoadFlags};

/// scalars.safetensors: `w` [2] and two 0-d tensors, `step` and `lr`;
/// metadata {"k": "v"}.
fn scalars(dir: &Scratch) -> std::path::PathBuf {
    let p = dir.path("scalars.safetensors");
    safetensors(
        &p,
        &[
            ("w", "F32", &[2], f32s(&[1.0, 2.0])),
            ("step", "I64", &[], 7i64.to_le_bytes().to_vec()),
            ("lr", "F32", &[], f32s(&[0.5])),
        ],
        &[("k", "v")],
    );
    p
}

/// A 0-d tensor GGUF cannot hold is refused by default, naming it; with
/// --allow-reshape it is written as [1] and the change printed once, its
/// names only under --verbose.
#[test]
fn convert_refuses_a_reshape_unless_allowed_and_then_says_so() {
    let dir = Scratch::new("changes-reshape");
    let src = scalars(&dir);
    let out = dir.path("o.gguf");
    let (s, o) = (src.to_str().unwrap(), out.to_str().unwrap());
    let before = dir.files();
    let r = tessera(&["convert", s, o]).expect(1);
    assert!(
        r.stderr.contains("'step'")
            && r.stderr.contains("'lr'")
            && r.stderr.contains("shape [1]")
            && r.stderr.contains("--allow-reshape"),
        "{}",
        r.stderr
    );
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert_eq!(dir.files(), before, "nothing written");

    let r = tessera(&["convert", "--allow-reshape", s, o]).expect(0);
    assert_eq!(
        r.stderr.trim(),
        "tessera convert: 2 0-d tensors written as shape [1] (--allow-reshape)"
    );
    let d = serialize::load(&out, Format::Auto, LoadFlags::default()).unwrap();
    assert_eq!(d.get("step").unwrap().sizes(), &[1]);

    let r = tessera(&["convert", "--allow-reshape", "--verbose", s, o]).expect(0);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "tessera convert: 2 0-d tensors written as shape [1] (--allow-reshape)",
            "  step",
            "  lr"
        ],
        "{}",
        r.stderr
    );
    // Formats that hold 0-d tensors: no change, nothing said.
    let r = tessera(&["convert", s, dir.path("o.pt").to_str().unwrap()]).expect(0);
    assert!(r.stderr.is_empty(), "{}", r.stderr);
}

/// The changes the other flags make are printed too, one line per kind.
#[test]
fn convert_prints_one_line_per_kind_of_change() {
    let dir = Scratch::new("changes-kinds");
    let src = scalars(&dir);
    let out = dir.path("o.npz");
    let r = tessera(&[
        "convert",
        "--drop-metadata",
        "-v",
        src.to_str().unwrap(),
        out.to_str().unwrap(),
    ])
    .expect(0);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "tessera convert: 1 metadata key dropped (--drop-metadata)",
            "  k"
        ],
        "{}",
        r.stderr
    );
}

/// A flipped byte in a torch storage record: `convert` and `ls` refuse it
/// (status 3) naming the file, the record and the CRCs, and write
/// nothing; `ls --no-crc` lists it as a mapped load does.
#[test]
fn convert_and_ls_refuse_a_damaged_record() {
    let dir = Scratch::new("changes-crc");
    let d = serialize::load(&weights(&dir), Format::Auto, LoadFlags::default()).unwrap();
    let pt = dir.path("model.pt");
    serialize::save(&d, &pt, Format::Torch).unwrap();
    let p = pt.to_str().unwrap();
    let out = dir.path("o.safetensors");
    tessera(&["convert", p, out.to_str().unwrap()]).expect(0);
    std::fs::remove_file(&out).unwrap();
    damage::flip_in_record(&pt, "data/0", 2);
    let before = dir.files();
    for args in [vec!["convert", p, out.to_str().unwrap()], vec!["ls", p]] {
        let r = tessera(&args).expect(3);
        assert!(
            r.stderr.contains(p)
                && r.stderr.contains("data/0'")
                && r.stderr.contains("CRC-32 0x")
                && r.stderr.contains("the archive says 0x"),
            "{args:?}: {}",
            r.stderr
        );
    }
    assert_eq!(dir.files(), before, "nothing written");
    tessera(&["ls", "--no-crc", p]).expect(0);
}

/// An output path that is a directory is named as one.
#[test]
fn convert_into_a_directory_says_it_is_one() {
    let dir = Scratch::new("changes-dir");
    let w = weights(&dir);
    let out = dir.path("out");
    std::fs::create_dir(&out).unwrap();
    for extra in [&[][..], &["--format", "torch"][..]] {
        let mut args = vec!["convert"];
        args.extend_from_slice(extra);
        args.extend([w.to_str().unwrap(), out.to_str().unwrap()]);
        let r = tessera(&args).expect(1);
        assert!(
            r.stderr.contains("is a directory") && !r.stderr.contains("extension"),
            "{}",
            r.stderr
        );
    }
}

/// A legacy torch file cut inside a storage: the message names the
/// tensors that needed the storage, not only its key.
#[test]
fn a_truncated_legacy_file_names_the_tensors_of_the_missing_storage() {
    let dir = Scratch::new("changes-legacy");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/torch_save/legacy_nested_checkpoint.pt");
    let bytes = std::fs::read(src).unwrap();
    let cut = dir.path("cut.pt");
    std::fs::write(&cut, &bytes[..bytes.len() - 2]).unwrap();
    let r = tessera(&["ls", cut.to_str().unwrap()]).expect(3);
    assert!(
        r.stderr.contains("truncated") && r.stderr.contains("it holds tensor 'ema.shadow.w'"),
        "{}",
        r.stderr
    );
}
