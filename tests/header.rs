//! Tests of the public headers: `include/tessera.h` is what cbindgen
//! generates from the sources (freshness: the working tree's copy and the
//! one staged in git), and every header in `include/`
//! compiles on its own as C and C++ with strict warnings, with gcc/g++ and,
//! when installed, clang/clang++. (The parts of tessera.hpp in
//! `include/tessera/` are compiled alone, in both error modes, by
//! `cpp_tests/run.sh`.)

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The header as cbindgen generates it, the way build.rs does.
fn generate_header() -> Vec<u8> {
    let root = root();
    let config = cbindgen::Config::from_file(root.join("cbindgen.toml"))
        .unwrap_or_else(|e| panic!("cannot read cbindgen.toml: {e}"));
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/ffi/mod.rs"))
        .generate()
        .unwrap_or_else(|e| panic!("cbindgen failed: {e}"));
    let mut out = Vec::new();
    bindings.write(&mut out);
    out
}

/// The first line where two texts differ, for the failure message.
fn first_difference(expected: &str, actual: &str) -> String {
    let mut e = expected.lines();
    let mut a = actual.lines();
    for line in 1.. {
        match (e.next(), a.next()) {
            (None, None) => return "no line differs (line endings?)".into(),
            (x, y) if x == y => continue,
            (x, y) => {
                return format!(
                    "first difference at line {line}:\n  generated: {}\n  committed: {}",
                    x.unwrap_or("<end of file>"),
                    y.unwrap_or("<end of file>")
                )
            }
        }
    }
    unreachable!()
}

/// include/tessera.h as the git index holds it (what the next commit
/// holds), or None outside a git checkout or without git.
fn staged_header() -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root())
        .args(["show", ":include/tessera.h"])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8(out.stdout).expect("include/tessera.h is UTF-8"))
}

/// The header the sources generate is the one in the working tree and,
/// in a git checkout, the one staged for the next commit. build.rs
/// rewrites the working tree's copy on every local build that changes
/// src/ffi (CI sets TESSERA_CHECK_HEADER, which stops it), so that
/// comparison alone would pass locally whatever was committed; the staged
/// copy is not rewritten, so a local run fails too while the header to be
/// committed is stale.
#[test]
fn header_is_fresh() {
    let committed_path = root().join("include/tessera.h");
    let working = std::fs::read_to_string(&committed_path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", committed_path.display()));
    let generated = String::from_utf8(generate_header()).expect("cbindgen writes UTF-8");
    assert!(
        generated == working,
        "include/tessera.h is not what cbindgen generates from src/ffi.\n{}\n\
         Regenerate it with `cargo build` (with TESSERA_CHECK_HEADER unset, build.rs \
         rewrites include/tessera.h) and commit it.",
        first_difference(&generated, &working)
    );
    match staged_header() {
        Some(staged) => assert!(
            generated == staged,
            "include/tessera.h as staged in git is not what cbindgen generates from \
             src/ffi (build.rs has rewritten the working tree's copy).\n{}\n\
             Stage the regenerated header (`git add include/tessera.h`) and commit it.",
            first_difference(&generated, &staged)
        ),
        None => println!("no git checkout: the staged include/tessera.h not compared"),
    }
}

/// build.rs writes the header it generated to $OUT_DIR/tessera.h: this test
/// and build.rs must agree (same cbindgen version and settings).
#[test]
fn header_generation_matches_build_script() {
    let from_build = Path::new(env!("OUT_DIR")).join("tessera.h");
    let built = std::fs::read_to_string(&from_build)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", from_build.display()));
    let generated = String::from_utf8(generate_header()).expect("cbindgen writes UTF-8");
    assert!(
        generated == built,
        "tests/header.rs generates a different header than build.rs ({}): keep their \
         cbindgen versions and settings the same.\n{}",
        from_build.display(),
        first_difference(&generated, &built)
    );
}

/// tessera.h with the allocator registration macro at file scope.
const WITH_REGISTRATION: &str = "#include \"tessera.h\"\n\
    static TsrStatus alloc_fn(void *self, size_t n, TsrDevice d, TsrDataPtr *out) {\n\
        (void)self; (void)n; (void)d; (void)out; return TSR_ERR_OUT_OF_MEMORY;\n\
    }\n\
    static const TsrAllocatorVTable vtable = {sizeof(TsrAllocatorVTable), \"t\", alloc_fn,\n\
        NULL, NULL, NULL};\n\
    TSR_REGISTER_ALLOCATOR(TSR_PRIVATE_USE1, &vtable, NULL, 1);\n";

/// The translation units to compile as `language` with `std`, as (what,
/// source): every public header included alone (twice, for its include
/// guard), C headers (`*.h`) as C and C++, C++ headers (`*.hpp`) as C++17
/// and later; and tessera.h with TSR_REGISTER_ALLOCATOR.
fn translation_units(language: &str, std: &str) -> Vec<(String, String)> {
    let dir = root().join("include");
    let mut headers: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| {
            e.expect("directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    headers.sort();
    let old_cpp = matches!(std, "c++11" | "c++14");
    let mut units = Vec::new();
    for h in headers {
        let wanted = h.ends_with(".h") || (h.ends_with(".hpp") && language == "c++" && !old_cpp);
        if wanted {
            units.push((
                format!("{h} alone"),
                format!("#include \"{h}\"\n#include \"{h}\"\n"),
            ));
        }
    }
    assert!(
        units.iter().any(|(what, _)| what == "tessera.h alone"),
        "include/tessera.h is missing"
    );
    units.push((
        "tessera.h with TSR_REGISTER_ALLOCATOR".into(),
        WITH_REGISTRATION.into(),
    ));
    units
}

const STRICT: &[&str] = &["-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only"];

/// Whether `compiler` can be run.
fn installed(compiler: &str) -> bool {
    Command::new(compiler)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Compiles `source` (read from stdin) as `language` with `std`; returns the
/// compiler's complaint on failure.
fn compile(compiler: &str, language: &str, std: &str, source: &str) -> Result<(), String> {
    let mut cmd = Command::new(compiler);
    cmd.args(STRICT)
        .arg(format!("-std={std}"))
        .arg("-I")
        .arg(root().join("include"))
        .args(["-x", language, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot run {compiler}: {e}"))?;
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(source.as_bytes())
        .map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{compiler} -std={std} ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Compiles the translation units with every (required or installed)
/// compiler and standard; the `required` compiler must be present.
fn check_language(language: &str, required: &str, optional: &str, stds: &[&str]) {
    assert!(
        installed(required),
        "{required} is needed to test the headers"
    );
    let mut compilers = vec![required];
    if installed(optional) {
        compilers.push(optional);
    } else {
        println!("{optional} not installed: headers not tested with it");
    }
    let mut failures = Vec::new();
    let mut checked = 0;
    for compiler in &compilers {
        for std in stds {
            for (what, source) in translation_units(language, std) {
                checked += 1;
                if let Err(e) = compile(compiler, language, std, &source) {
                    failures.push(format!("{what}: {e}"));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the headers do not compile:\n{}",
        failures.join("\n")
    );
    println!("{checked} compilations as {language} passed");
}

#[test]
fn header_compiles_alone_as_c() {
    check_language("c", "gcc", "clang", &["c99", "c11", "c17"]);
}

#[test]
fn header_compiles_alone_as_cpp() {
    check_language("c++", "g++", "clang++", &["c++11", "c++17", "c++20"]);
}
