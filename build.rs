//! Sets the shared library's SONAME and generates the C header with
//! cbindgen.
//!
//! SONAME: `libtessera.so.0.<MINOR>` while the version is 0.x, then
//! `libtessera.so.<MAJOR>` (docs/ABI.md, "ABI evolution"). Under cargo-c
//! (`cargo cbuild` / `cargo cinstall`), cargo-c passes the same SONAME
//! itself (from `[package.metadata.capi]`), so this script adds none: two
//! `-soname` options would leave the linker's choice to their order.
//!
//! Python: a second generation of the same declarations for cffi's C
//! parser (no includes, include guard, C++ part or macros of the
//! trailer; the DLPack structs opaque), written to `header.h` in cargo's
//! target directory, where maturin's cffi bindings read it
//! (pyproject.toml, python/tessera/_native.py).
//!
//! Header: generated to $OUT_DIR/tessera.h on every build (tests/header.rs
//! compares it with its own generation), and copied to include/tessera.h
//! when it changed, only in a development checkout of the repository (a
//! `.git` next to Cargo.toml) and when TESSERA_CHECK_HEADER is unset. A
//! copy from crates.io or `cargo vendor` is never written to (cargo
//! forbids a build script changing a packaged source), and CI sets
//! TESSERA_CHECK_HEADER so that `header_is_fresh` fails on a stale
//! committed header instead of the build fixing it silently. Locally the
//! test fails too while the copy staged in git is stale (this script
//! never touches the index): stage and commit what it wrote.

use std::env;
use std::fs;
use std::path::PathBuf;

/// The SONAME rule of docs/ABI.md.
fn soname(major: &str, minor: &str) -> String {
    if major == "0" {
        format!("libtessera.so.0.{minor}")
    } else {
        format!("libtessera.so.{major}")
    }
}

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=TESSERA_CHECK_HEADER");
    println!("cargo:rerun-if-env-changed=CARGO_C_CARGO");

    let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("CARGO_PKG_VERSION_MAJOR");
    let minor = env::var("CARGO_PKG_VERSION_MINOR").expect("CARGO_PKG_VERSION_MINOR");
    // cargo-c runs cargo in its own process and sets CARGO_C_CARGO there
    // before building, so build scripts inherit it (cargo-c 0.9 and 0.10).
    let under_cargo_c = env::var_os("CARGO_C_CARGO").is_some();
    // The target triple, for tests that compile C for the same target
    // (tests/c_api.rs): under a cross build the host's rustc names another.
    println!(
        "cargo:rustc-env=TESSERA_TARGET={}",
        env::var("TARGET").expect("TARGET")
    );
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") && !under_cargo_c {
        println!(
            "cargo:rustc-cdylib-link-arg=-Wl,-soname,{}",
            soname(&major, &minor)
        );
    }
    // Only tessera's own tsr_ functions are exported: a dependency's
    // #[no_mangle] functions (crc-fast's crc_fast_*, under object_store's
    // S3 support, feature remote) would be exported by the cdylib too.
    // Dependencies are linked as archives (rlibs); their symbols are made
    // local (ELF linkers: GNU ld, lld, gold).
    let elf = !matches!(
        env::var("CARGO_CFG_TARGET_OS").as_deref(),
        Ok("windows" | "macos" | "ios")
    );
    if elf {
        println!("cargo:rustc-cdylib-link-arg=-Wl,--exclude-libs,ALL");
    }

    let config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("read cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/ffi/mod.rs"))
        .generate()
        .expect("cbindgen failed to generate include/tessera.h");
    let generated = out_dir.join("tessera.h");
    bindings.write_to_file(&generated);

    cffi_header(&root, &out_dir);

    let checkout = root.join(".git").exists();
    if checkout && env::var_os("TESSERA_CHECK_HEADER").is_none() {
        let committed = root.join("include/tessera.h");
        let new = fs::read(&generated).expect("read generated header");
        if fs::read(&committed).ok().as_deref() != Some(&new[..]) {
            fs::write(&committed, &new).expect("write include/tessera.h");
        }
    }
}

/// The declarations cffi reads: DLPack's managed tensors as opaque
/// structs (Python passes them on in capsules, never looks inside).
const CFFI_DLPACK: &str = "typedef struct DLManagedTensor DLManagedTensor;\n\
typedef struct DLManagedTensorVersioned DLManagedTensorVersioned;\n";

/// Writes the header for cffi ([`CFFI_DLPACK`], then the declarations of
/// include/tessera.h in plain C) to $OUT_DIR/tessera_cffi.h and to
/// `header.h` in the target directory ([`target_dir`]), where maturin
/// looks for it.
fn cffi_header(root: &std::path::Path, out_dir: &std::path::Path) {
    let mut config =
        cbindgen::Config::from_file(root.join("cbindgen.toml")).expect("read cbindgen.toml");
    config.cpp_compat = false;
    config.include_guard = None;
    config.no_includes = true;
    config.sys_includes = Vec::new();
    config.header = None;
    config.trailer = None;
    config.after_includes = Some(CFFI_DLPACK.to_owned());
    config.documentation = false;
    let bindings = cbindgen::Builder::new()
        .with_config(config)
        .with_src(root.join("src/ffi/mod.rs"))
        .generate()
        .expect("cbindgen failed to generate the cffi header");
    let generated = out_dir.join("tessera_cffi.h");
    bindings.write_to_file(&generated);
    if let Some(target) = target_dir(out_dir) {
        let header = target.join("header.h");
        let new = fs::read(&generated).expect("read the cffi header");
        if fs::read(&header).ok().as_deref() != Some(&new[..]) {
            fs::write(&header, &new).expect("write header.h for cffi");
        }
    }
}

/// Cargo's target directory, from OUT_DIR
/// (`<target>[/<triple>]/<profile>/build/<package>-<hash>/out`); None
/// for another layout.
fn target_dir(out_dir: &std::path::Path) -> Option<&std::path::Path> {
    let build = out_dir.parent()?.parent()?;
    if build.file_name()? != "build" {
        return None;
    }
    let above_profile = build.parent()?.parent()?;
    let triple = env::var("TARGET").ok();
    match above_profile.file_name() {
        Some(name) if triple.as_deref() == name.to_str() => above_profile.parent(),
        _ => Some(above_profile),
    }
}
