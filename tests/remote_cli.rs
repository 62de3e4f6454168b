//! `tessera ls / convert / diff / verify` of URLs (served by
//! tests/remote/http_server.py on 127.0.0.1): what they do with the
//! same files on disk, and the URL named (without its credentials) in
//! what they say.

#[path = "common/cli.rs"]
mod cli;
#[path = "remote/common.rs"]
mod common;

use cli::tessera;
use common::*;
use std::path::Path;
use tessera::serialize::{self, Format, LoadFlags};

#[test]
fn the_commands_take_urls() {
    settings();
    let root = scratch("cli");
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    copy_tree(&repo.join("data/torch_save"), &root.join("torch_save"));
    copy_tree(&repo.join("data/shards/hf_safetensors"), &root.join("hf"));
    copy_tree(&repo.join("data/shards/dcp_2ranks"), &root.join("dcp"));
    let Some(server) = python_server(&root) else {
        return;
    };
    let base = format!("http://127.0.0.1:{}/ok/", server.port);
    let index = std::fs::read_dir(root.join("hf"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.ends_with(".index.json"))
        .unwrap();
    for rel in [
        "torch_save/ordered_dict.pt".to_owned(),
        "torch_save/legacy_ordered_dict.pt".to_owned(),
        format!("hf/{index}"),
        "dcp/".to_owned(),
    ] {
        let url = format!("{base}{rel}");
        let local = root.join(rel.trim_end_matches('/'));
        let ls_local = tessera(&["ls".as_ref(), local.as_os_str()]).expect(0);
        let ls_url = tessera(&["ls", &url]).expect(0);
        // The listing names the file it lists; the tensors are the same.
        let body = |s: &str| s.lines().skip(1).map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(body(&ls_url.stdout), body(&ls_local.stdout), "{url}");
        tessera(&["verify", &url]).expect(0);
        tessera(&["diff".as_ref(), url.as_ref(), local.as_os_str()]).expect(0);
        let out = root.join("converted.safetensors");
        let _ = std::fs::remove_file(&out);
        tessera(&[
            "convert".as_ref(),
            "--copy-shared".as_ref(),
            url.as_ref(),
            out.as_os_str(),
        ])
        .expect(0);
        let flags = LoadFlags {
            skip_unknown: true,
            ..LoadFlags::default()
        };
        let a = serialize::load(&out, Format::Auto, flags).unwrap();
        let b = serialize::load(&local, Format::Auto, flags).unwrap();
        assert_eq!(a.len(), b.len(), "{url}: converted");
    }
    // A missing object: exit status 3, the URL named without its password.
    let url = format!(
        "http://user:pa55word@127.0.0.1:{}/ok/none.safetensors",
        server.port
    );
    let run = tessera(&["ls", &url]).expect(3);
    assert!(
        run.stderr.contains(&format!(
            "http://127.0.0.1:{}/ok/none.safetensors",
            server.port
        )) && !run.stderr.contains("pa55word"),
        "{}",
        run.stderr
    );
}

/// `tessera ls` of a URL in a terminal (util-linux's `script` gives it
/// one) shows a bar of the bytes read, fed by the checkpoint handle's
/// progress: 1000 tensors from the server's /slow/ mode (each answer
/// 20 ms late) take at least 2.5 s at 8 requests in flight, one a
/// tensor (TSR_REMOTE_JOIN_GAP_BYTES=0: not joined into a few), past
/// the bar's one-second delay.
#[test]
fn ls_of_a_slow_url_shows_a_bar_in_a_terminal() {
    settings();
    if std::env::var_os("TESSERA_TEST_RUNNER").is_some() {
        eprintln!("SKIPPED: `script` cannot run the command through TESSERA_TEST_RUNNER");
        return;
    }
    if !have("script") {
        return;
    }
    let root = scratch("cli-bar");
    let mut d = serialize::TensorDict::new();
    for i in 0..1000 {
        let t =
            tessera::Tensor::empty(&[1024], tessera::DType::Float, tessera::Device::CPU).unwrap();
        d.set(&format!("t{i:04}"), t).unwrap();
    }
    serialize::save(&d, &root.join("m.safetensors"), Format::Safetensors).unwrap();
    let Some(server) = python_server(&root) else {
        return;
    };
    let url = format!("http://127.0.0.1:{}/slow/m.safetensors", server.port);
    let line = format!("{} ls {url}", env!("CARGO_BIN_EXE_tessera"));
    let out = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("TSR_REMOTE_JOIN_GAP_BYTES", "0")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("reading {url}")), "no bar: {text}");
    assert!(text.contains("t0999"), "the listing: {text}");
}
