//! TESSERA_ALLOC_CONF applied at start-up: each test runs this binary
//! again as a child process with the variable set (it is read once per
//! process), and the child checks what it sees.

#[path = "common/this_binary.rs"]
mod this_binary;

use tessera::allocator::caching::{self, CachingOptions};
use tessera::allocator::{cpu, history, Allocator};

/// Runs the test `name` of this binary in a child with `conf`; returns
/// its stderr.
fn child(name: &str, conf: &str) -> String {
    child_os(name, conf.as_ref())
}

/// As [`child`], with any bytes as the value.
fn child_os(name: &str, conf: &std::ffi::OsStr) -> String {
    let out = this_binary::command()
        .args([
            name,
            "--exact",
            "--nocapture",
            "--ignored",
            "--test-threads=1",
        ])
        .env("TESSERA_ALLOC_CONF", conf)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child {name} failed:\n{stdout}\n{stderr}"
    );
    stderr
}

#[test]
#[ignore = "run by every_key_applies in a child process"]
fn child_every_key() {
    let _ = Allocator::cpu().allocate(8).unwrap();
    assert!(history::is_recording(), "record_history:true");
    assert_eq!(cpu::cache_limit(), 3 << 20, "cpu_cache_limit_mb:3");
    let o = cpu::options();
    assert!(o.junk_fill && o.huge_pages && !o.zero_fill);
    // max_entries:3 bounds the ring.
    let a: Vec<_> = (0..10)
        .map(|_| Allocator::cpu().allocate(64).unwrap())
        .collect();
    drop(a);
    assert_eq!(history::events().len(), 3);
    let c = caching::new(Allocator::cpu(), CachingOptions::default()).unwrap();
    assert_eq!(caching::of(&c).unwrap().max_split_size(), 64 << 20);
}

#[test]
fn every_key_applies() {
    let err = child(
        "child_every_key",
        "record_history:true,max_entries:3,backtraces:false,cpu_cache_limit_mb:3,junk_fill:true,\
         huge_pages:true,max_split_size_mb:64",
    );
    assert!(!err.contains("warning"), "{err}");
}

#[test]
#[ignore = "run by bad_entries_warn_and_the_rest_applies in a child process"]
fn child_bad_entries() {
    let _ = Allocator::cpu().allocate(8).unwrap();
    assert!(!history::is_recording());
    assert_eq!(cpu::cache_limit(), 1 << 20);
}

#[test]
fn bad_entries_warn_and_the_rest_applies() {
    let err = child(
        "child_bad_entries",
        "colour:blue,record_history:maybe,cpu_cache_limit_mb:1",
    );
    assert!(
        err.contains("tessera: warning: TESSERA_ALLOC_CONF: unknown key 'colour'; accepted keys:"),
        "{err}"
    );
    assert!(
        err.contains("bad value 'maybe' for key 'record_history': expected true or false"),
        "{err}"
    );
}

// Unix: a variable's value is bytes there; Windows' are UTF-16.
#[cfg(unix)]
#[test]
#[ignore = "run by non_utf8_value_warns in a child process"]
fn child_non_utf8() {
    let _ = Allocator::cpu().allocate(8).unwrap();
    assert!(!history::is_recording(), "the whole value is ignored");
}

#[cfg(unix)]
#[test]
fn non_utf8_value_warns() {
    use std::os::unix::ffi::OsStringExt;
    let conf = std::ffi::OsString::from_vec(b"record_history:\xff\xfe".to_vec());
    let err = child_os("child_non_utf8", &conf);
    assert!(
        err.contains(
            "tessera: warning: TESSERA_ALLOC_CONF is not UTF-8: 'record_history:\u{fffd}\u{fffd}'"
        ),
        "{err}"
    );
    assert!(err.contains("(ignored)"), "{err}");
}
