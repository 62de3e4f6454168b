//! The dtypes' C and C++ names against the one dtype table
//! (src/dtype/table.rs). cbindgen writes literals only, so
//! src/ffi/types.rs spells out each `TsrDType` constant, and
//! include/tessera/types.hpp maps C++ element types to them with
//! `dtype_of`: both are kept by hand outside the table. These tests derive
//! what each must say from the table and compare, so a row added, renumbered
//! or renamed in the table fails here until the C and C++ names follow:
//!
//! - every dtype has `TSR_<NAME>` with its number, NAME being c10's name in
//!   capitals with `_` where a lower-case letter meets a capital
//!   (`ComplexHalf` -> `TSR_COMPLEX_HALF`, `Float8_e4m3fn` ->
//!   `TSR_FLOAT8_E4M3FN`);
//! - every other `TsrDType` constant is documented `Alias of TSR_<NAME>.`
//!   and has that constant's number, and `TsrDType`'s documentation gives
//!   the range of numbers the table has;
//! - `dtype_of` maps exactly the dtypes whose kernel element type (the
//!   table's `[element]` column) is a standard C++ type, each to its own
//!   constant.

use std::collections::BTreeMap;
use tessera::DType;

fn read(path: &str) -> String {
    let full = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("cannot read {full}: {e}"))
}

/// The C constant a c10 name gives.
fn c_constant(c10_name: &str) -> String {
    let mut out = String::from("TSR_");
    let mut previous_lower = false;
    for c in c10_name.chars() {
        if c.is_ascii_uppercase() && previous_lower {
            out.push('_');
        }
        previous_lower = c.is_ascii_lowercase();
        out.push(c.to_ascii_uppercase());
    }
    out
}

/// One `pub const TSR_X: TsrDType = N;` of src/ffi/types.rs.
struct Constant {
    value: i64,
    /// Its doc comment, lines joined by spaces.
    doc: String,
}

/// Every `TsrDType` constant of src/ffi/types.rs, by name.
fn dtype_constants() -> BTreeMap<String, Constant> {
    let mut out = BTreeMap::new();
    let mut doc: Vec<String> = Vec::new();
    for line in read("src/ffi/types.rs").lines() {
        let line = line.trim();
        if let Some(d) = line.strip_prefix("///") {
            doc.push(d.trim().to_string());
            continue;
        }
        if let Some(rest) = line.strip_prefix("pub const ") {
            if let Some((name, value)) = rest.split_once(": TsrDType = ") {
                let value = value.trim_end_matches(';');
                let value: i64 = value
                    .parse()
                    .unwrap_or_else(|_| panic!("{name} = {value}: expected a literal"));
                let doc = doc.join(" ");
                assert!(
                    out.insert(name.to_string(), Constant { value, doc })
                        .is_none(),
                    "{name} twice"
                );
            }
        }
        doc.clear();
    }
    out
}

/// (variant, number, element type) of every row of src/dtype/table.rs.
fn table_rows() -> Vec<(String, i64, String)> {
    let mut rows = Vec::new();
    for line in read("src/dtype/table.rs").lines() {
        let line = line.trim();
        let Some(row) = line.strip_prefix('(') else {
            continue;
        };
        let mut cells = row.splitn(3, ", ");
        let (Some(variant), Some(number)) = (cells.next(), cells.next()) else {
            continue;
        };
        let Ok(number) = number.parse::<i64>() else {
            continue;
        };
        let open = row.find('[').expect("a row has an [element] column");
        let close = open + row[open..].find(']').expect("the element column closes");
        rows.push((
            variant.to_string(),
            number,
            row[open + 1..close].to_string(),
        ));
    }
    assert_eq!(rows.len(), DType::COUNT, "the rows of src/dtype/table.rs");
    rows
}

/// The standard C++ type of a kernel element type, if it has one.
fn cpp_type(element: &str) -> Option<&'static str> {
    Some(match element {
        "elem::Bool" => "bool",
        "u8" => "uint8_t",
        "i8" => "int8_t",
        "i16" => "int16_t",
        "i32" => "int32_t",
        "i64" => "int64_t",
        "u16" => "uint16_t",
        "u32" => "uint32_t",
        "u64" => "uint64_t",
        "f32" => "float",
        "f64" => "double",
        "elem::Complex<f32>" => "std::complex<float>",
        "elem::Complex<f64>" => "std::complex<double>",
        _ => return None,
    })
}

