//! The `tessera` command (cli/): each command's output and exit status
//! (0 done, 1 different or invalid, 2 usage, 3 unreadable input), bad
//! input included: a missing file, a directory, a truncated or empty file,
//! an output path in a missing directory. Files are made here, by hand
//! (safetensors) or with the library. memory-view: tests/cli_memory_view.rs.

#[path = "common/cli.rs"]
mod cli;

use cli::{f32s, safetensors, tessera, weights, Scratch};
use serde_json::Value;
use std::path::Path;
use tessera::serialize::{self, Format, LoadFlags};

/// checkpoint.pt: `w` of weights.safetensors, its transpose `w_t` and
/// its second row `row`: three tensors on one storage (torch keeps it).
fn shared_checkpoint(dir: &Scratch) -> std::path::PathBuf {
    let d = serialize::load(&weights(dir), Format::Auto, LoadFlags::default()).unwrap();
    let w = d.get("w").unwrap().clone();
    let mut out = serialize::TensorDict::new();
    out.set("w", w.clone()).unwrap();
    out.set("w_t", w.transpose(0, 1).unwrap()).unwrap();
    out.set("row", w.select(0, 1).unwrap()).unwrap();
    let p = dir.path("checkpoint.pt");
    serialize::save(&out, &p, Format::Torch).unwrap();
    p
}

#[test]
fn help_of_every_command_says_what_it_does_in_one_screen() {
    let top = tessera(&["--help"]).expect(0);
    for cmd in ["ls", "convert", "diff", "verify", "memory-view"] {
        assert!(
            top.stdout.contains(cmd),
            "--help lists {cmd}:\n{}",
            top.stdout
        );
        let help = tessera(&[cmd, "--help"]).expect(0);
        let lines = help.stdout.lines().count();
        assert!(
            lines <= 45,
            "tessera {cmd} --help is {lines} lines, more than a screen:\n{}",
            help.stdout
        );
        assert!(help.stdout.contains("Usage: tessera"), "{}", help.stdout);
        assert!(help.stdout.contains("Example"), "{}", help.stdout);
    }
    let v = tessera(&["--version"]).expect(0);
    assert_eq!(v.stdout.trim(), format!("tessera {}", tessera::VERSION));
}

#[test]
fn usage_errors_exit_2() {
    let dir = Scratch::new("usage");
    let w = weights(&dir);
    let w = w.to_str().unwrap();
    let out = dir.path("x.dat");
    for args in [
        vec![],
        vec!["frobnicate"],
        vec!["ls"],
        vec!["convert", w],
        vec![
            "convert",
            w,
            dir.path("o.pt").to_str().unwrap(),
            "--format",
            "pickle",
        ],
        vec!["diff", w, w, "--rtol", "-1"],
        vec!["diff", w, w, "--atol", "nan"],
        vec!["memory-view", w],
        vec!["ls", "--no-such-option", w],
    ] {
        let r = tessera(&args).expect(2);
        assert!(!r.stderr.is_empty(), "{args:?} says why");
    }
    // An output whose extension names no format.
    let r = tessera(&["convert", w, out.to_str().unwrap()]).expect(2);
    assert!(
        r.stderr.contains("x.dat") && r.stderr.contains("--format"),
        "{}",
        r.stderr
    );
    assert!(!out.exists());
}

#[test]
fn ls_lists_names_dtypes_shapes_bytes_and_shared_storages() {
    let dir = Scratch::new("ls");
    let p = shared_checkpoint(&dir);
    let r = tessera(&["ls", p.to_str().unwrap()]).expect(0);
    let text = r.stdout;
    assert!(
        text.starts_with(&format!(
            "{}: torch, 3 tensors on 1 storage, 24 B\n",
            p.display()
        )),
        "{text}"
    );
    let rows: Vec<Vec<&str>> = text
        .lines()
        .skip(2)
        .take(3)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0], ["w", "Float", "[2,", "3]", "24", "B", "0"]);
    assert_eq!(rows[1], ["w_t", "Float", "[3,", "2]", "24", "B", "0"]);
    assert_eq!(rows[2], ["row", "Float", "[3]", "12", "B", "0"]);
    assert!(
        text.contains("storage 0 is shared by w, w_t, row"),
        "{text}"
    );

    let w = dir.path("weights.safetensors");
    let r = tessera(&["ls", w.to_str().unwrap()]).expect(0);
    assert!(
        r.stdout
            .contains("safetensors, 4 tensors on 4 storages, 48 B"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("  metadata:\n    step: 7\n"),
        "{}",
        r.stdout
    );
}

