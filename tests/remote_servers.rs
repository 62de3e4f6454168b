//! Remote checkpoints from real servers started on 127.0.0.1 (a free
//! port each): nginx (Debian's) for HTTP Range, and s3s-fs 0.14.1 from
//! crates.io for S3 (a file-system S3 server in Rust, `cargo install
//! s3s-fs --version 0.14.1 --features binary`: the newest that builds
//! with this rustc). A server that is not installed skips its test,
//! saying so on stderr, unless TESSERA_REMOTE_SERVERS=required (what
//! CI's stage .ci/remote-servers.sh sets, after installing both).

#[path = "common/checkpoint.rs"]
mod ckpt;
#[path = "common/cli.rs"]
mod cli;
#[path = "remote/common.rs"]
mod common;

use ckpt::{assert_dicts, assert_same, filled, COPY};
use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera::serialize::{self, Checkpoint, FetchOptions, Format, LoadFlags, TensorDict};
use tessera::{DType, Device};

const SKIP: LoadFlags = LoadFlags {
    skip_unknown: true,
    ..COPY
};

/// Whether `tool` can run; when it cannot and CI requires it, fails.
fn usable(tool: &str) -> bool {
    let ok = have(tool);
    if !ok && std::env::var("TESSERA_REMOTE_SERVERS").as_deref() == Ok("required") {
        panic!("{tool} is required (TESSERA_REMOTE_SERVERS=required) but not installed");
    }
    ok
}

/// Waits until 127.0.0.1:`port` accepts connections.
fn wait_for(port: u16, what: &str) {
    let start = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{what} did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The checkpoints served, written under `root/<dir>`: each format, a
/// shard index, a DCP directory; their relative names (DCP: a prefix).
fn checkpoints(dir: &Path) -> Vec<String> {
    std::fs::create_dir_all(dir).unwrap();
    let d = ckpt::sample();
    let mut names = Vec::new();
    for (name, format) in [
        ("a.safetensors", Format::Safetensors),
        ("a.pt", Format::Torch),
        ("a.npz", Format::Npz),
    ] {
        serialize::save(&d, &dir.join(name), format).unwrap();
        names.push(name.to_owned());
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    std::fs::copy(
        repo.join("data/torch_save/legacy_ordered_dict.pt"),
        dir.join("legacy.pt"),
    )
    .unwrap();
    names.push("legacy.pt".into());
    let mut big = TensorDict::new();
    for i in 0..4 {
        big.set(&format!("t{i}"), filled(&[512, 1024], DType::Float, i))
            .unwrap();
    }
    serialize::save(&big, &dir.join("big.safetensors"), Format::Safetensors).unwrap();
    names.push("big.safetensors".into());
    serialize::save(&d, &dir.join("dcp"), Format::Dcp).unwrap();
    names.push("dcp/".into());
    std::fs::create_dir_all(dir.join("sharded")).unwrap();
    serialize::save_sharded(
        &d,
        &dir.join("sharded"),
        Format::Safetensors,
        4096,
        Default::default(),
    )
    .unwrap();
    names.push("sharded/model.safetensors.index.json".into());
    copy_tree(
        &repo.join("data/shards/dcp_2ranks"),
        &dir.join("dcp_2ranks"),
    );
    names.push("dcp_2ranks/".into());
    copy_tree(&repo.join("fixtures/gguf"), &dir.join("gguf"));
    names.push("gguf/align64.gguf".into());
    names
}

/// Loads each of `names` from `base` + name, one call and by handle,
/// against the files under `dir`.
fn check_all(base: &str, dir: &Path, names: &[String]) {
    for name in names {
        let url = format!("{base}{name}");
        let local = serialize::load(&dir.join(name), Format::Auto, SKIP).unwrap();
        let remote = serialize::load(Path::new(&url), Format::Auto, SKIP)
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_dicts(&remote, &local, &url);
        let c = Checkpoint::open(Path::new(&url), Format::Auto, SKIP)
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        for (name, t) in local.iter() {
            assert_same(&c.load(name, Device::CPU).unwrap(), t, &url);
        }
        let all = c
            .load_many(None, Device::CPU, FetchOptions::default())
            .unwrap();
        assert_dicts(&all, &local, &url);
    }
}

/// `user root;` when the test runs as root: nginx's workers then read the
/// served files as the test wrote them. By default a root master runs
/// them as `nobody`, who cannot enter a checkout under a directory of
/// mode 0700 (`mktemp -d`'s, /root): every request was 403 Forbidden.
fn workers_user() -> &'static str {
    #[cfg(unix)]
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        return "user root;\n";
    }
    ""
}

