//! Non-tensor values (issue 68, item 2): a training checkpoint's
//! `global_step`, `config_dict`, `hidden_dims` load as typed values (JSON
//! per dotted name), save into torch (as the Python values), safetensors
//! (a JSON object under `tessera.values`) and GGUF (typed keys
//! `tessera.values.NAME`, the rest under `tessera.values`), and read back
//! the same, by tessera and by torch / safetensors / gguf-py.
//!
//! The fixture tests/data/values/checkpoint.pt is torch.save's
//! (scripts/make_values_fixtures.py). The Python checks run the
//! interpreter named by TESSERA_PYTHON, else /work/venv-torch/bin/python,
//! else python3; without torch, safetensors and gguf there they print a
//! SKIP line and pass.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera::serialize::{self, Format, LoadFlags, TensorDict, SKIPPED_KEY};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/values/checkpoint.pt")
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("values-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

fn load(path: &Path) -> TensorDict {
    let flags = LoadFlags {
        skip_unknown: true,
        ..LoadFlags::default()
    };
    serialize::load(path, Format::Auto, flags).expect("loads")
}

/// The values the fixture holds, as tessera keeps them.
fn expected() -> Vec<(&'static str, Value)> {
    vec![
        ("global_step", json!(1234)),
        ("lr", json!(0.001)),
        ("name", json!("run-7")),
        ("done", json!(false)),
        ("note", Value::Null),
        ("hidden_dims", json!([64, 128, 256])),
        ("shape", json!([3, 4])),
        (
            "config_dict",
            json!({"n_layers": 4, "act": "gelu", "dropout": 0.1, "tied": true, "sizes": [1, 2]}),
        ),
        ("mixed", json!([1, "a", 2.5])),
        ("empty", json!([])),
        ("state.epoch", json!(3)),
    ]
}

fn values(d: &TensorDict) -> Vec<(String, Value)> {
    let mut v: Vec<(String, Value)> = d
        .values_iter()
        .map(|(n, v)| (n.to_owned(), v.clone()))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn sorted(v: Vec<(&str, Value)>) -> Vec<(String, Value)> {
    let mut v: Vec<(String, Value)> = v.into_iter().map(|(n, v)| (n.to_owned(), v)).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn torch_save_values_load_as_typed_values() {
    let d = load(&fixture());
    assert_eq!(values(&d), sorted(expected()));
    // Integers stay integers, floats floats.
    assert!(d.value("global_step").unwrap().is_i64());
    assert!(d.value("lr").unwrap().is_f64());
    assert_eq!(d.len(), 2, "tensors model.w and state.buf");
    let skipped = d.metadata(SKIPPED_KEY).expect("a skipped list");
    let lines: Vec<&str> = skipped.lines().collect();
    // What JSON cannot hold stays skipped, naming why.
    assert!(
        lines.iter().any(|l| l.starts_with("nan (a float NaN")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("args (argparse.Namespace")),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"deep (a value nested more than 32 deep: not kept)"),
        "{lines:?}"
    );
    for (name, _) in expected() {
        assert!(
            !lines.iter().any(|l| l.split(' ').next() == Some(name)),
            "{name} is kept, not skipped: {lines:?}"
        );
    }
}

#[test]
fn values_round_trip_through_torch_safetensors_and_gguf() {
    let d = load(&fixture());
    let dir = scratch("round-trip");
    for (format, file) in [
        (Format::Torch, "out.pt"),
        (Format::Safetensors, "out.safetensors"),
        (Format::Gguf, "out.gguf"),
    ] {
        let path = dir.join(file);
        serialize::save(&d, &path, format).expect("saves");
        let back = load(&path);
        assert_eq!(values(&back), sorted(expected()), "{file}");
        // In the dict's order (GGUF: the typed keys', then the rest's).
        let order = |d: &TensorDict| -> Vec<String> {
            d.values_iter().map(|(n, _)| n.to_owned()).collect()
        };
        let mut want = order(&d);
        if format == Format::Gguf {
            let typed = ["note", "config_dict", "mixed", "empty"];
            want.sort_by_key(|n| typed.contains(&n.as_str()));
        }
        assert_eq!(order(&back), want, "{file}");
        assert!(back.value("global_step").unwrap().is_i64(), "{file}");
        assert!(back.value("lr").unwrap().is_f64(), "{file}");
        // The load's skipped list is not the new file's.
        assert_eq!(back.metadata(SKIPPED_KEY), None, "{file}");
        assert_eq!(back.metadata(serialize::VALUES_KEY), None, "{file}");
    }
}

/// Shards (values in the first shard, gathered by the index's load) and
/// a checkpoint opened for loading in parts (values with its dict).
#[test]
fn values_through_shards_and_checkpoints() {
    let d = load(&fixture());
    let dir = scratch("shards");
    for format in [Format::Safetensors, Format::Torch] {
        let out = dir.join(format.name());
        let index = serialize::save_sharded(&d, &out, format, 16, serialize::SaveFlags::default())
            .expect("saves shards");
        assert_eq!(values(&load(&index)), sorted(expected()), "{index:?}");
    }
    for file in ["out.safetensors", "out.pt"] {
        let path = dir.join(file);
        serialize::save(&d, &path, Format::Auto).unwrap();
        let ckpt = serialize::Checkpoint::open(&path, Format::Auto, LoadFlags::default()).unwrap();
        let back = ckpt
            .load_many(None, tessera::Device::CPU, Default::default())
            .unwrap();
        assert_eq!(values(&back), sorted(expected()), "{file}");
    }
}

#[test]
fn formats_without_metadata_refuse_values_naming_them() {
    let mut d = TensorDict::new();
    d.set(
        "w",
        tessera::Tensor::empty(&[2], tessera::DType::Float, tessera::Device::CPU).unwrap(),
    )
    .unwrap();
    d.set_value("global_step", json!(5)).unwrap();
    let dir = scratch("refuse");
    let e = serialize::save(&d, &dir.join("a.npz"), Format::Npz).unwrap_err();
    assert!(
        e.message().contains("1 metadata keys or values"),
        "{}",
        e.message()
    );
}

#[test]
fn values_are_bounded() {
    let mut d = TensorDict::new();
    let mut deep = json!(1);
    for _ in 0..33 {
        deep = json!([deep]);
    }
    let e = d.set_value("deep", deep).unwrap_err();
    assert!(
        e.message().contains("'deep' is nested 33 deep"),
        "{}",
        e.message()
    );
    let long = json!("x".repeat(serialize::MAX_VALUE_BYTES));
    let e = d.set_value("long", long).unwrap_err();
    assert!(
        e.message().contains("bytes of JSON: expected at most"),
        "{}",
        e.message()
    );
    d.set(
        "t",
        tessera::Tensor::empty(&[1], tessera::DType::Float, tessera::Device::CPU).unwrap(),
    )
    .unwrap();
    let e = d.set_value("t", json!(1)).unwrap_err();
    assert!(
        e.message().contains("a tensor has this name"),
        "{}",
        e.message()
    );
    assert_eq!(d.value_count(), 0);
}

/// The Python interpreter for the checks, if it has torch, safetensors and
/// gguf.
fn python() -> Option<String> {
    let candidates = [
        std::env::var("TESSERA_PYTHON").ok(),
        Some("/work/venv-torch/bin/python".to_owned()),
        Some("python3".to_owned()),
    ];
    for p in candidates.into_iter().flatten() {
        let ok = Command::new(&p)
            .args(["-c", "import torch, safetensors, gguf"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(p);
        }
    }
    eprintln!("SKIP: no Python with torch, safetensors and gguf (set TESSERA_PYTHON)");
    None
}

/// What Python reads from tessera's saves, as JSON: torch.load (with
/// weights_only: plain Python values only), safetensors' metadata and
/// gguf-py's fields.
const READ_BACK: &str = r#"
import json, sys, torch
from safetensors import safe_open
from gguf import GGUFReader, GGUFValueType
d = sys.argv[1]
t = torch.load(d + "/out.pt", weights_only=True)
pt = {k: v for k, v in t.items() if not isinstance(v, torch.Tensor)}
types = {k: type(v).__name__ for k, v in pt.items()}
with safe_open(d + "/out.safetensors", "pt") as f:
    st = json.loads(f.metadata()["tessera.values"])
r = GGUFReader(d + "/out.gguf")
gg = {}
for name, field in r.fields.items():
    if name.startswith("tessera.values."):
        gg[name[len("tessera.values."):]] = [field.types[0].name, field.contents()]
rest = json.loads(r.fields["tessera.values"].contents())
print(json.dumps({"torch": pt, "torch_types": types, "safetensors": st, "gguf": gg, "gguf_rest": rest}))
"#;

#[test]
fn tessera_saves_read_back_by_torch_safetensors_and_gguf_py() {
    let Some(py) = python() else { return };
    let d = load(&fixture());
    let dir = scratch("python");
    serialize::save(&d, &dir.join("out.pt"), Format::Torch).unwrap();
    serialize::save(&d, &dir.join("out.safetensors"), Format::Safetensors).unwrap();
    serialize::save(&d, &dir.join("out.gguf"), Format::Gguf).unwrap();
    let out = Command::new(&py)
        .args(["-c", READ_BACK, dir.to_str().unwrap()])
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let want: serde_json::Map<String, Value> = expected()
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v))
        .collect();
    assert_eq!(got["torch"], Value::Object(want.clone()));
    assert_eq!(got["torch_types"]["global_step"], "int");
    assert_eq!(got["torch_types"]["lr"], "float");
    assert_eq!(got["torch_types"]["config_dict"], "dict");
    assert_eq!(got["torch_types"]["note"], "NoneType");
    assert_eq!(got["safetensors"], Value::Object(want.clone()));
    // GGUF: typed keys where the value is a scalar or a homogeneous array.
    assert_eq!(got["gguf"]["global_step"], json!(["INT64", 1234]));
    assert_eq!(got["gguf"]["lr"], json!(["FLOAT64", 0.001]));
    assert_eq!(got["gguf"]["name"], json!(["STRING", "run-7"]));
    assert_eq!(got["gguf"]["done"], json!(["BOOL", false]));
    assert_eq!(got["gguf"]["hidden_dims"], json!(["ARRAY", [64, 128, 256]]));
    assert_eq!(got["gguf"]["state.epoch"], json!(["INT64", 3]));
    assert_eq!(
        got["gguf_rest"],
        json!({
            "note": null,
            "config_dict": want["config_dict"],
            "mixed": [1, "a", 2.5],
            "empty": [],
        })
    );
}