#[test]
fn ls_json_is_one_array_of_tensors() {
    let dir = Scratch::new("ls-json");
    let p = shared_checkpoint(&dir);
    let w = dir.path("weights.safetensors");
    let r = tessera(&["ls", "--json", p.to_str().unwrap(), w.to_str().unwrap()]).expect(0);
    let v: Value = serde_json::from_str(&r.stdout).expect("JSON");
    let all = v.as_array().expect("an array");
    assert_eq!(all.len(), 7);
    let by = |file: &Path, name: &str| {
        all.iter()
            .find(|o| o["name"] == name && o["file"] == file.display().to_string())
            .unwrap_or_else(|| panic!("{name} of {} listed", file.display()))
            .clone()
    };
    let wt = by(&p, "w_t");
    assert_eq!(wt["dtype"], "Float");
    assert_eq!(wt["shape"], serde_json::json!([3, 2]));
    assert_eq!(wt["strides"], serde_json::json!([1, 3]));
    assert_eq!(wt["format"], "torch");
    assert_eq!(wt["bytes"], 24);
    assert_eq!(by(&p, "row")["storage_offset"], 3);
    assert_eq!(by(&p, "row")["storage"], by(&p, "w")["storage"]);
    assert_eq!(by(&w, "steps")["shape"], serde_json::json!([]));
    assert_eq!(by(&w, "steps")["dtype"], "Long");
    assert_eq!(by(&w, "mask")["dtype"], "Bool");
    assert_ne!(by(&w, "b")["storage"], by(&w, "w")["storage"]);
}

/// A missing file, a directory, an empty, a truncated and a text file:
/// status 3, the file named, nothing on stdout; for every command that
/// reads tensor files.
#[test]
fn unreadable_inputs_exit_3_naming_the_file() {
    let dir = Scratch::new("unreadable");
    let good = shared_checkpoint(&dir);
    let bytes = std::fs::read(&good).unwrap();
    let truncated = dir.path("truncated.pt");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let empty = dir.path("empty.safetensors");
    std::fs::write(&empty, b"").unwrap();
    let text = dir.path("notes.txt");
    std::fs::write(&text, b"these are not tensors\n").unwrap();
    let missing = dir.path("missing.pt");
    // The OS's own words for a missing file: strerror's on Unix; on
    // Windows its error code (the system's message differs between
    // Windows and Wine: "The system cannot find the file specified.",
    // "File not found.").
    let no_such_file = if cfg!(windows) {
        "(os error 2)"
    } else {
        "No such file"
    };
    let cases = [
        (missing.clone(), no_such_file),
        (dir.0.clone(), "directory"),
        (empty.clone(), "empty"),
        (truncated.clone(), "zip"),
        (text.clone(), "none of the formats"),
    ];
    let good = good.to_str().unwrap();
    let out = dir.path("out.safetensors");
    for (bad, why) in &cases {
        let bad = bad.to_str().unwrap();
        for args in [
            vec!["ls", bad],
            vec!["ls", "--json", good, bad],
            vec!["convert", bad, out.to_str().unwrap()],
            vec!["diff", good, bad],
            vec!["diff", bad, good],
        ] {
            let r = tessera(&args).expect(3);
            assert!(
                r.stdout.is_empty(),
                "{args:?}: nothing on stdout: {}",
                r.stdout
            );
            assert!(
                r.stderr.contains(bad) && r.stderr.contains(why),
                "{args:?}: names {bad} and says '{why}': {}",
                r.stderr
            );
            assert_eq!(r.stderr.lines().count(), 1, "one line: {}", r.stderr);
        }
    }
    assert!(!out.exists(), "a failed convert writes nothing");
    // verify: 3 when the file cannot be opened, 1 when it opens but is not
    // a valid tensor file.
    for (bad, code) in [
        (&missing, 3),
        (&dir.0, 3),
        (&empty, 1),
        (&truncated, 1),
        (&text, 1),
    ] {
        let r = tessera(&["verify", bad.to_str().unwrap()]).expect(code);
        assert!(r.stderr.contains(bad.to_str().unwrap()), "{}", r.stderr);
    }
}

