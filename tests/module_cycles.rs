//! Runs scripts/check_module_cycles.py: src/'s modules (the top-level ones,
//! and the sub-modules of each module) must not depend on each other in a
//! cycle (docs/ARCHITECTURE.md draws the resulting layer order). Without
//! python3 the tests print a SKIP line and pass (.ci/run installs it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the checker on `src`, or None when there is no python3.
fn check(src: &Path) -> Option<Output> {
    match Command::new("python3")
        .arg(root().join("scripts/check_module_cycles.py"))
        .arg(src)
        .output()
    {
        Ok(out) => Some(out),
        Err(e) => {
            eprintln!("SKIP: python3 is not available ({e})");
            None
        }
    }
}

#[test]
fn src_has_no_module_cycles() {
    let Some(out) = check(&root().join("src")) else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "module cycles in src/ ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("no module cycles"), "{stdout}");
}

/// The checker itself finds a cycle: a top-level one made through a `use`
/// tree, and a sibling one made through `super::` in an expression, while
/// a path in a comment, a string or a unit test is not an edge.
#[test]
fn checker_reports_a_planted_cycle() {
    let dir = std::env::temp_dir().join(format!("tessera-cycles-{}", std::process::id()));
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    let files = [
        ("lib.rs", "pub mod a;\npub mod b;\npub mod c;\n"),
        ("a.rs", "use crate::{b::{x::X}, c};\npub struct A;\n"),
        ("b/mod.rs", "mod x;\nmod y;\npub use x::X;\n"),
        ("b/x.rs", "pub struct X;\nfn f() { super::y::g() }\n"),
        (
            "b/y.rs",
            "pub fn g() { let _ = super::X; }\n// crate::c::C\n\
             #[cfg(test)]\nmod tests { use crate::c::C; }\n",
        ),
        (
            "c.rs",
            "pub struct C;\nconst S: &str = \"crate::a::A\";\nfn h() { crate::a::A; }\n",
        ),
    ];
    for (path, text) in files {
        std::fs::write(src.join(path), text).unwrap();
    }
    let out = check(&src);
    let clean = |extra: &[(&str, &str)]| {
        for (path, text) in extra {
            std::fs::write(src.join(path), text).unwrap();
        }
        check(&src)
    };
    let Some(out) = out else {
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("CYCLE (crate): a -> c -> a"), "{stdout}");
    assert!(stdout.contains("CYCLE (b): x -> y -> x"), "{stdout}");
    // Without the two back edges (c -> a in code, y -> x through b's
    // re-export), the paths left in a comment, a string and a test module
    // make no edge: no cycle.
    let out = clean(&[
        (
            "b/y.rs",
            "pub fn g() {}\n// crate::c::C\n#[cfg(test)]\nmod tests { use crate::a::A; }\n",
        ),
        ("c.rs", "pub struct C;\nconst S: &str = \"crate::a::A\";\n"),
    ])
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains("no module cycles"), "{stdout}");
}
