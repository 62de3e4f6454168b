//! The DLPack block of include/tessera.h: it compiles as C and C++ with
//! dlpack.h included before or after it (c_tests/dlpack_fixture stands in
//! for dlpack.h, with the same guard), an old dlpack.h is rejected, and
//! the C layout equals the Rust mirrors in tessera::ffi::dlpack.
//!
//! Needs a C compiler (`$CC`, else `cc`) and, for the C++ cases, a C++
//! compiler (`$CXX`, else `c++`); a missing one skips with a message.

use std::mem::{offset_of, size_of};
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera::ffi::dlpack::*;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn compiler(var: &str, default: &str) -> Option<String> {
    let cc = std::env::var(var).unwrap_or_else(|_| default.to_string());
    let works = Command::new(&cc)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if works {
        Some(cc)
    } else {
        eprintln!("SKIP: no working compiler `{cc}` (set {var})");
        None
    }
}

/// A scratch directory of this test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tessera-dlpack-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Compiles `source` (syntax only), returning (success, stderr).
fn compile(cc: &str, flags: &[&str], source: &Path, include: &[&Path]) -> (bool, String) {
    let mut cmd = Command::new(cc);
    cmd.args(flags)
        .args(["-Wall", "-Wextra", "-Werror", "-fsyntax-only"]);
    for dir in include {
        cmd.arg("-I").arg(dir);
    }
    let out = cmd.arg(source).output().expect("run the compiler");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const TESSERA: &str = "#include \"tessera.h\"\n";
const DLPACK: &str = "#include \"dlpack_fixture/dlpack/dlpack.h\"\n";

/// Uses both headers: tessera's functions with whichever DLPack types won.
const BODY: &str = r#"
int probe(DLManagedTensorVersioned *m, DLManagedTensor *l, TsrTensor **out);
int probe(DLManagedTensorVersioned *m, DLManagedTensor *l, TsrTensor **out) {
    DLDevice d = {kDLCPU, 0};
    (void)d;
    if (m->version.major != DLPACK_MAJOR_VERSION) return -1;
    return tsr_tensor_from_dlpack(m, out) + tsr_tensor_from_dlpack_legacy(l, out);
}
"#;

#[test]
fn both_include_orders_compile_as_c_and_cpp() {
    let dir = scratch("orders");
    let include = root().join("include");
    let c_tests = root().join("c_tests");
    let mut langs: Vec<(String, &str, Vec<&str>)> = Vec::new();
    if let Some(cc) = compiler("CC", "cc") {
        langs.push((cc.clone(), "c", vec!["-std=c99", "-pedantic"]));
        langs.push((cc, "c", vec!["-std=c11", "-pedantic"]));
    }
    if let Some(cxx) = compiler("CXX", "c++") {
        langs.push((cxx.clone(), "cpp", vec!["-std=c++11", "-pedantic"]));
        langs.push((cxx, "cpp", vec!["-std=c++17"]));
    }
    for (cc, ext, flags) in &langs {
        for (name, first, second) in [
            ("tessera_first", TESSERA, DLPACK),
            ("dlpack_first", DLPACK, TESSERA),
        ] {
            let src = dir.join(format!("{name}.{ext}"));
            std::fs::write(&src, format!("{first}{second}{BODY}")).unwrap();
            let (ok, stderr) = compile(cc, flags, &src, &[&include, &c_tests]);
            assert!(ok, "{cc} {flags:?} {name}:\n{stderr}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_dlpack_h_of_another_major_version_is_rejected() {
    let Some(cc) = compiler("CC", "cc") else {
        return;
    };
    let dir = scratch("major");
    // 0.x headers had no DLPACK_MAJOR_VERSION; a 2.x one would change the
    // layout of the structs tessera's functions take.
    for (name, defines) in [
        ("old", "#define DLPACK_VERSION 70\n"),
        (
            "new",
            "#define DLPACK_MAJOR_VERSION 2\n#define DLPACK_MINOR_VERSION 0\n",
        ),
    ] {
        let header = format!("{name}_dlpack.h");
        std::fs::write(
            dir.join(&header),
            format!("#ifndef DLPACK_DLPACK_H_\n#define DLPACK_DLPACK_H_\n{defines}#endif\n"),
        )
        .unwrap();
        let src = dir.join(format!("{name}.c"));
        std::fs::write(&src, format!("#include \"{header}\"\n{TESSERA}")).unwrap();
        let (ok, stderr) = compile(&cc, &["-std=c99"], &src, &[&root().join("include")]);
        assert!(!ok, "a {name} dlpack.h must not compile");
        assert!(
            stderr.contains("needs a dlpack.h of major version 1"),
            "{stderr}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The C layout, as `name value` lines printed by a C program built from
/// the header alone.
const LAYOUT_PROGRAM: &str = r#"
#include <stdio.h>
#include <stddef.h>
#define P(expr) printf("%s %zu\n", #expr, (size_t)(expr))
int main(void) {
    P(sizeof(DLDevice)); P(offsetof(DLDevice, device_id));
    P(sizeof(DLDataType)); P(offsetof(DLDataType, bits)); P(offsetof(DLDataType, lanes));
    P(sizeof(DLPackVersion)); P(offsetof(DLPackVersion, minor));
    P(sizeof(DLTensor)); P(offsetof(DLTensor, device)); P(offsetof(DLTensor, ndim));
    P(offsetof(DLTensor, dtype)); P(offsetof(DLTensor, shape));
    P(offsetof(DLTensor, strides)); P(offsetof(DLTensor, byte_offset));
    P(sizeof(DLManagedTensor)); P(offsetof(DLManagedTensor, manager_ctx));
    P(offsetof(DLManagedTensor, deleter));
    P(sizeof(DLManagedTensorVersioned)); P(offsetof(DLManagedTensorVersioned, manager_ctx));
    P(offsetof(DLManagedTensorVersioned, deleter)); P(offsetof(DLManagedTensorVersioned, flags));
    P(offsetof(DLManagedTensorVersioned, dl_tensor));
    return 0;
}
"#;

#[test]
fn c_layout_equals_the_rust_mirrors() {
    let Some(cc) = compiler("CC", "cc") else {
        return;
    };
    let rust: Vec<(&str, usize)> = vec![
        ("sizeof(DLDevice)", size_of::<DLDevice>()),
        (
            "offsetof(DLDevice, device_id)",
            offset_of!(DLDevice, device_id),
        ),
        ("sizeof(DLDataType)", size_of::<DLDataType>()),
        ("offsetof(DLDataType, bits)", offset_of!(DLDataType, bits)),
        ("offsetof(DLDataType, lanes)", offset_of!(DLDataType, lanes)),
        ("sizeof(DLPackVersion)", size_of::<DLPackVersion>()),
        (
            "offsetof(DLPackVersion, minor)",
            offset_of!(DLPackVersion, minor),
        ),
        ("sizeof(DLTensor)", size_of::<DLTensor>()),
        ("offsetof(DLTensor, device)", offset_of!(DLTensor, device)),
        ("offsetof(DLTensor, ndim)", offset_of!(DLTensor, ndim)),
        ("offsetof(DLTensor, dtype)", offset_of!(DLTensor, dtype)),
        ("offsetof(DLTensor, shape)", offset_of!(DLTensor, shape)),
        ("offsetof(DLTensor, strides)", offset_of!(DLTensor, strides)),
        (
            "offsetof(DLTensor, byte_offset)",
            offset_of!(DLTensor, byte_offset),
        ),
        ("sizeof(DLManagedTensor)", size_of::<DLManagedTensor>()),
        (
            "offsetof(DLManagedTensor, manager_ctx)",
            offset_of!(DLManagedTensor, manager_ctx),
        ),
        (
            "offsetof(DLManagedTensor, deleter)",
            offset_of!(DLManagedTensor, deleter),
        ),
        (
            "sizeof(DLManagedTensorVersioned)",
            size_of::<DLManagedTensorVersioned>(),
        ),
        (
            "offsetof(DLManagedTensorVersioned, manager_ctx)",
            offset_of!(DLManagedTensorVersioned, manager_ctx),
        ),
        (
            "offsetof(DLManagedTensorVersioned, deleter)",
            offset_of!(DLManagedTensorVersioned, deleter),
        ),
        (
            "offsetof(DLManagedTensorVersioned, flags)",
            offset_of!(DLManagedTensorVersioned, flags),
        ),
        (
            "offsetof(DLManagedTensorVersioned, dl_tensor)",
            offset_of!(DLManagedTensorVersioned, dl_tensor),
        ),
    ];
    let dir = scratch("layout");
    // Both the header's own block and the dlpack.h stand-in.
    for (name, prelude) in [("tessera", TESSERA), ("fixture", DLPACK)] {
        let src = dir.join(format!("{name}.c"));
        let exe = dir.join(name);
        std::fs::write(&src, format!("{prelude}{TESSERA}{LAYOUT_PROGRAM}")).unwrap();
        let status = Command::new(&cc)
            .args(["-std=c99", "-I"])
            .arg(root().join("include"))
            .arg("-I")
            .arg(root().join("c_tests"))
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .status()
            .expect("run the compiler");
        assert!(status.success(), "compiling the layout program ({name})");
        let out = Command::new(&exe).output().expect("run the layout program");
        let text = String::from_utf8(out.stdout).unwrap();
        let c: Vec<(String, usize)> = text
            .lines()
            .map(|l| {
                let (k, v) = l.rsplit_once(' ').unwrap();
                (k.to_string(), v.parse().unwrap())
            })
            .collect();
        assert_eq!(c.len(), rust.len(), "{text}");
        for ((ck, cv), (rk, rv)) in c.iter().zip(&rust) {
            assert_eq!(ck, rk);
            assert_eq!(cv, rv, "{name}: {ck}: C {cv}, Rust {rv}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