/// nginx serving `root` on a free port; over TLS with `tls`'s
/// certificate and key.
fn nginx(root: &Path, tls: Option<(&Path, &Path)>) -> Option<Server> {
    if !usable("nginx") {
        return None;
    }
    let port = free_port();
    let run = scratch(if tls.is_some() {
        "nginx-tls-run"
    } else {
        "nginx-run"
    });
    let listen = match tls {
        Some((cert, key)) => format!(
            "{port} ssl;\n    ssl_certificate {};\n    ssl_certificate_key {}",
            cert.display(),
            key.display()
        ),
        None => port.to_string(),
    };
    let conf = run.join("nginx.conf");
    std::fs::write(
        &conf,
        format!(
            "{user}pid {run}/nginx.pid;\nerror_log {run}/error.log;\nevents {{}}\nhttp {{\n  \
             access_log off;\n  client_body_temp_path {run}/body;\n  proxy_temp_path \
             {run}/proxy;\n  fastcgi_temp_path {run}/fastcgi;\n  uwsgi_temp_path {run}/uwsgi;\n  \
             scgi_temp_path {run}/scgi;\n  server {{\n    listen 127.0.0.1:{listen};\n    root \
             {root};\n  }}\n}}\n",
            user = workers_user(),
            run = run.display(),
            root = root.display()
        ),
    )
    .unwrap();
    let child = Command::new("nginx")
        .args(["-e", &format!("{}/error.log", run.display())])
        .arg("-c")
        .arg(&conf)
        .arg("-p")
        .arg(&run)
        .args(["-g", "daemon off;"])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server::new(child, port, root);
    wait_for(port, "nginx");
    Some(server)
}

#[test]
fn nginx_serves_every_layout() {
    settings();
    let root = scratch("nginx-root");
    let names = checkpoints(&root.join("m"));
    let Some(server) = nginx(&root, None) else {
        return;
    };
    check_all(
        &format!("http://127.0.0.1:{}/m/", server.port),
        &root.join("m"),
        &names,
    );
}

