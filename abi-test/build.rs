//! Generates the ABI layout test of tessera.
//!
//! ctest compares Rust FFI definitions with a C header, but it reads them
//! from a file it macro-expands on its own (`rustc -Zunpretty=expanded`,
//! without the crate's dependencies) and it only knows functions declared in
//! `extern "C" {}` blocks, while tessera *defines* its functions. So this
//! script:
//!
//! 1. walks the module tree under `../src/ffi` (the files cbindgen reads)
//!    and collects what the header exports: `#[repr(C)]` structs and unions
//!    named `Tsr*`, opaque handle structs, `Tsr*` type aliases, `TSR_*`
//!    constants and every `#[no_mangle] extern "C"` function; also public
//!    items with other names (the DLPack structs, declared in a hand-written
//!    block of the header) when the header declares that name, including
//!    those re-exported with `pub use crate::...`;
//! 2. writes them to `$OUT_DIR/abi_items.rs`, a self-contained list of those
//!    items (functions as `extern "C"` declarations) that ctest parses;
//! 3. runs ctest on it: the generated test (`$OUT_DIR/abi.rs`, run by
//!    `tests/abi.rs`) is compiled against the *real* `tessera::ffi` items,
//!    so sizes, alignments, offsets, constant values and function addresses
//!    of the Rust crate are compared with the C header;
//! 4. checks every function signature at build time: it translates the Rust
//!    signature to a C function-pointer type and compiles `ptr = function;`
//!    against the header as C (where a mismatch is an error with -Werror)
//!    and as C++ (where it is always an error).
//!
//! Items under `#[cfg(...)]` are skipped (they depend on features this
//! script cannot see); items documented `cbindgen:ignore` too. Structs not
//! named `Tsr*` mirror hand-written C declarations (where a Rust `i32`
//! field may be a C enum), so their field types are not compared; their
//! sizes, alignments and field offsets are.

use quote::ToTokens;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// What the walk over `src/ffi` found.
#[derive(Default)]
struct Abi {
    /// The identifiers the header contains (declares or mentions).
    header_words: BTreeSet<String>,
    /// Rust paths of the public modules holding ABI items ("ffi::allocator").
    modules: BTreeSet<String>,
    /// Items for ctest, as Rust source.
    items: Vec<String>,
    /// Structs without `#[repr(C)]`: opaque handles (no layout to test).
    opaque: BTreeSet<String>,
    /// Public type aliases the header does not declare (e.g. the deleter
    /// types of the DLPack structs, inline function pointers in C): in the
    /// items file because other items use them, but not tested.
    support_aliases: BTreeSet<String>,
    /// Field renames from `cbindgen:field-names=[...]`: struct -> (rust -> c).
    field_names: BTreeMap<String, BTreeMap<String, String>>,
    /// Exported functions.
    functions: Vec<syn::Signature>,
    /// Items skipped because of a `#[cfg]`.
    skipped: Vec<String>,
}

fn main() {
    let manifest = PathBuf::from(env("CARGO_MANIFEST_DIR"));
    let root = manifest
        .parent()
        .expect("abi-test lives in the repository")
        .to_path_buf();
    let out_dir = PathBuf::from(env("OUT_DIR"));
    let ffi_dir = root.join("src/ffi");
    let include = root.join("include");
    println!("cargo:rerun-if-changed={}", ffi_dir.display());
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed=build.rs");

    let header_text = fs::read_to_string(include.join("tessera.h"))
        .unwrap_or_else(|e| panic!("cannot read include/tessera.h: {e}"));
    let mut abi = Abi {
        header_words: header_text
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .map(str::to_string)
            .collect(),
        ..Abi::default()
    };
    walk_module(&ffi_dir.join("mod.rs"), &ffi_dir, "ffi", true, &mut abi);
    assert!(
        !abi.functions.is_empty() && !abi.items.is_empty(),
        "found no ABI items under {}",
        ffi_dir.display()
    );
    for s in &abi.skipped {
        println!("cargo:warning=ABI test skips {s} (under #[cfg])");
    }

    let items_path = out_dir.join("abi_items.rs");
    fs::write(&items_path, items_file(&abi)).expect("write abi_items.rs");
    let uses: String = abi
        .modules
        .iter()
        .map(|m| format!("pub use tessera::{m}::*;\n"))
        .collect();
    fs::write(out_dir.join("abi_uses.rs"), uses).expect("write abi_uses.rs");

    check_signatures(&abi, &include, &out_dir);
    generate_layout_test(&abi, &include, &items_path);
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("environment variable {name} not set"))
}

