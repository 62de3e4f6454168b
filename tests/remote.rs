//! Checkpoints read from URLs (docs/FORMATS.md, "Remote checkpoints"):
//! every format of the fixtures, a Hugging Face shard index and DCP
//! prefixes served over HTTP by tests/remote/http_server.py on
//! 127.0.0.1 load what the local files load, through `load` and the
//! handle (by name, rows, sets, progress, bytes read); each way a
//! server can misbehave (tests/remote/http_server.py's modes) is an
//! error naming the URL and what was wrong, never wrong bytes.

#[path = "common/checkpoint.rs"]
mod ckpt;
#[path = "remote/common.rs"]
mod common;

use ckpt::{assert_dicts, assert_same, filled, COPY};
use common::*;
use std::path::Path;
use tessera::serialize::{self, Checkpoint, FetchOptions, Format, LoadFlags, Progress, TensorDict};
use tessera::{DType, Device};

/// The fixtures served: NumPy's, gguf-py's and PyTorch's files, the
/// shard and DCP fixtures, and files tessera writes in each format.
fn tree(name: &str) -> std::path::PathBuf {
    let root = scratch(name);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    copy_tree(&repo.join("fixtures"), &root.join("fixtures"));
    for d in ["torch_save", "torch_wild"] {
        copy_tree(&repo.join("data").join(d), &root.join(d));
    }
    for d in ["hf_bin", "hf_safetensors", "dcp_1rank", "dcp_2ranks"] {
        copy_tree(&repo.join("data/shards").join(d), &root.join(d));
    }
    let d = ckpt::sample();
    for (name, format) in [
        ("w/a.safetensors", Format::Safetensors),
        ("w/a.pt", Format::Torch),
        ("w/a.npz", Format::Npz),
    ] {
        std::fs::create_dir_all(root.join("w")).unwrap();
        serialize::save(&d, &root.join(name), format).unwrap();
    }
    let mut big = TensorDict::new();
    for i in 0..6 {
        big.set(&format!("t{i}"), filled(&[256, 1024], DType::Float, i))
            .unwrap();
    }
    serialize::save(&big, &root.join("w/big.safetensors"), Format::Safetensors).unwrap();
    serialize::save(&d, &root.join("w/dcp"), Format::Dcp).unwrap();
    std::fs::create_dir_all(root.join("w/sharded")).unwrap();
    serialize::save_sharded(
        &d,
        &root.join("w/sharded"),
        Format::Safetensors,
        4096,
        Default::default(),
    )
    .unwrap();
    root
}

/// Every file under `dir` (relative), sorted.
fn files(dir: &Path, under: &Path, out: &mut Vec<String>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files(&p, under, out);
        } else {
            out.push(p.strip_prefix(under).unwrap().display().to_string());
        }
    }
    out.sort();
}

const SKIP: LoadFlags = LoadFlags {
    skip_unknown: true,
    ..COPY
};

#[test]
fn every_fixture_loads_from_http_what_it_loads_from_disk() {
    settings();
    let root = tree("t1");
    let Some(server) = python_server(&root) else {
        return;
    };
    let base = format!("http://127.0.0.1:{}/ok/", server.port);
    let mut all = Vec::new();
    files(&root, &root, &mut all);
    let mut loaded = 0;
    for rel in &all {
        let skip = rel.ends_with(".json") && !rel.ends_with("index.json")
            || rel.ends_with(".jsonl")
            || rel.ends_with(".md")
            || rel.ends_with(".txt")
            || rel.ends_with(".distcp")
            || rel.ends_with(".metadata")
            || rel.contains("sharded/model-");
        if skip {
            continue;
        }
        let Ok(local) = serialize::load(&root.join(rel), Format::Auto, SKIP) else {
            continue; // the fixtures refused on disk are refused from a URL too
        };
        let url = format!("{base}{rel}");
        let remote = serialize::load(Path::new(&url), Format::Auto, SKIP)
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_dicts(&remote, &local, &url);
        loaded += 1;
    }
    // DCP prefixes.
    for dir in ["dcp_1rank", "dcp_2ranks", "w/dcp"] {
        let local = serialize::load(&root.join(dir), Format::Auto, SKIP).unwrap();
        for url in [format!("{base}{dir}/"), format!("{base}{dir}/.metadata")] {
            let remote = serialize::load(Path::new(&url), Format::Auto, SKIP)
                .unwrap_or_else(|e| panic!("{url}: {e}"));
            assert_dicts(&remote, &local, &url);
        }
        loaded += 1;
    }
    assert!(loaded >= 40, "{loaded} checkpoints loaded");
}

