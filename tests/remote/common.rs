//! What the remote tests share: servers started on 127.0.0.1 (a free
//! port each) and stopped when dropped, their trees of fixtures, and the
//! settings every remote test runs with.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A server process, killed when dropped.
pub struct Server {
    child: Child,
    pub port: u16,
    pub root: PathBuf,
}

impl Server {
    /// A server already started as `child`, listening on `port`.
    pub fn new(child: Child, port: u16, root: &Path) -> Server {
        Server {
            child,
            port,
            root: root.to_path_buf(),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // SIGTERM first: nginx's master then stops its workers (killed,
        // it would leave them running).
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::time::Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The settings remote tests run with: short timeouts (2 s; 10 s under
/// qemu-user, where the client runs emulated on a loaded machine), one
/// retry. Set once, before any remote open.
pub fn settings() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let emulated = std::env::var_os("TESSERA_TEST_QEMU_USER").is_some();
        let timeout = if emulated { "10000" } else { "2000" };
        std::env::set_var("TSR_REMOTE_TIMEOUT_MS", timeout);
        std::env::set_var("TSR_REMOTE_RETRIES", "1");
    });
}

/// Whether `tool` runs (`tool --version`; nginx `-v`, openssl `version`); if not, says
/// so on stderr (the test is skipped: CI installs every tool, `.ci/run`).
pub fn have(tool: &str) -> bool {
    let ok = Command::new(tool)
        .arg(if tool.ends_with("nginx") {
            "-v"
        } else if tool == "openssl" {
            "version"
        } else {
            "--version"
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: {tool} is not installed here (CI installs it: .ci/run install_tools)");
    }
    ok
}

/// A scratch directory of `name` for this process.
pub fn scratch(name: &str) -> PathBuf {
    let p = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("remote-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    std::fs::create_dir_all(&p).unwrap();
    p
}

/// Copies the tree `from` to `to`.
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// The GETs of files tests/remote/http_server.py on `port` answered so
/// far (its /stats).
pub fn gets(port: u16) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(s, "GET /stats HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let n = answer.rsplit("gets ").next().unwrap_or_default();
    n.trim()
        .parse()
        .unwrap_or_else(|_| panic!("/stats said {answer:?}"))
}

/// tests/remote/http_server.py serving `root`; None (said on stderr)
/// without python3.
pub fn python_server(root: &Path) -> Option<Server> {
    if !have("python3") {
        return None;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/remote/http_server.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg("--root")
        .arg(root)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("PORT ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the test server said {line:?}"));
    Some(Server {
        child,
        port,
        root: root.to_path_buf(),
    })
}

/// A free port on 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