#[test]
fn convert_through_every_written_format_and_back_is_equal() {
    let dir = Scratch::new("convert");
    let src = dir.path("src.safetensors");
    safetensors(
        &src,
        &[
            (
                "layer.weight",
                "F32",
                &[2, 3],
                f32s(&[1.5, -2.0, 3.25, 0.0, -0.0, 6.0e-8]),
            ),
            (
                "layer.bias",
                "F32",
                &[3],
                f32s(&[f32::MAX, f32::MIN_POSITIVE, -1.0]),
            ),
            (
                "count",
                "I64",
                &[2],
                [3i64, -4].iter().flat_map(|x| x.to_le_bytes()).collect(),
            ),
        ],
        &[],
    );
    let mut prev = src.clone();
    for ext in ["pt", "gguf", "npz", "safetensors", "pth"] {
        let next = dir.path(&format!("step.{ext}"));
        let r = tessera(&["convert", prev.to_str().unwrap(), next.to_str().unwrap()]).expect(0);
        assert!(r.stdout.contains("3 tensors"), "{}", r.stdout);
        assert!(
            r.stderr.is_empty(),
            "no progress or notes on a pipe: {}",
            r.stderr
        );
        let d = tessera(&["diff", src.to_str().unwrap(), next.to_str().unwrap()]).expect(0);
        assert!(
            d.stdout.starts_with("equal: 3 tensors in both"),
            "{}",
            d.stdout
        );
        prev = next;
    }
    // --format overrides the extension; --quiet prints nothing.
    let odd = dir.path("weights.bin2");
    let r = tessera(&[
        "convert",
        "--quiet",
        "--format",
        "safetensors",
        src.to_str().unwrap(),
        odd.to_str().unwrap(),
    ])
    .expect(0);
    assert!(r.stdout.is_empty() && r.stderr.is_empty());
    let back = serialize::load_as(&odd, Format::Auto, LoadFlags::default()).unwrap();
    assert_eq!(back.0, Format::Safetensors);
}

