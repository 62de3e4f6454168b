//! torch.save files in the layouts of checkpoints from the wild load in
//! tessera as torch.load reads them, or are refused naming what could not
//! be read.
//!
//! tests/data/torch_wild/ holds the files (its README.md says what each
//! is) and, beside each, what PyTorch 2.15's torch.load returns from it
//! (scripts/make_torch_wild_fixtures.py wrote both): OrderedDicts whose
//! items are the constructor's argument (Python 2 / PyTorch 0.3-0.4),
//! the older rebuild functions (`_rebuild_tensor`, tensors by BUILD
//! state, `_rebuild_parameter` over them), `_rebuild_parameter_with_state`,
//! tensor subclasses (`_rebuild_from_type_v2`), big-endian files, whole
//! pickled modules, the tar container of PyTorch before 0.1.10, shared and
//! nested values under pickle protocols 2, 4 and 5, legacy storage views;
//! quantized, sparse and nested tensors refused naming their rebuild
//! function. Each file is loaded by copy and mapped, detected and named,
//! and compared with tests/common/torch_expected.rs.

#[path = "common/torch_expected.rs"]
mod torch_expected;

use std::path::{Path, PathBuf};
use tessera::serialize::{self, Format, LoadFlags};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/torch_wild")
}

/// Loads fixture `name` as its expected file's last line says (with
/// TSR_LOAD_SKIP_UNKNOWN or not; refused without it; refused) and checks
/// what tessera read or the message it refused with.
fn load_and_check(name: &str) {
    let expected = torch_expected::read(&data_dir(), name);
    let last = &expected.last;
    let path = data_dir().join(format!("{name}.pt"));
    let named = match last["container"].as_str().unwrap() {
        "zip" => Format::Torch,
        // The tar container is torch.save's legacy format too.
        "legacy" | "tar" => Format::TorchLegacy,
        other => panic!("{name}: container {other}"),
    };
    let head = std::fs::read(&path).unwrap();
    assert_eq!(
        serialize::detect(&head).ok(),
        Some(named),
        "{name}: detected"
    );
    let skip_unknown = last["skip_unknown"].as_bool().unwrap_or(false);
    for (how, mmap) in [("copy", false), ("mmap", true)] {
        for format in [Format::Auto, named] {
            let what = format!("{name} ({how}, {})", format.name());
            if let Some(needle) = last["refused_without_skip_unknown"].as_str() {
                let flags = LoadFlags {
                    mmap,
                    skip_unknown: false,
                    ..Default::default()
                };
                match serialize::load(&path, format, flags) {
                    Ok(_) => panic!("{what}: loaded without TSR_LOAD_SKIP_UNKNOWN"),
                    Err(e) => assert!(e.message().contains(needle), "{what}: {e}"),
                }
            }
            let flags = LoadFlags {
                mmap,
                skip_unknown,
                ..Default::default()
            };
            let loaded = serialize::load(&path, format, flags);
            if let Some(needle) = last["refused"].as_str() {
                match loaded {
                    Ok(_) => panic!("{what}: loaded: expected a refusal naming {needle}"),
                    Err(e) => assert!(e.message().contains(needle), "{what}: {e}"),
                }
                continue;
            }
            let dict = loaded.unwrap_or_else(|e| panic!("{what}: {e}"));
            torch_expected::check(&expected, &what, &dict);
        }
    }
}

/// One test per fixture, and the list of them.
macro_rules! fixtures {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        const FIXTURES: &[&str] = &[$(stringify!($name),)*];
        $(
            $(#[doc = $doc])*
            #[test]
            fn $name() {
                load_and_check(stringify!($name));
            }
        )*
    };
}

fixtures! {
    /// OrderedDict([[key, value], ...]): items in the constructor's list.
    zip_od_lists,
    legacy_od_lists,
    /// OrderedDict([(key, value), ...]).
    zip_od_tuples,
    legacy_od_tuples,
    /// Half the items in the constructor's list, half in SETITEMS.
    zip_od_both,
    legacy_od_both,
    /// A module's state dict as Python 2 pickled it: constructor lists and
    /// its _metadata as BUILD state.
    zip_od_py2_state_dict,
    legacy_od_py2_state_dict,
    /// torch._utils._rebuild_tensor(storage, offset, size, stride).
    zip_rebuild_tensor,
    legacy_rebuild_tensor,
    /// torch.FloatTensor() etc. with BUILD state (storage, offset, size,
    /// stride).
    zip_tensor_setstate,
    legacy_tensor_setstate,
    /// _rebuild_parameter over _rebuild_tensor (PyTorch 0.4).
    zip_rebuild_parameter_04,
    legacy_rebuild_parameter_04,
    /// A PyTorch 0.4 / Python 2 checkpoint: all of the above at once.
    zip_era04_checkpoint,
    legacy_era04_checkpoint,
    /// A Parameter with a Python attribute.
    zip_rebuild_parameter_with_state,
    legacy_rebuild_parameter_with_state,
    /// A tensor subclass loads as a plain tensor, its class listed.
    zip_rebuild_from_type_v2,
    legacy_rebuild_from_type_v2,
    /// Refused naming _rebuild_qtensor.
    zip_refused_quantized,
    legacy_refused_quantized,
    /// Refused naming _rebuild_sparse_tensor.
    zip_refused_sparse_coo,
    legacy_refused_sparse_coo,
    /// Refused naming _rebuild_nested_tensor (zip only: torch.load cannot
    /// read a nested tensor from a legacy file).
    zip_refused_nested,
    /// The byteorder record reads "big": every storage swapped on load.
    zip_big_endian,
    /// sys_info says big-endian; the storages are little-endian as torch
    /// always writes them in this container.
    legacy_big_endian,
    /// torch.save(model): with TSR_LOAD_SKIP_UNKNOWN, model.state_dict()'s
    /// tensors, the classes listed; without it, refused naming the class.
    zip_module,
    legacy_module,
    /// The tar container of PyTorch before 0.1.10, with a storage view.
    tar_state_dict,
    /// Memo-shared tensors and dicts, lists, tuples, nesting, non-tensor
    /// values, pickle protocols 2, 5 (zip) and 2, 4 (legacy).
    zip_memo_p2,
    zip_memo_p5,
    legacy_memo_p2,
    legacy_memo_p4,
    /// Legacy storage views: (view key, offset, numel) persistent ids.
    legacy_storage_views,
}

/// Every file of tests/data/torch_wild/ has its test above, and every
/// test its file.
#[test]
fn every_fixture_is_tested() {
    let mut on_disk: Vec<String> = std::fs::read_dir(data_dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".pt").map(str::to_owned)
        })
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = FIXTURES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
}
