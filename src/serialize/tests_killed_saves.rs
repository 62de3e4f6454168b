//! Saves of several files stopped after each of their steps as a SIGKILL
//! would stop them (`files::kill_point`: every rename, every stale file
//! removed, nothing cleaned up), over an existing checkpoint: a load of
//! what is left gives the old checkpoint whole, the new one whole, or is
//! refused (issue 65, finding 3: a sharded save killed after its first
//! rename left a mix that loaded).

use super::safetensors_format::row_major;
use super::tests::filled;
use super::tests_dcp::scratch;
use super::*;
use crate::dtype::DType;
use crate::files::kill_point;
use std::path::{Path, PathBuf};

/// `n` tensors of 64 floats, their values from `seed`.
fn dict(n: usize, seed: u8) -> TensorDict {
    let mut d = TensorDict::new();
    for i in 0..n {
        let t = filled(&[64], DType::Float, seed.wrapping_add(i as u8));
        d.set(&format!("layer.{i}"), t).unwrap();
    }
    d
}

fn same(a: &TensorDict, b: &TensorDict) -> bool {
    a.len() == b.len()
        && a.iter().all(|(n, t)| {
            b.get(n)
                .is_some_and(|u| u.sizes() == t.sizes() && row_major(u) == row_major(t))
        })
}

/// What loading `path` gives: "old", "new" or "refused"; panics on a
/// load that is neither checkpoint whole.
fn outcome(path: &Path, old: &TensorDict, new: &TensorDict, what: &str) -> &'static str {
    let mut seen = None;
    for flags in [
        LoadFlags::default(),
        LoadFlags {
            mmap: true,
            ..LoadFlags::default()
        },
    ] {
        let got = match load(path, Format::Auto, flags) {
            Ok(d) if same(&d, old) => "old",
            Ok(d) if same(&d, new) => "new",
            Ok(d) => panic!(
                "{what}: '{}' loads neither checkpoint whole: {:?}",
                path.display(),
                d.iter()
                    .map(|(n, t)| (n, row_major(t)[0]))
                    .collect::<Vec<_>>()
            ),
            Err(_) => "refused",
        };
        assert!(
            seen.is_none_or(|s| s == got),
            "{what}: copy and mmap differ"
        );
        seen = Some(got);
    }
    seen.unwrap()
}

/// Saves `new` over `old` (saved first by `save`) stopped after step k,
/// for k = 1, 2, ... until a save runs to its end; after each, every
/// checkpoint path `paths` lists in the directory loads whole or is
/// refused. Returns the outcomes seen per k.
fn every_step(
    tag: &str,
    save: &dyn Fn(&TensorDict, &Path) -> Result<()>,
    paths: &dyn Fn(&Path) -> Vec<PathBuf>,
    old: &TensorDict,
    new: &TensorDict,
) -> Vec<Vec<&'static str>> {
    let root = scratch(tag);
    let mut seen = Vec::new();
    for k in 1.. {
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let dir = root.join("ckpt");
        save(old, &dir).unwrap();
        kill_point::stop_after(Some(k));
        let done = save(new, &dir);
        kill_point::stop_after(None);
        let what = format!("{tag}, stopped after step {k}");
        let outcomes: Vec<_> = paths(&dir)
            .iter()
            .map(|p| outcome(p, old, new, &what))
            .collect();
        assert!(!outcomes.is_empty(), "{what}: no checkpoint left");
        seen.push(outcomes);
        if let Err(e) = done {
            assert!(e.to_string().contains("kill point"), "{what}: {e}");
        } else {
            // The save ran past its last step: it is the new checkpoint.
            assert!(seen.last().unwrap().iter().all(|&o| o == "new"), "{what}");
            break;
        }
    }
    std::fs::remove_dir_all(&root).unwrap();
    seen
}

/// The checkpoints a sharded save's directory holds: the index and the
/// one file, where present.
fn hf_paths(format: Format) -> impl Fn(&Path) -> Vec<PathBuf> {
    let (stem, ext) = match format {
        Format::Torch => ("pytorch_model", "bin"),
        _ => ("model", "safetensors"),
    };
    move |dir: &Path| {
        [format!("{stem}.{ext}.index.json"), format!("{stem}.{ext}")]
            .iter()
            .map(|n| dir.join(n))
            .filter(|p| p.exists())
            .collect()
    }
}