/// What the output format cannot hold is refused in one line naming it,
/// with status 1, and nothing is written; a file already there is kept.
#[test]
fn convert_refusals_name_the_reason_and_write_nothing() {
    let dir = Scratch::new("refusals");
    let w = weights(&dir);
    let ckpt = shared_checkpoint(&dir);
    let existing = dir.path("kept.npz");
    std::fs::write(&existing, b"an older file").unwrap();
    let cases: [(&Path, &str, &str); 5] = [
        (&w, "kept.npz", "metadata"), // npz holds no metadata
        (&w, "w.npy", "one array"),   // npy holds one tensor
        (&w, "w.gguf", "Bool"),       // GGUF has no bool type
        (&ckpt, "c.safetensors", "share memory"),
        (&w, "nowhere/w.pt", "does not exist"),
    ];
    for (input, out, why) in cases {
        let before = dir.files();
        // w.gguf: its 0-d 'steps' allowed as [1], the Bool is refused.
        let allow = if out.ends_with(".gguf") {
            "--allow-reshape"
        } else {
            "--quiet"
        };
        let r = tessera(&[
            "convert",
            allow,
            input.to_str().unwrap(),
            dir.path(out).to_str().unwrap(),
        ])
        .expect(1);
        assert!(r.stderr.contains(why), "{out}: says '{why}': {}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
        assert_eq!(
            dir.files(),
            before,
            "{out}: nothing written, nothing left behind"
        );
    }
    assert_eq!(std::fs::read(&existing).unwrap(), b"an older file");
    // The hints name the options that convert anyway.
    let r = tessera(&["convert", w.to_str().unwrap(), existing.to_str().unwrap()]).expect(1);
    assert!(r.stderr.contains("--drop-metadata"), "{}", r.stderr);
    let c = dir.path("c.safetensors");
    let r = tessera(&["convert", ckpt.to_str().unwrap(), c.to_str().unwrap()]).expect(1);
    assert!(r.stderr.contains("--copy-shared"), "{}", r.stderr);
    tessera(&[
        "convert",
        "--copy-shared",
        ckpt.to_str().unwrap(),
        c.to_str().unwrap(),
    ])
    .expect(0);
    tessera(&["diff", ckpt.to_str().unwrap(), c.to_str().unwrap()]).expect(0);
    let npz = dir.path("w.npz");
    tessera(&[
        "convert",
        "--drop-metadata",
        w.to_str().unwrap(),
        npz.to_str().unwrap(),
    ])
    .expect(0);
    let d = serialize::load(&npz, Format::Auto, LoadFlags::default()).unwrap();
    assert_eq!(d.len(), 4);
    assert_eq!(d.metadata_iter().count(), 0);
}

#[test]
fn diff_names_every_difference_and_exits_1() {
    let dir = Scratch::new("diff");
    let a = dir.path("a.safetensors");
    let b = dir.path("b.safetensors");
    safetensors(
        &a,
        &[
            ("same", "F32", &[2], f32s(&[1.0, 2.0])),
            ("values", "F32", &[2, 2], f32s(&[1.0, 2.0, 3.0, 4.0])),
            ("dtype", "F32", &[1], f32s(&[1.0])),
            ("shape", "F32", &[2], f32s(&[1.0, 2.0])),
            ("only_a", "F32", &[1], f32s(&[0.0])),
            ("nan", "F32", &[2], f32s(&[f32::NAN, -0.0])),
        ],
        &[],
    );
    safetensors(
        &b,
        &[
            ("same", "F32", &[2], f32s(&[1.0, 2.0])),
            ("values", "F32", &[2, 2], f32s(&[1.0, 2.0, 3.0, 4.5])),
            ("dtype", "F64", &[1], 1.0f64.to_le_bytes().to_vec()),
            ("shape", "F32", &[1, 2], f32s(&[1.0, 2.0])),
            ("only_b", "F32", &[1], f32s(&[0.0])),
            ("nan", "F32", &[2], f32s(&[f32::NAN, 0.0])),
        ],
        &[],
    );
    let (pa, pb) = (a.to_str().unwrap(), b.to_str().unwrap());
    let r = tessera(&["diff", pa, pb]).expect(1);
    let out = r.stdout;
    let line = |name: &str| {
        out.lines()
            .find(|l| l.starts_with(&format!("{name}: ")))
            .unwrap_or_else(|| panic!("a line for {name}:\n{out}"))
            .to_owned()
    };
    assert_eq!(
        line("values"),
        "values: 1 of 4 elements differ; largest |a - b| 0.5 at [1, 1] (a 4, b 4.5), \
         largest |a - b| / |b| 0.111111 at [1, 1]"
    );
    assert_eq!(line("dtype"), "dtype: dtype Float in a, Double in b");
    assert_eq!(line("shape"), "shape: shape [2] in a, [1, 2] in b");
    assert_eq!(line("only_a"), format!("only_a: only in {pa}"));
    assert_eq!(line("only_b"), format!("only_b: only in {pb}"));
    assert!(
        !out.contains("same:") && !out.contains("nan:"),
        "equal tensors are not listed:\n{out}"
    );
    assert!(
        out.ends_with(&format!(
            "different: 5 tensors in both (2 equal, 3 differ), 1 only in {pa}, 1 only in {pb}\n"
        )),
        "{out}"
    );
    // Within a tolerance the values are equal (the rest still differs).
    let r = tessera(&["diff", "--atol", "0.5", pa, pb]).expect(1);
    assert!(
        r.stdout
            .contains("values: equal within the tolerance; largest |a - b| 0.5"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("(3 equal, 2 differ)"), "{}", r.stdout);
    let r = tessera(&["diff", "--quiet", pa, pb]).expect(1);
    assert!(r.stdout.is_empty() && r.stderr.is_empty());
    tessera(&["diff", pa, pa]).expect(0);
}

/// Flips one byte in the data of record `archive/data/0` of a torch file
/// (found by its local header: the data follows the name and the extra
/// field).
fn damage_first_record(path: &Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let name = b"archive/data/0";
    let mut h = 0;
    let data = loop {
        h += bytes[h..]
            .windows(4)
            .position(|w| w == b"PK\x03\x04")
            .expect("a local header named archive/data/0");
        let n = u16::from_le_bytes([bytes[h + 26], bytes[h + 27]]) as usize;
        let e = u16::from_le_bytes([bytes[h + 28], bytes[h + 29]]) as usize;
        if &bytes[h + 30..h + 30 + n] == name {
            break h + 30 + n + e;
        }
        h += 4;
    };
    bytes[data + 5] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn verify_reads_every_record_and_checks_crcs_and_bools() {
    let dir = Scratch::new("verify");
    let ckpt = shared_checkpoint(&dir);
    let w = dir.path("weights.safetensors");
    let r = tessera(&["verify", ckpt.to_str().unwrap(), w.to_str().unwrap()]).expect(0);
    assert!(
        r.stdout.contains(&format!(
            "ok: {}: torch, 3 tensors on 1 storage, ",
            ckpt.display()
        )),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("records CRC-checked"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "ok: {}: safetensors, 4 tensors on 4 storages",
            w.display()
        )),
        "{}",
        r.stdout
    );
    // A damaged byte lists without the CRC check (a mapped load reads no
    // record) but does not verify.
    damage_first_record(&ckpt);
    tessera(&["ls", "--no-crc", ckpt.to_str().unwrap()]).expect(0);
    let r = tessera(&["verify", ckpt.to_str().unwrap()]).expect(1);
    assert!(
        r.stderr.contains("record 'archive/data/0'") && r.stderr.contains("CRC-32"),
        "{}",
        r.stderr
    );
    // A bool holding 2.
    let bad = dir.path("bad_bool.safetensors");
    safetensors(&bad, &[("mask", "BOOL", &[3], vec![1, 2, 0])], &[]);
    let r = tessera(&["verify", bad.to_str().unwrap()]).expect(1);
    assert!(
        r.stderr
            .contains("tensor 'mask' (Bool): element 1 holds the byte 2"),
        "{}",
        r.stderr
    );
}

/// `convert --shard-size`: Hugging Face shards and their index, in
/// safetensors and torch; the index loads back equal (also as a convert
/// input); a size of 0 or no number is a usage error.
#[test]
fn convert_writes_shards_and_reads_them_back() {
    let dir = Scratch::new("shards");
    let src = weights(&dir);
    let total: u64 = serialize::load(&src, Format::Auto, LoadFlags::default())
        .unwrap()
        .iter()
        .map(|(_, t)| (t.numel() as usize * t.dtype().itemsize()) as u64)
        .sum();
    for (format, index) in [
        ("safetensors", "model.safetensors.index.json"),
        ("torch", "pytorch_model.bin.index.json"),
    ] {
        let out = dir.path(&format!("sharded-{format}"));
        let limit = (total / 2).max(1).to_string();
        tessera(&[
            "convert",
            "--shard-size",
            &limit,
            "--format",
            format,
            src.to_str().unwrap(),
            out.to_str().unwrap(),
        ])
        .expect(0);
        let index = out.join(index);
        assert!(index.exists(), "{format}: no index");
        let shards = std::fs::read_dir(&out).unwrap().count() - 1;
        assert!(
            shards >= 2,
            "{format}: {shards} shard(s) for half the bytes each"
        );
        tessera(&["diff", src.to_str().unwrap(), index.to_str().unwrap()]).expect(0);
        let back = dir.path(&format!("back-{format}.safetensors"));
        tessera(&["convert", index.to_str().unwrap(), back.to_str().unwrap()]).expect(0);
        tessera(&["diff", src.to_str().unwrap(), back.to_str().unwrap()]).expect(0);
    }
    for bad in ["0", "lots", "5XB"] {
        let r = tessera(&[
            "convert",
            "--shard-size",
            bad,
            src.to_str().unwrap(),
            dir.path("x").to_str().unwrap(),
        ]);
        r.expect(2);
    }
}