/// Reads one module file and the module files it declares.
fn walk_module(file: &Path, dir: &Path, rust_path: &str, public: bool, abi: &mut Abi) {
    let text =
        fs::read_to_string(file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
    let ast =
        syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", file.display()));
    let mut defines_items = false;
    for item in &ast.items {
        if let syn::Item::Mod(m) = item {
            if m.content.is_some() || has_cfg(&m.attrs) {
                continue; // inline modules are tests or private helpers
            }
            let name = m.ident.to_string();
            let child_public = public && matches!(m.vis, syn::Visibility::Public(_));
            let (child_file, child_dir) = if dir.join(format!("{name}.rs")).exists() {
                (dir.join(format!("{name}.rs")), dir.join(&name))
            } else {
                (dir.join(&name).join("mod.rs"), dir.join(&name))
            };
            let child_path = format!("{rust_path}::{name}");
            walk_module(&child_file, &child_dir, &child_path, child_public, abi);
            continue;
        }
        if let syn::Item::Use(u) = item {
            if is_pub(&u.vis) {
                defines_items |= collect_reexports(&u.tree, Vec::new(), abi);
            }
            continue;
        }
        defines_items |= collect_item(item, abi);
    }
    if defines_items {
        assert!(
            public,
            "{} defines ABI items but module {rust_path} is not public",
            file.display()
        );
        abi.modules.insert(rust_path.to_string());
    }
}

/// Collects the items a `pub use crate::a::b::{X, Y}` re-exports from the
/// file that defines them; returns whether any is part of the ABI.
fn collect_reexports(tree: &syn::UseTree, mut prefix: Vec<String>, abi: &mut Abi) -> bool {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            collect_reexports(&p.tree, prefix, abi)
        }
        syn::UseTree::Group(g) => g.items.iter().fold(false, |any, t| {
            collect_reexports(t, prefix.clone(), abi) | any
        }),
        syn::UseTree::Name(n) => reexport(&prefix, &n.ident.to_string(), abi),
        // `as` renames and globs are not followed.
        syn::UseTree::Rename(_) | syn::UseTree::Glob(_) => false,
    }
}