#[test]
fn a_sharded_save_killed_at_any_step_leaves_no_mix() {
    // 64 floats are 256 bytes: 300 bytes a shard gives one tensor each.
    for format in [Format::Safetensors, Format::Torch] {
        let save = |max: u64| {
            move |d: &TensorDict, dir: &Path| {
                save_sharded(d, dir, format, max, SaveFlags::default()).map(|_| ())
            }
        };
        let paths = hf_paths(format);
        // The same shard names: the old index beside new shards.
        let seen = every_step("hf-same", &save(300), &paths, &dict(3, 1), &dict(3, 100));
        // 3 shards and the index renamed: 4 steps, the 5th save completes.
        assert_eq!(seen.len(), 5, "{format:?}: {seen:?}");
        assert_eq!(seen[0], ["refused"], "{format:?}: {seen:?}");
        assert_eq!(seen[3], ["new"], "{format:?}: {seen:?}");
        // Another number of shards (other names, stale shards removed),
        // and a sharded checkpoint replaced by one file and back.
        every_step("hf-count", &save(300), &paths, &dict(3, 1), &dict(2, 100));
        let (one, many) = (save(1 << 20), save(300));
        every_step(
            "hf-to-one",
            &|d: &TensorDict, dir: &Path| {
                if d.len() == 3 {
                    many(d, dir)
                } else {
                    one(d, dir)
                }
            },
            &paths,
            &dict(3, 1),
            &dict(2, 100),
        );
        every_step(
            "hf-to-many",
            &|d: &TensorDict, dir: &Path| {
                if d.len() == 3 {
                    one(d, dir)
                } else {
                    many(d, dir)
                }
            },
            &paths,
            &dict(3, 1),
            &dict(2, 100),
        );
    }
}

#[test]
fn a_mix_of_two_saves_is_refused_naming_the_shard_and_both_ids() {
    let root = scratch("hf-mix");
    let (a, b) = (root.join("a"), root.join("b"));
    std::fs::create_dir_all(&root).unwrap();
    let index = save_sharded(
        &dict(2, 1),
        &a,
        Format::Safetensors,
        300,
        SaveFlags::default(),
    )
    .unwrap();
    save_sharded(
        &dict(2, 9),
        &b,
        Format::Safetensors,
        300,
        SaveFlags::default(),
    )
    .unwrap();
    let shard = "model-00002-of-00002.safetensors";
    std::fs::copy(b.join(shard), a.join(shard)).unwrap();
    let id = |dir: &Path| {
        let text = std::fs::read(dir.join("model.safetensors.index.json")).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
        v["metadata"]["tessera.save_id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (ia, ib) = (id(&a), id(&b));
    assert_ne!(ia, ib);
    assert_eq!(ia.len(), 32);
    let e = load(&index, Format::Auto, LoadFlags::default()).unwrap_err();
    let e = e.to_string();
    assert!(
        e.contains(&format!("shard '{shard}' has save id '{ib}'"))
            && e.contains(&format!("has save id '{ia}'")),
        "{e}"
    );
    // A whole checkpoint loads, the id not passed on into the dict.
    let back = load(
        &b.join("model.safetensors.index.json"),
        Format::Auto,
        LoadFlags::default(),
    )
    .unwrap();
    assert!(same(&back, &dict(2, 9)));
    assert_eq!(back.metadata("tessera.save_id"), None);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_dcp_save_killed_at_any_step_leaves_one_checkpoint() {
    let paths = |dir: &Path| vec![dir.to_path_buf()];
    let save = |d: &TensorDict, dir: &Path| super::save(d, dir, Format::Dcp);
    // One exchange: stopped after it, the new checkpoint is in place.
    // Without renameat2's exchange: the old one renamed aside (a load
    // then finds nothing: refused), then the new one renamed in.
    let two_renames = [vec!["refused"], vec!["new"], vec!["new"]];
    // Linux exchanges the two directories in one step; Windows and macOS
    // have no exchange (platform::fs::exchange) and rename twice.
    let seen = every_step("dcp", &save, &paths, &dict(3, 1), &dict(2, 100));
    if cfg!(any(target_os = "linux", target_os = "android")) {
        assert_eq!(seen, [vec!["new"], vec!["new"]]);
    } else {
        assert_eq!(seen, two_renames);
    }
    kill_point::without_exchange(true);
    let seen = every_step("dcp-fallback", &save, &paths, &dict(3, 1), &dict(2, 100));
    kill_point::without_exchange(false);
    assert_eq!(seen, two_renames);
}