#[test]
fn the_handle_works_over_http() {
    settings();
    let root = tree("t2");
    let Some(server) = python_server(&root) else {
        return;
    };
    let base = format!("http://127.0.0.1:{}/ok/", server.port);
    for rel in [
        "w/big.safetensors",
        "w/a.pt",
        "w/a.npz",
        "torch_save/legacy_ordered_dict.pt",
        "w/sharded/model.safetensors.index.json",
        "hf_bin/pytorch_model.bin.index.json",
        "w/dcp/",
        "dcp_2ranks/",
    ] {
        let url = format!("{base}{rel}");
        let local = serialize::load(&root.join(rel), Format::Auto, SKIP).unwrap();
        let c = Checkpoint::open(Path::new(&url), Format::Auto, SKIP)
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(c.len(), local.len(), "{url}");
        for (i, (name, t)) in local.iter().enumerate() {
            assert_eq!(c.name(i), Some(name));
            assert_same(&c.load(name, Device::CPU).unwrap(), t, &url);
            if t.ndim() > 0 && t.sizes()[0] >= 3 {
                let rows = c.load_rows(name, 1, 3, Device::CPU).unwrap();
                assert_eq!(rows.sizes()[0], 2, "{url}: {name} rows");
            }
        }
        let mut reports = 0usize;
        let mut last = 0u64;
        let mut cb = |p: &Progress<'_>| {
            reports += 1;
            last = p.done;
            true
        };
        let all = c
            .load_many(
                None,
                Device::CPU,
                FetchOptions {
                    concurrency: 4,
                    chunk_bytes: 64 << 10,
                    progress: Some(&mut cb),
                },
            )
            .unwrap();
        assert_dicts(&all, &local, &url);
        assert!(reports > 0 && c.bytes_read() > 0, "{url}");
    }
    // One tensor of the safetensors file reads its header and its bytes.
    let url = format!("{base}w/big.safetensors");
    let c = Checkpoint::open(Path::new(&url), Format::Auto, COPY).unwrap();
    let header = c.bytes_read();
    c.load("t2", Device::CPU).unwrap();
    assert_eq!(c.bytes_read(), header + (1 << 20));
}