/// Collects item `name` of module `crate::<module...>` (src/ files).
fn reexport(module: &[String], name: &str, abi: &mut Abi) -> bool {
    if module.first().map(String::as_str) != Some("crate") {
        return false;
    }
    let src = PathBuf::from(env("CARGO_MANIFEST_DIR")).join("../src");
    let rel = module[1..].join("/");
    let candidates = [src.join(format!("{rel}.rs")), src.join(&rel).join("mod.rs")];
    let Some(file) = candidates.iter().find(|p| p.exists()) else {
        return false;
    };
    let text = fs::read_to_string(file).expect("read re-exported module");
    let ast =
        syn::parse_file(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", file.display()));
    ast.items
        .iter()
        .filter(|item| item_name(item).as_deref() == Some(name))
        .fold(false, |any, item| collect_item(item, abi) | any)
}

fn item_name(item: &syn::Item) -> Option<String> {
    match item {
        syn::Item::Struct(s) => Some(s.ident.to_string()),
        syn::Item::Union(u) => Some(u.ident.to_string()),
        syn::Item::Type(t) => Some(t.ident.to_string()),
        syn::Item::Const(c) => Some(c.ident.to_string()),
        syn::Item::Fn(f) => Some(f.sig.ident.to_string()),
        _ => None,
    }
}

/// Records one item if it is part of the ABI; returns whether it was.
fn collect_item(item: &syn::Item, abi: &mut Abi) -> bool {
    let (name, attrs, public) = match item {
        syn::Item::Struct(s) => (s.ident.to_string(), &s.attrs, is_pub(&s.vis)),
        syn::Item::Union(u) => (u.ident.to_string(), &u.attrs, is_pub(&u.vis)),
        syn::Item::Type(t) => (t.ident.to_string(), &t.attrs, is_pub(&t.vis)),
        syn::Item::Const(c) => (c.ident.to_string(), &c.attrs, is_pub(&c.vis)),
        syn::Item::Fn(f) => (f.sig.ident.to_string(), &f.attrs, is_pub(&f.vis)),
        _ => return false,
    };
    let exported_fn = matches!(item, syn::Item::Fn(f) if is_exported_fn(f));
    let tessera_named = match item {
        syn::Item::Const(_) => name.starts_with("TSR_"),
        _ => name.starts_with("Tsr"),
    };
    let wanted = match item {
        syn::Item::Fn(_) => exported_fn,
        // other names: only what the (partly hand-written) header declares
        _ => public && (tessera_named || abi.header_words.contains(&name)),
    };
    if !wanted || doc_text(attrs).contains("cbindgen:ignore") {
        if let syn::Item::Type(t) = item {
            if public && !has_cfg(attrs) {
                let mut t = t.clone();
                t.attrs.clear();
                abi.items.push(t.to_token_stream().to_string());
                abi.support_aliases.insert(name);
            }
        }
        return false;
    }
    if has_cfg(attrs) {
        abi.skipped.push(name);
        return false;
    }
    match item {
        syn::Item::Struct(s) if !has_repr_c(&s.attrs) => {
            abi.opaque.insert(name.clone());
            abi.items
                .push(format!("pub struct {name} {{ _private: [u8; 0] }}"));
        }
        syn::Item::Struct(s) => {
            if let Some(renames) = field_renames(&s.attrs, &s.fields) {
                abi.field_names.insert(name.clone(), renames);
            }
            let mut s = s.clone();
            s.attrs.retain(is_repr);
            for f in &mut s.fields {
                f.attrs.clear();
            }
            abi.items.push(s.to_token_stream().to_string());
        }
        syn::Item::Union(u) => {
            let mut u = u.clone();
            u.attrs.retain(is_repr);
            for f in &mut u.fields.named {
                f.attrs.clear();
            }
            abi.items.push(u.to_token_stream().to_string());
        }
        syn::Item::Type(t) => {
            let mut t = t.clone();
            t.attrs.clear();
            abi.items.push(t.to_token_stream().to_string());
        }
        syn::Item::Const(c) => {
            let mut c = c.clone();
            c.attrs.clear();
            abi.items.push(c.to_token_stream().to_string());
        }
        syn::Item::Fn(f) => abi.functions.push(f.sig.clone()),
        _ => unreachable!(),
    }
    true
}

fn is_pub(vis: &syn::Visibility) -> bool {
    matches!(vis, syn::Visibility::Public(_))
}

/// `#[no_mangle]` (or `#[unsafe(no_mangle)]`) `pub extern "C" fn`.
fn is_exported_fn(f: &syn::ItemFn) -> bool {
    let no_mangle = f.attrs.iter().any(|a| {
        a.path().is_ident("no_mangle")
            || (a.path().is_ident("unsafe")
                && a.parse_args::<syn::Path>()
                    .is_ok_and(|p| p.is_ident("no_mangle")))
    });
    let c_abi = f
        .sig
        .abi
        .as_ref()
        .is_some_and(|abi| abi.name.as_ref().is_none_or(|n| n.value() == "C"));
    no_mangle && c_abi && is_pub(&f.vis)
}

fn has_cfg(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().is_ident("cfg"))
}

fn is_repr(a: &syn::Attribute) -> bool {
    a.path().is_ident("repr")
}

fn has_repr_c(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().filter(|a| is_repr(a)).any(|a| {
        let mut c = false;
        let _ = a.parse_nested_meta(|m| {
            c |= m.path.is_ident("C");
            Ok(())
        });
        c
    })
}

/// The item's doc comment, lines joined with '\n'.
fn doc_text(attrs: &[syn::Attribute]) -> String {
    let mut text = String::new();
    for a in attrs {
        if let syn::Meta::NameValue(nv) = &a.meta {
            if nv.path.is_ident("doc") {
                if let syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) = &nv.value
                {
                    text.push_str(s.value().trim());
                    text.push('\n');
                }
            }
        }
    }
    text
}