/// Runs openssl with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a leaf certificate for 127.0.0.1 it signed, in `dir`:
/// `ca.pem`, `leaf.pem`, `leaf.key`.
fn certificates(dir: &Path) {
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend(ec);
    ca.extend([
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=tessera test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ]);
    openssl(dir, &ca);
    let mut csr = vec!["req"];
    csr.extend(ec);
    csr.extend([
        "-keyout",
        "leaf.key",
        "-out",
        "leaf.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    openssl(dir, &csr);
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    );
}

/// HTTPS through rustls with ring (the provider tessera installs): a
/// server whose issuer is not trusted is refused naming the URL; trusted
/// (SSL_CERT_FILE, which the Linux verifier reads), every layout loads.
#[test]
fn https_checks_the_certificate_and_serves_every_layout() {
    settings();
    if !usable("openssl") {
        return;
    }
    let root = scratch("nginx-tls-root");
    let names = checkpoints(&root.join("m"));
    let certs = scratch("nginx-tls-certs");
    certificates(&certs);
    let Some(server) = nginx(
        &root,
        Some((&certs.join("leaf.pem"), &certs.join("leaf.key"))),
    ) else {
        return;
    };
    let base = format!("https://127.0.0.1:{}/m/", server.port);
    let url = format!("{base}a.safetensors");
    let e = serialize::load(Path::new(&url), Format::Auto, COPY).unwrap_err();
    assert!(e.message().contains(&url), "{e}");
    std::env::set_var("SSL_CERT_FILE", certs.join("ca.pem"));
    check_all(&base, &root.join("m"), &names);
}

const ACCESS: &str = "tessera-access-key";
const SECRET: &str = "tessera-secret-9f8e7d";

/// s3s-fs serving `root` (each directory a bucket) on a free port.
fn s3s_fs(root: &Path) -> Option<Server> {
    if !usable("s3s-fs") {
        return None;
    }
    let port = free_port();
    let child = Command::new("s3s-fs")
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .args(["--access-key", ACCESS, "--secret-key", SECRET])
        .arg(root)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server::new(child, port, root);
    wait_for(port, "s3s-fs");
    Some(server)
}

#[test]
fn s3_serves_every_layout_and_keeps_its_secrets() {
    settings();
    let root = scratch("s3-root");
    let names = checkpoints(&root.join("bucket"));
    let Some(server) = s3s_fs(&root) else {
        return;
    };
    std::env::set_var(
        "AWS_ENDPOINT_URL",
        format!("http://127.0.0.1:{}", server.port),
    );
    std::env::set_var("AWS_ACCESS_KEY_ID", ACCESS);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET);
    std::env::set_var("AWS_REGION", "us-east-1");
    // Plain http refused until allowed.
    std::env::set_var("AWS_ALLOW_HTTP", "false");
    let url = "s3://bucket/a.safetensors";
    let e = serialize::load(Path::new(url), Format::Auto, COPY).unwrap_err();
    assert!(e.message().contains(url), "{e}");
    std::env::set_var("AWS_ALLOW_HTTP", "true");
    check_all("s3://bucket/", &root.join("bucket"), &names);
    saves_round_trip(&root.join("bucket"));
    // Missing objects and buckets, wrong keys: the URL named, no secret.
    for url in [
        "s3://bucket/none.safetensors",
        "s3://nobucket/a.safetensors",
    ] {
        let e = serialize::load(Path::new(url), Format::Auto, COPY).unwrap_err();
        assert!(
            e.message().contains(url) && !e.message().contains(SECRET),
            "{e}"
        );
    }
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "wrong-secret-1234");
    let e = serialize::load(Path::new(url), Format::Auto, COPY).unwrap_err();
    assert!(
        e.message().contains(url) && !e.message().contains("wrong-secret-1234"),
        "{e}"
    );
    // Settings of one open over the environment's: the right secret
    // given to the handle wins over the wrong one in the environment;
    // a wrong one given so is kept out of the message as well.
    let mut right = serialize::RemoteSettings::new();
    right.set("AWS_SECRET_ACCESS_KEY", SECRET).unwrap();
    let c = Checkpoint::open_with(Path::new(url), Format::Auto, COPY, &right).unwrap();
    assert!(!c.is_empty());
    std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET);
    let mut wrong = serialize::RemoteSettings::new();
    wrong
        .set("AWS_SECRET_ACCESS_KEY", "handle-secret-5678")
        .unwrap();
    let e = Checkpoint::open_with(Path::new(url), Format::Auto, COPY, &wrong)
        .err()
        .unwrap();
    assert!(
        e.message().contains(url) && !e.message().contains("handle-secret-5678"),
        "{e}"
    );
    let mut unknown = serialize::RemoteSettings::new();
    unknown.set("AWS_NOT_A_SETTING", "1").unwrap();
    let e = Checkpoint::open_with(Path::new(url), Format::Auto, COPY, &unknown)
        .err()
        .unwrap();
    assert_eq!(e.kind(), tessera::ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("AWS_NOT_A_SETTING"), "{e}");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "wrong-secret-1234");
    // A save the server refuses: the URL named, no secret, the object
    // there before kept, nothing left in the temporary directory.
    let kept = root.join("bucket/saved/a.safetensors");
    let before = std::fs::read(&kept).unwrap();
    let e = serialize::save(
        &TensorDict::new(),
        Path::new("s3://bucket/saved/a.safetensors"),
        Format::Auto,
    )
    .unwrap_err();
    assert_eq!(e.kind(), tessera::ErrorKind::Io, "{e}");
    assert!(
        e.message().contains("s3://bucket/saved/a.safetensors")
            && !e.message().contains("wrong-secret-1234"),
        "{e}"
    );
    assert_eq!(std::fs::read(&kept).unwrap(), before);
    assert_eq!(upload_spools(), Vec::<std::path::PathBuf>::new());
    std::env::set_var("AWS_SECRET_ACCESS_KEY", SECRET);
}

/// The temporary directories saves to URLs made in this process and left.
fn upload_spools() -> Vec<std::path::PathBuf> {
    let prefix = format!("tessera-upload-{}-", std::process::id());
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect()
}

