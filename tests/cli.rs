//! The `tessera` command (cli/): each command's output and exit status
//! (0 done, 1 different or invalid, 2 usage, 3 unreadable input), bad
//! input included: a missing file, a directory, a truncated or empty file,
//! an output path in a missing directory. Files are made here, by hand
//! (safetensors) or with the library.

#[path = "common/cli.rs"]
mod cli;

use cli::{tessera, Scratch};
use serde_json::Value;
use std::path::Path;
use tessera::serialize::{self, Format, LoadFlags};

/// A safetensors file, written byte by byte: (name, dtype, shape, data)
/// and metadata.
fn safetensors(path: &Path, tensors: &[(&str, &str, &[u64], Vec<u8>)], meta: &[(&str, &str)]) {
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

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// weights.safetensors: w [2, 3] float, b [3] float, steps [] int64,
/// mask [4] bool; metadata {"step": "7"}.
fn weights(dir: &Scratch) -> std::path::PathBuf {
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
    let cases = [
        (missing.clone(), "No such file"),
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
        let r = tessera(&[
            "convert",
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
    // A damaged byte loads (a load reads no CRC) but does not verify.
    damage_first_record(&ckpt);
    tessera(&["ls", ckpt.to_str().unwrap()]).expect(0);
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

fn snapshot_of(page: &str) -> Value {
    let start = page
        .find(r#"<script type="application/json" id="snapshot""#)
        .expect("a snapshot block");
    let open = start + page[start..].find('>').unwrap() + 1;
    let close = open + page[open..].find("</script>").unwrap();
    serde_json::from_str(&page[open..close]).expect("the embedded snapshot is JSON")
}

#[test]
fn memory_view_embeds_a_json_snapshot() {
    let dir = Scratch::new("memory-view");
    let snap = dir.path("snap.json");
    let json = r#"{"format": "tessera-memory-snapshot", "version": 1, "process": {"pid": 1},
        "taken": {"unix_time_ms": 0, "time_ns": 10},
        "history": {"recording": true, "max_entries": 4, "backtraces": false, "recorded": 1, "dropped": 0},
        "allocators": [{"name": "cpu</script>", "device": {"type": 0, "index": -1}, "kind": "cpu",
            "stats": {"allocated_bytes": 64, "peak_bytes": 64, "num_allocs": 1, "num_frees": 0, "num_failed": 0},
            "blocks": [{"addr": "0x1000", "size": 64}]}],
        "frames": [],
        "events": [{"action": "alloc", "allocator": "cpu</script>", "device": {"type": 0, "index": -1},
            "addr": "0x1000", "size": 64, "time_ns": 5}]}"#;
    std::fs::write(&snap, json).unwrap();
    let page = dir.path("page.html");
    tessera(&[
        "memory-view",
        snap.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ])
    .expect(0);
    let html = std::fs::read_to_string(&page).unwrap();
    let viewer = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/memory_viewer.html"
    ))
    .unwrap();
    assert!(html.starts_with(&viewer[..200]), "the viewer page");
    assert_eq!(
        html.matches("</script>").count(),
        viewer.matches("</script>").count()
    );
    assert!(html.contains(r#"data-source="snap.json""#));
    let embedded = snapshot_of(&html);
    let original: Value = serde_json::from_str(json).unwrap();
    assert_eq!(embedded, original);
    assert_eq!(dir.files(), ["page.html", "snap.json"]);
}

#[test]
fn memory_view_reads_pytorch_snapshots() {
    let dir = Scratch::new("memory-view-torch");
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/memory_snapshot");
    let page = dir.path("cuda.html");
    let src = data.join("torch_cuda_layout.pickle");
    tessera(&[
        "memory-view",
        src.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ])
    .expect(0);
    let s = snapshot_of(&std::fs::read_to_string(&page).unwrap());
    assert_eq!(s["format"], "tessera-memory-snapshot");
    let allocs = s["allocators"].as_array().unwrap();
    assert_eq!(allocs.len(), 2, "one allocator per device");
    assert_eq!(
        allocs[0]["device"],
        serde_json::json!({"type": 1, "index": 0})
    );
    assert_eq!(
        allocs[1]["device"],
        serde_json::json!({"type": 1, "index": 1})
    );
    // Device 0: 1 MiB allocated and 500 B (a 512-byte block) pending free,
    // still live; the peak is before the 1024-byte block was freed. Live
    // blocks count the bytes asked for, as the trace does; segment blocks
    // the rounded size.
    assert_eq!(allocs[0]["stats"]["allocated_bytes"], (1 << 20) + 500);
    assert_eq!(allocs[0]["stats"]["peak_bytes"], (1 << 20) + 500 + 1024);
    assert_eq!(allocs[0]["blocks"][1]["size"], 500);
    let seg0 = &allocs[0]["segments"][0]["blocks"][1];
    assert_eq!(
        (&seg0["size"], &seg0["requested"]),
        (&512.into(), &500.into())
    );
    assert_eq!(allocs[0]["stats"]["num_failed"], 1);
    assert_eq!(allocs[0]["segments"][0]["blocks"][2]["state"], "free");
    // Before PyTorch 2.1 a block's requested size and frames were under
    // "history".
    assert_eq!(allocs[1]["blocks"][0]["size"], 4000);
    assert!(allocs[1]["blocks"][0]["stack"].is_array());
    let events = s["events"].as_array().unwrap();
    let actions: Vec<&str> = events
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "segment_alloc",
            "alloc",
            "alloc",
            "alloc",
            "alloc",
            "free",
            "oom"
        ],
        "free_requested and snapshot entries left out, devices merged by time"
    );
    let times: Vec<u64> = events
        .iter()
        .map(|e| e["time_ns"].as_u64().unwrap())
        .collect();
    assert_eq!(times, [0, 10_000, 20_000, 25_000, 30_000, 41_000, 60_000]);
    assert_eq!(s["taken"]["unix_time_ms"], 1_790_000_000_000u64);
    let f0 = &s["frames"][events[0]["stack"][0].as_u64().unwrap() as usize];
    assert_eq!(
        f0,
        &serde_json::json!({"function": "load_weights", "file": "train.py", "line": 8})
    );

    // Written by PyTorch itself (torch.profiler, _profile_to_snapshot):
    // blocks without addresses, a trace without times.
    let src = data.join("torch_profile.pickle");
    let page = dir.path("profile.html");
    tessera(&[
        "memory-view",
        src.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ])
    .expect(0);
    let s = snapshot_of(&std::fs::read_to_string(&page).unwrap());
    let a = &s["allocators"][0];
    let seg = &a["segments"][0];
    let blocks = seg["blocks"].as_array().unwrap();
    let total: u64 = blocks.iter().map(|b| b["size"].as_u64().unwrap()).sum();
    assert_eq!(
        total,
        seg["size"].as_u64().unwrap(),
        "the blocks tile the segment"
    );
    let live: u64 = a["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["size"].as_u64().unwrap())
        .sum();
    assert_eq!(live, a["stats"]["allocated_bytes"].as_u64().unwrap());
    assert!(a["stats"]["num_allocs"].as_u64().unwrap() > 10);
    let times: Vec<u64> = s["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["time_ns"].as_u64().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] < w[1]),
        "positions as times, increasing"
    );
}

#[test]
fn memory_view_refuses_what_is_not_a_snapshot() {
    let dir = Scratch::new("memory-view-bad");
    let page = dir.path("page.html");
    let weights = weights(&dir);
    let other_json = dir.path("other.json");
    std::fs::write(&other_json, r#"{"format": "something else"}"#).unwrap();
    let truncated = dir.path("truncated.pickle");
    let pickle = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/memory_snapshot/torch_cuda_layout.pickle"),
    )
    .unwrap();
    std::fs::write(&truncated, &pickle[..pickle.len() / 2]).unwrap();
    for (input, why) in [
        (dir.path("missing.json"), "cannot open"),
        (dir.0.clone(), "not a regular file"),
        (weights, "neither"),
        (other_json, "\"something else\""),
        (truncated, "pickle"),
    ] {
        let r = tessera(&[
            "memory-view",
            input.to_str().unwrap(),
            "-o",
            page.to_str().unwrap(),
        ])
        .expect(3);
        assert!(
            r.stderr.contains(input.to_str().unwrap()) && r.stderr.contains(why),
            "{}: says '{why}': {}",
            input.display(),
            r.stderr
        );
    }
    assert!(!page.exists());
    // An output in a missing directory: status 1, nothing written.
    let snap = dir.path("ok.pickle");
    std::fs::write(&snap, &pickle).unwrap();
    let nowhere = dir.path("nowhere/page.html");
    let r = tessera(&[
        "memory-view",
        snap.to_str().unwrap(),
        "-o",
        nowhere.to_str().unwrap(),
    ])
    .expect(1);
    assert!(r.stderr.contains("nowhere/page.html"), "{}", r.stderr);
}