/// The C names of a struct's fields from a `cbindgen:field-names=[a, b]`
/// annotation, keyed by Rust field name (None without the annotation).
fn field_renames(
    attrs: &[syn::Attribute],
    fields: &syn::Fields,
) -> Option<BTreeMap<String, String>> {
    let doc = doc_text(attrs);
    let list = doc
        .lines()
        .find_map(|l| l.strip_prefix("cbindgen:field-names="))?;
    let names: Vec<String> = list
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|s| s.trim().to_string())
        .collect();
    let rust: Vec<String> = fields
        .iter()
        .map(|f| f.ident.as_ref().expect("named field").to_string())
        .collect();
    assert_eq!(
        names.len(),
        rust.len(),
        "cbindgen:field-names lists {names:?} for fields {rust:?}"
    );
    Some(
        rust.into_iter()
            .zip(names)
            .filter(|(r, c)| r != c)
            .collect(),
    )
}

/// The Rust file ctest reads: the ABI items, functions as declarations.
fn items_file(abi: &Abi) -> String {
    let mut s = String::from(
        "// Generated by abi-test/build.rs from src/ffi: the items of the C ABI.\n\
         use std::ffi::*;\n",
    );
    for item in &abi.items {
        s.push_str(item);
        s.push('\n');
    }
    s.push_str("extern \"C\" {\n");
    for sig in &abi.functions {
        let mut decl = sig.clone();
        decl.unsafety = None;
        decl.abi = None;
        for (i, arg) in decl.inputs.iter_mut().enumerate() {
            if let syn::FnArg::Typed(pt) = arg {
                if !matches!(*pt.pat, syn::Pat::Ident(_)) {
                    let ident: syn::Ident = syn::parse_str(&format!("arg{i}")).expect("ident");
                    *pt.pat = syn::parse_quote!(#ident);
                }
            }
        }
        writeln!(s, "    pub {};", decl.to_token_stream()).unwrap();
    }
    s.push_str("}\n");
    s
}

/// Runs ctest over the items file.
fn generate_layout_test(abi: &Abi, include: &Path, items_path: &Path) {
    let mut cfg = ctest::TestGenerator::new();
    cfg.header("tessera.h").include(include);
    let opaque = abi.opaque.clone();
    cfg.skip_struct(move |s| opaque.contains(s.ident()));
    let opaque = abi.opaque.clone();
    cfg.skip_roundtrip(move |name| opaque.contains(name));
    let renames = abi.field_names.clone();
    cfg.rename_struct_field(move |s, f| {
        renames
            .get(s.ident())
            .and_then(|m| m.get(f.ident()).cloned())
    });
    // Every struct and union of the header has a typedef of its name (the
    // DLPack ones are anonymous structs), so use that, not `struct X`.
    cfg.rename_struct_ty(|ty| Some(ty.to_string()));
    cfg.rename_union_ty(|ty| Some(ty.to_string()));
    cfg.skip_struct_field_type(|s, _| !s.ident().starts_with("Tsr"));
    let support = abi.support_aliases.clone();
    cfg.skip_alias(move |a| support.contains(a.ident()));
    if let Err(e) = ctest::generate_test(&mut cfg, items_path, "abi.rs") {
        panic!("ctest failed on {}: {e}", items_path.display());
    }
}

/// Compiles `pointer = function;` for every exported function against the
/// header, with the pointer's type translated from the Rust signature.
fn check_signatures(abi: &Abi, include: &Path, out_dir: &Path) {
    let mut typedefs = Vec::new();
    let mut body = String::new();
    for sig in &abi.functions {
        let name = sig.ident.to_string();
        let ty = fn_ptr_type(&name, &sig.inputs, &sig.output, &mut typedefs)
            .unwrap_or_else(|e| panic!("cannot translate the signature of {name}: {e}"));
        writeln!(
            body,
            "    {ty} check_{name} = {name};\n    (void)check_{name};"
        )
        .unwrap();
    }
    let source = format!(
        "/* Generated by abi-test/build.rs: each exported function assigned to a\n \
         * pointer of the type its Rust signature has. */\n\
         #include \"tessera.h\"\n\n{}\n\
         void tsr_abi_check_signatures(void);\n\
         void tsr_abi_check_signatures(void) {{\n{body}}}\n",
        typedefs.join("\n")
    );
    for (file, cpp) in [("signatures.c", false), ("signatures.cpp", true)] {
        let path = out_dir.join(file);
        fs::write(&path, &source).expect("write signature check");
        let mut build = cc::Build::new();
        build
            .file(&path)
            .include(include)
            .cpp(cpp)
            .cargo_metadata(false)
            .warnings_into_errors(true)
            .flag("-Wall")
            .flag("-Wextra")
            .flag("-pedantic")
            .flag(if cpp { "-std=c++17" } else { "-std=c99" });
        if let Err(e) = build.try_compile(file.trim_end_matches(".c").trim_end_matches(".cpp")) {
            panic!(
                "the function signatures in include/tessera.h differ from the Rust ones \
                 ({file}, see the compiler output above): {e}"
            );
        }
    }
}

/// A typedef'd C function-pointer type for a Rust signature; returns its
/// name and appends the typedef (and those of nested function pointers).
fn fn_ptr_type(
    name: &str,
    inputs: &syn::punctuated::Punctuated<syn::FnArg, syn::Token![,]>,
    output: &syn::ReturnType,
    typedefs: &mut Vec<String>,
) -> Result<String, String> {
    let mut params = Vec::new();
    for arg in inputs {
        match arg {
            syn::FnArg::Typed(pt) => params.push(c_type(&pt.ty, typedefs)?),
            syn::FnArg::Receiver(_) => return Err("a method cannot be exported".into()),
        }
    }
    let ret = match output {
        syn::ReturnType::Default => "void".to_string(),
        syn::ReturnType::Type(_, ty) => c_type(ty, typedefs)?,
    };
    let params = if params.is_empty() {
        "void".to_string()
    } else {
        params.join(", ")
    };
    let tname = format!("tsr_abi_fn_{name}");
    typedefs.push(format!("typedef {ret} (*{tname})({params});"));
    Ok(tname)
}

/// The C spelling of a Rust FFI type, as cbindgen writes it (with
/// `usize_is_size_t`).
fn c_type(ty: &syn::Type, typedefs: &mut Vec<String>) -> Result<String, String> {
    match ty {
        syn::Type::Paren(p) => c_type(&p.elem, typedefs),
        syn::Type::Tuple(t) if t.elems.is_empty() => Ok("void".into()),
        syn::Type::Ptr(p) => {
            let inner = c_type(&p.elem, typedefs)?;
            Ok(if p.const_token.is_some() {
                format!("{inner} const *")
            } else {
                format!("{inner} *")
            })
        }
        syn::Type::BareFn(f) => {
            let inputs = f
                .inputs
                .iter()
                .map(|a| -> syn::FnArg {
                    let ty = &a.ty;
                    syn::parse_quote!(_x: #ty)
                })
                .collect();
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            fn_ptr_type(&format!("ptr{n}"), &inputs, &f.output, typedefs)
        }
        syn::Type::Path(p) if p.qself.is_none() => {
            let last = p.path.segments.last().ok_or("empty path")?;
            let ident = last.ident.to_string();
            if ident == "Option" {
                // Option<fn> is a nullable function pointer.
                if let syn::PathArguments::AngleBracketed(args) = &last.arguments {
                    if let Some(syn::GenericArgument::Type(inner @ syn::Type::BareFn(_))) =
                        args.args.first()
                    {
                        return c_type(inner, typedefs);
                    }
                }
                return Err(format!("unsupported Option type {}", ty.to_token_stream()));
            }
            Ok(match ident.as_str() {
                "i8" => "int8_t",
                "i16" => "int16_t",
                "i32" => "int32_t",
                "i64" => "int64_t",
                "u8" => "uint8_t",
                "u16" => "uint16_t",
                "u32" => "uint32_t",
                "u64" => "uint64_t",
                "usize" => "size_t",
                "isize" => "ptrdiff_t",
                "f32" => "float",
                "f64" => "double",
                "bool" => "bool",
                "c_void" => "void",
                "c_char" => "char",
                "c_int" => "int",
                "c_uint" => "unsigned int",
                "c_long" => "long",
                "c_ulong" => "unsigned long",
                other => other, // a typedef'd tessera type
            }
            .to_string())
        }
        _ => Err(format!("unsupported type {}", ty.to_token_stream())),
    }
}