/// Saves `d` to `url` and to a scratch file of the same name in
/// `format` (`sharded`: through save_sharded of 4 KiB shards): loaded
/// back, the two alike; the local path and the path the save returned.
fn saved(d: &TensorDict, url: &str, format: Format, sharded: bool) -> (std::path::PathBuf, String) {
    let local = scratch(&format!("s3-save-{}", url.len())).join(url.rsplit('/').next().unwrap());
    let save = |p: &Path| {
        if sharded {
            serialize::save_sharded(d, p, format, 4096, Default::default())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        } else {
            serialize::save(d, p, format).unwrap();
            p.to_string_lossy().into_owned()
        }
    };
    let (remote, here) = (save(Path::new(url)), save(&local));
    let loaded = |p: &str| serialize::load(Path::new(p), Format::Auto, COPY).unwrap();
    assert_dicts(&loaded(&remote), &loaded(&here), url);
    (local, remote)
}

/// Saves to s3://bucket/ (served from `bucket`): one file (the bytes a
/// local save writes), one of several multipart parts, a sharded save and
/// a DCP directory, each loaded back; a save that fails names the URL;
/// nothing is left in the temporary directory.
fn saves_round_trip(bucket: &Path) {
    let d = ckpt::sample();
    let (local, _) = saved(&d, "s3://bucket/saved/a.safetensors", Format::Auto, false);
    assert_eq!(
        std::fs::read(bucket.join("saved/a.safetensors")).unwrap(),
        std::fs::read(&local).unwrap(),
        "the bytes a local save writes"
    );
    // 20 MiB: three parts of the default 8 MiB request size.
    let mut big = TensorDict::new();
    for i in 0..4 {
        big.set(&format!("w{i}"), filled(&[1280, 1024], DType::Float, i))
            .unwrap();
    }
    let (local, _) = saved(&big, "s3://bucket/saved/big.pt", Format::Torch, false);
    assert_eq!(
        std::fs::read(bucket.join("saved/big.pt")).unwrap().len(),
        std::fs::read(&local).unwrap().len()
    );
    // Replaced whole by a later save.
    saved(&d, "s3://bucket/saved/big.pt", Format::Torch, false);
    let (local, index) = saved(&d, "s3://bucket/saved/sharded", Format::Safetensors, true);
    assert_eq!(
        index,
        "s3://bucket/saved/sharded/model.safetensors.index.json"
    );
    let names = |dir: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let shards = names(&local);
    assert!(shards.len() > 2, "{shards:?}");
    assert_eq!(names(&bucket.join("saved/sharded")), shards);
    serialize::save(&d, Path::new("s3://bucket/saved/dcp"), Format::Dcp).unwrap();
    let local = scratch("s3-save-dcp").join("dcp");
    serialize::save(&d, &local, Format::Dcp).unwrap();
    assert_dicts(
        &serialize::load(Path::new("s3://bucket/saved/dcp/"), Format::Auto, COPY).unwrap(),
        &serialize::load(&local, Format::Auto, COPY).unwrap(),
        "dcp",
    );
    // Read back by a second process, every record and byte checked.
    for url in [
        "s3://bucket/saved/dcp/",
        "s3://bucket/saved/sharded/model.safetensors.index.json",
        "s3://bucket/saved/big.pt",
    ] {
        cli::tessera(&["verify", url]).expect(0);
    }
    // `tessera convert` to a URL: the upload of what it writes locally.
    let url = "s3://bucket/saved/converted.safetensors";
    let input = scratch("s3-convert").join("in.pt");
    serialize::save(&d, &input, Format::Torch).unwrap();
    let run = cli::tessera(&["convert".as_ref(), input.as_os_str(), url.as_ref()]).expect(0);
    assert!(run.stdout.contains(url), "{}", run.stdout);
    let here = input.with_extension("safetensors");
    cli::tessera(&["convert".as_ref(), input.as_os_str(), here.as_os_str()]).expect(0);
    assert_eq!(
        std::fs::read(bucket.join("saved/converted.safetensors")).unwrap(),
        std::fs::read(&here).unwrap()
    );
    for (url, kind) in [
        (
            "http://127.0.0.1:9/a.safetensors",
            tessera::ErrorKind::Unsupported,
        ),
        ("s3://bucket/", tessera::ErrorKind::InvalidArgument),
    ] {
        let e = serialize::save(&d, Path::new(url), Format::Safetensors).expect_err(url);
        assert_eq!(e.kind(), kind, "{e}");
        assert!(e.message().contains(url.trim_end_matches('/')), "{e}");
    }
    assert_eq!(upload_spools(), Vec::<std::path::PathBuf>::new());
}