#[test]
fn c_constant_names_follow_c10_names() {
    assert_eq!(c_constant("Byte"), "TSR_BYTE");
    assert_eq!(c_constant("ComplexHalf"), "TSR_COMPLEX_HALF");
    assert_eq!(c_constant("BFloat16"), "TSR_BFLOAT16");
    assert_eq!(c_constant("QUInt4x2"), "TSR_QUINT4X2");
    assert_eq!(c_constant("Float8_e4m3fn"), "TSR_FLOAT8_E4M3FN");
    assert_eq!(c_constant("Float4_e2m1fn_x2"), "TSR_FLOAT4_E2M1FN_X2");
}

#[test]
fn every_dtype_has_its_c_constant() {
    let constants = dtype_constants();
    let mut missing = Vec::new();
    for d in DType::ALL {
        let name = c_constant(d.name());
        match constants.get(&name) {
            Some(c) if c.value == i64::from(d.raw()) => {}
            Some(c) => missing.push(format!("{name} is {}, the table says {}", c.value, d.raw())),
            None => missing.push(format!("{name} = {} is missing", d.raw())),
        }
    }
    assert!(
        missing.is_empty(),
        "src/ffi/types.rs against src/dtype/table.rs:\n{}",
        missing.join("\n")
    );
}

/// TsrDType's documentation gives the range of numbers, 0..COUNT-1.
#[test]
fn the_documented_range_is_the_table_s() {
    let text = read("src/ffi/types.rs");
    let doc: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("/// An element type"))
        .take_while(|l| l.starts_with("///"))
        .collect();
    let range = format!("0..{}", DType::COUNT - 1);
    let mentions = doc.iter().filter(|l| l.contains("0..")).count();
    let right = doc.iter().filter(|l| l.contains(&range)).count();
    assert!(
        mentions > 0 && mentions == right,
        "TsrDType's doc in src/ffi/types.rs should give the numbers as {range}:\n{}",
        doc.join("\n")
    );
}

#[test]
fn every_other_dtype_constant_is_an_alias() {
    let constants = dtype_constants();
    let names: Vec<String> = DType::ALL.iter().map(|d| c_constant(d.name())).collect();
    let mut aliases = 0;
    for (name, c) in &constants {
        if names.contains(name) {
            continue;
        }
        let target = c
            .doc
            .strip_prefix("Alias of ")
            .and_then(|t| t.strip_suffix('.'))
            .unwrap_or_else(|| {
                panic!(
                    "{name} is no dtype of src/dtype/table.rs and not documented \
                     `Alias of TSR_<NAME>.` (doc: {:?})",
                    c.doc
                )
            });
        assert!(
            names.iter().any(|n| n == target),
            "{name}: {target} is no dtype"
        );
        assert_eq!(
            c.value, constants[target].value,
            "{name}, an alias of {target}"
        );
        aliases += 1;
    }
    assert!(aliases > 0, "the aliases (TSR_UINT8, ...) were not found");
}

#[test]
fn cpp_dtype_of_is_the_table_s() {
    let constants = dtype_constants();
    let mut want: Vec<(String, i64)> = table_rows()
        .into_iter()
        .filter_map(|(_, n, element)| cpp_type(&element).map(|t| (t.to_string(), n)))
        .collect();
    want.sort();
    let mut have: Vec<(String, i64)> = read("include/tessera/types.hpp")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("TESSERA_DTYPE_OF_("))
        .filter_map(|l| l.strip_suffix(");"))
        .map(|args| {
            let (ty, constant) = args
                .rsplit_once(", ")
                .expect("TESSERA_DTYPE_OF_(type, code)");
            let value = constants
                .get(constant)
                .unwrap_or_else(|| panic!("dtype_of<{ty}>: {constant} is no TsrDType constant"))
                .value;
            (ty.to_string(), value)
        })
        .collect();
    have.sort();
    assert!(!have.is_empty(), "no TESSERA_DTYPE_OF_ line in types.hpp");
    assert_eq!(
        have, want,
        "include/tessera/types.hpp's dtype_of (C++ type, dtype number) against the \
         element types of src/dtype/table.rs"
    );
}
