//! Files written by Python's torch.save (PyTorch 2.15) load in tessera.
//!
//! tests/data/torch_save/ holds the files and, beside each, what torch
//! itself reads back from it (scripts/make_torch_fixtures.py wrote both):
//! every tensor's name, dtype, sizes, strides, storage offset, storage
//! group and bytes, and the names of the non-tensor values. Each file is
//! loaded by copy and by mapping (TSR_LOAD_MMAP) and compared field by
//! field (tests/common/torch_expected.rs); tensors torch shows sharing a
//! storage share one in tessera.

#[path = "common/torch_expected.rs"]
mod torch_expected;

use std::path::{Path, PathBuf};
use tessera::serialize::{self, Format, LoadFlags, TensorDict};
use tessera::Storage;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/torch_save")
}

fn check(name: &str, dict: &TensorDict, how: &str) {
    let expected = torch_expected::read(&data_dir(), name);
    torch_expected::check(&expected, &format!("{name} ({how})"), dict);
}

fn load_both_ways(name: &str) {
    load_with(name, false);
}

/// Loads the fixture by copy and mapped, detected and named, and checks it.
fn load_with(name: &str, skip_unknown: bool) {
    let path = data_dir().join(format!("{name}.pt"));
    let named = if name.starts_with("legacy_") {
        Format::TorchLegacy
    } else if name.starts_with("torchscript_") {
        Format::TorchScript
    } else {
        Format::Torch
    };
    let head = std::fs::read(&path).unwrap();
    assert_eq!(serialize::detect(&head).unwrap(), named, "{name}");
    for (how, mmap) in [("copy", false), ("mmap", true)] {
        for format in [Format::Auto, named] {
            let flags = LoadFlags {
                mmap,
                skip_unknown,
                ..Default::default()
            };
            let dict = serialize::load(&path, format, flags).unwrap();
            check(name, &dict, how);
        }
    }
}

#[test]
fn module_state_dict_with_parameters() {
    load_both_ways("module_parameters");
}

#[test]
fn ordered_dict_with_views_sharing_a_storage() {
    load_both_ways("ordered_dict");
}

#[test]
fn nested_checkpoint_with_non_tensor_values() {
    load_both_ways("nested_checkpoint");
}

// The same three, saved in torch.save's legacy format
// (_use_new_zipfile_serialization=False: the only format before PyTorch
// 1.6, and what many published weight files still are).

#[test]
fn legacy_module_state_dict_with_parameters() {
    load_both_ways("legacy_module_parameters");
}

#[test]
fn legacy_ordered_dict_with_views_sharing_a_storage() {
    load_both_ways("legacy_ordered_dict");
}

#[test]
fn legacy_nested_checkpoint_with_non_tensor_values() {
    load_both_ways("legacy_nested_checkpoint");
}

/// Every truncation of a legacy file is refused as a format error (never
/// a crash), and saving in the legacy format is refused by name.
#[test]
fn legacy_truncations_are_refused_and_saving_is_unsupported() {
    let bytes = std::fs::read(data_dir().join("legacy_ordered_dict.pt")).unwrap();
    for len in (0..bytes.len()).step_by(7) {
        let s = Storage::new(len, tessera::Device::CPU, true).unwrap();
        if len > 0 {
            // SAFETY: s is a fresh CPU storage of len bytes.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), s.data() as *mut u8, len) };
        }
        let e = serialize::load_from_storage(&s, Format::TorchLegacy).unwrap_err();
        assert_eq!(e.kind(), tessera::ErrorKind::Format, "{len}: {e}");
    }
    let d = serialize::load(
        &data_dir().join("legacy_ordered_dict.pt"),
        Format::Auto,
        LoadFlags::default(),
    )
    .unwrap();
    let e = serialize::save_to_bytes(&d, Format::TorchLegacy).unwrap_err();
    assert!(e.message().contains("read only"), "{e}");
}

/// A module scripted and saved by torch.jit.save: its tensors, named by
/// attribute path, equal to its state dict as torch reads it back.
#[test]
fn torchscript_module_by_attribute_path() {
    load_both_ways("torchscript_module");
    let d = serialize::load(
        &data_dir().join("torchscript_module.pt"),
        Format::Auto,
        LoadFlags::default(),
    )
    .unwrap();
    // The module's `training` flag (false: saved in eval mode, as torch.jit.load
    // gives it) is a value now (issue 68), not skipped.
    assert_eq!(d.value("training"), Some(&serde_json::json!(false)));
    let skipped = d.metadata(serialize::SKIPPED_KEY).unwrap_or("");
    assert!(!skipped.lines().any(|l| l == "training"), "{skipped}");
    let e = serialize::save_to_bytes(&d, Format::TorchScript).unwrap_err();
    assert!(e.message().contains("read only"), "{e}");
}

/// A training checkpoint ({"epoch", "args": argparse.Namespace, "model",
/// "optimizer"}): refused by default naming the global and the flag, as
/// torch.load(weights_only=True) refuses it; with skip_unknown its
/// tensors load and the Namespace is listed with its global.
#[test]
fn training_checkpoint_needs_skip_unknown() {
    let path = data_dir().join("training_checkpoint.pt");
    let e = serialize::load(&path, Format::Auto, LoadFlags::default()).unwrap_err();
    let m = e.message();
    assert!(
        m.contains("argparse.Namespace") && m.contains("TSR_LOAD_SKIP_UNKNOWN"),
        "{m}"
    );
    load_with("training_checkpoint", true);
    let flags = LoadFlags {
        skip_unknown: true,
        ..Default::default()
    };
    let d = serialize::load(&path, Format::Auto, flags).unwrap();
    let skipped: Vec<&str> = d
        .metadata(serialize::SKIPPED_KEY)
        .unwrap()
        .lines()
        .collect();
    assert!(
        skipped.contains(&"args (argparse.Namespace)"),
        "{skipped:?}"
    );
    assert!(!skipped.contains(&"epoch"), "{skipped:?}");
    assert_eq!(d.value("epoch"), Some(&serde_json::json!(3)));
    assert!(d.get("optimizer.state.0.momentum_buffer").is_some());
}

/// A TorchScript module's tensor constants (libtorch's torch::jit::freeze
/// folded its parameters into constants.pkl, their storages under
/// constants/): named "constants.N" after the kept attribute, equal to
/// what libtorch's own reader returns, views of one constant sharing its
/// storage, and data/0 and constants/0 loaded as two storages.
#[test]
fn torchscript_constants_named_by_index() {
    load_both_ways("torchscript_constants");
    let d = serialize::load(
        &data_dir().join("torchscript_constants.pt"),
        Format::Auto,
        LoadFlags::default(),
    )
    .unwrap();
    let names: Vec<&str> = d.iter().map(|(n, _)| n).collect();
    assert_eq!(names[0], "kept");
    assert_eq!(
        names[1..],
        [
            "constants.0",
            "constants.1",
            "constants.2",
            "constants.3",
            "constants.4",
            "constants.5"
        ]
    );
    let kept = d.get("kept").unwrap();
    let c0 = d.get("constants.0").unwrap();
    assert!(!Storage::ptr_eq(kept.storage(), c0.storage()));
    assert!(Storage::ptr_eq(
        c0.storage(),
        d.get("constants.5").unwrap().storage()
    ));
}
