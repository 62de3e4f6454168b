//! Generates the C header with cbindgen and sets the shared library's SONAME.
//!
//! The header is written to $OUT_DIR/tessera.h on every build and copied to
//! include/tessera.h when it changed, unless TESSERA_CHECK_HEADER is set
//! (CI), in which case include/ is left alone and the `header_is_fresh`
//! test fails if the committed header differs from the generated one.

use std::env;
use std::fs;
use std::path::PathBuf;

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed=src/ffi");
    println!("cargo:rerun-if-changed=cbindgen.toml");
    println!("cargo:rerun-if-env-changed=TESSERA_CHECK_HEADER");

    let major = env::var("CARGO_PKG_VERSION_MAJOR").expect("CARGO_PKG_VERSION_MAJOR");
    if env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libtessera.so.{major}");
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

    if env::var_os("TESSERA_CHECK_HEADER").is_none() {
        let committed = root.join("include/tessera.h");
        let new = fs::read(&generated).expect("read generated header");
        if fs::read(&committed).ok().as_deref() != Some(&new[..]) {
            fs::write(&committed, &new).expect("write include/tessera.h");
        }
    }
}