/// The error loading `url` gives (it must fail).
fn refused(url: &str) -> String {
    match serialize::load(Path::new(url), Format::Auto, COPY) {
        Ok(_) => panic!("{url} loaded"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn misbehaving_servers_are_refused_naming_the_url() {
    settings();
    let root = tree("t3");
    let Some(server) = python_server(&root) else {
        return;
    };
    let url = |mode: &str| format!("http://127.0.0.1:{}/{mode}/w/big.safetensors", server.port);
    for (mode, says) in [
        ("norange", "range request not supported"),
        ("badrange", "range"),
        ("short", "bytes asked"),
        ("long", "more than"),
        ("reset", "failed"),
        ("drip", "timed out"),
        ("loop", "redirect"),
        ("hugeheader", "failed"),
        ("changing", "changed since it was opened"),
    ] {
        let started = std::time::Instant::now();
        let e = refused(&url(mode));
        let shown = url(mode);
        assert!(e.contains(&shown), "{mode}: the message names the URL: {e}");
        assert!(
            e.to_lowercase().contains(says),
            "{mode}: expected '{says}' in: {e}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{mode}: took {:?}",
            started.elapsed()
        );
    }
    // A 503 now and then is retried.
    let local = serialize::load(&root.join("w/big.safetensors"), Format::Auto, COPY).unwrap();
    let flaky = serialize::load(Path::new(&url("flaky")), Format::Auto, COPY).unwrap();
    assert_dicts(&flaky, &local, "flaky");
    // Missing objects and refused connections.
    let e = refused(&format!(
        "http://127.0.0.1:{}/ok/w/nothing.safetensors",
        server.port
    ));
    assert!(e.contains("no such object"), "{e}");
    let e = refused(&format!("http://127.0.0.1:{}/x.safetensors", free_port()));
    assert!(e.contains("failed"), "{e}");
}

#[test]
fn credentials_never_appear_in_messages() {
    settings();
    let root = tree("t4");
    let Some(server) = python_server(&root) else {
        return;
    };
    let url = format!(
        "http://someone:hunter2secret@127.0.0.1:{}/ok/w/none.safetensors",
        server.port
    );
    let e = refused(&url);
    assert!(
        !e.contains("hunter2secret") && !e.contains("someone:"),
        "{e}"
    );
    assert!(
        e.contains(&format!("http://127.0.0.1:{}/ok/w/none", server.port)),
        "{e}"
    );
}

#[test]
fn shards_named_outside_their_url_are_refused() {
    settings();
    let root = scratch("hostile-shards");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/shards/hostile");
    copy_tree(&repo, &root);
    let Some(server) = python_server(&root) else {
        return;
    };
    for (dir, says) in [("hf_dotdot", "'..'"), ("hf_absolute", "absolute")] {
        let index = std::fs::read_dir(root.join(dir))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .find(|n| n.ends_with(".index.json"))
            .unwrap();
        let url = format!("http://127.0.0.1:{}/ok/{dir}/{index}", server.port);
        let e = refused(&url);
        assert!(e.contains(says), "{dir}: {e}");
    }
}

/// Small tensors are fetched by few requests: the records of 400
/// tensors of 256 bytes come in one GET (TSR_REMOTE_JOIN_GAP_BYTES
/// 1 MiB by default), one GET each with the setting 0; every other
/// tensor (gaps of 256 bytes) in one GET with a gap setting of 257 and
/// one each with 256. Every tensor equal to the local file's.
#[test]
fn small_records_are_joined_into_few_requests() {
    settings();
    let root = scratch("joined");
    let mut d = TensorDict::new();
    for i in 0..400u32 {
        d.set(
            &format!("t{i:03}"),
            filled(&[64], DType::Float, (i % 256) as u8),
        )
        .unwrap();
    }
    serialize::save(&d, &root.join("small.safetensors"), Format::Safetensors).unwrap();
    let Some(server) = python_server(&root) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/ok/small.safetensors", server.port);
    let names: Vec<String> = (0..400).step_by(2).map(|i| format!("t{i:03}")).collect();
    let every_other: Vec<&str> = names.iter().map(String::as_str).collect();
    for (gap, names, want) in [
        (None, None, 1),
        (Some("0"), None, 400),
        (Some("257"), Some(&every_other[..]), 1),
        (Some("256"), Some(&every_other[..]), 200),
    ] {
        let mut s = serialize::RemoteSettings::new();
        if let Some(g) = gap {
            s.set("TSR_REMOTE_JOIN_GAP_BYTES", g).unwrap();
        }
        let c = Checkpoint::open_with(Path::new(&url), Format::Auto, COPY, &s).unwrap();
        let before = gets(server.port);
        let got = c
            .load_many(names, Device::CPU, FetchOptions::default())
            .unwrap();
        let asked = gets(server.port) - before;
        assert_eq!(asked, want, "gap {gap:?}, {} tensors", got.len());
        assert_eq!(got.len(), names.map_or(400, <[&str]>::len));
        for (name, t) in got.iter() {
            assert_same(t, d.get(name).unwrap(), &url);
        }
    }
}
