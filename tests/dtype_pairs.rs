//! promote_types and can_cast for every pair of the 47 dtypes, against
//! tests/data/dtype_pairs.txt (written by scripts/dtype_pairs.py from
//! c10 2.15's rules, and checked there against the oracle's 144 rows),
//! through the Rust API and the C functions.

use std::ffi::CStr;
use tessera::ffi::dtype::{tsr_can_cast, tsr_promote_types};
use tessera::ffi::last_error::tsr_last_error_message;
use tessera::ffi::types::{TSR_ERR_DTYPE, TSR_OK};
use tessera::{DType, ErrorKind};

struct Pair {
    a: DType,
    b: DType,
    result: Result<DType, String>,
    can_cast: bool,
}

fn pairs() -> Vec<Pair> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/dtype_pairs.txt"
    ))
    .expect("tests/data/dtype_pairs.txt");
    let dtype = |n: &str| DType::from_name(n).unwrap_or_else(|| panic!("unknown dtype {n}"));
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 4, "{l}");
            Pair {
                a: dtype(f[0]),
                b: dtype(f[1]),
                result: match f[2].strip_prefix('!') {
                    Some(why) => Err(why.to_string()),
                    None => Ok(dtype(f[2])),
                },
                can_cast: f[3] == "1",
            }
        })
        .collect()
}

/// The words the refusal message carries for each reason c10 refuses.
fn reason_word(why: &str) -> &'static str {
    match why {
        "quantized" => "quantized",
        "undefined" => "Undefined",
        "float8" => "Float8",
        "unsigned" => "floating types",
        "no_rule" => "no promotion rule",
        other => panic!("unknown reason {other}"),
    }
}

#[test]
fn every_pair_promotes_as_c10() {
    let pairs = pairs();
    assert_eq!(pairs.len(), 47 * 47);
    let mut wrong = Vec::new();
    for p in &pairs {
        let got = tessera::dtype::promote_types(p.a, p.b);
        match (&p.result, got) {
            (Ok(want), Ok(got)) if *want == got => {}
            (Err(why), Err(e))
                if e.kind() == ErrorKind::DType
                    && e.message().contains(reason_word(why))
                    && e.message().contains(&format!("{} and {}", p.a, p.b)) => {}
            (want, got) => wrong.push(format!("{} {}: want {want:?}, got {got:?}", p.a, p.b)),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} pairs differ:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

#[test]
fn every_pair_promotes_as_c10_through_c() {
    for p in pairs() {
        let mut out: i8 = -1;
        // SAFETY: `out` is a valid i8.
        let status = unsafe { tsr_promote_types(p.a.raw(), p.b.raw(), &mut out) };
        match p.result {
            Ok(want) => {
                assert_eq!(status, TSR_OK, "{} {}", p.a, p.b);
                assert_eq!(out, want.raw(), "{} {}", p.a, p.b);
            }
            Err(_) => {
                assert_eq!(status, TSR_ERR_DTYPE, "{} {}", p.a, p.b);
                assert_eq!(out, -1, "untouched on error");
                // SAFETY: the last error message is a NUL-terminated string
                // owned by this thread.
                let msg = unsafe { CStr::from_ptr(tsr_last_error_message()) }
                    .to_str()
                    .unwrap();
                assert!(
                    msg.contains("tsr_promote_types")
                        && msg.contains(p.a.name())
                        && msg.contains(p.b.name()),
                    "{msg}"
                );
            }
        }
    }
}

#[test]
fn every_pair_can_cast_as_c10() {
    let mut wrong = Vec::new();
    for p in pairs() {
        let rust = tessera::dtype::can_cast(p.a, p.b);
        let c = tsr_can_cast(p.a.raw(), p.b.raw());
        if rust != p.can_cast || c != p.can_cast {
            wrong.push(format!(
                "can_cast({} -> {}): want {}, got {rust} / C {c}",
                p.a, p.b, p.can_cast
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn spot_facts_of_the_rules() {
    // spot facts a reader can check against c10's table and rules
    use DType::*;
    let p = |a, b| tessera::dtype::promote_types(a, b).ok();
    assert_eq!(p(BFloat16, Half), Some(Float));
    assert_eq!(p(BComplex32, Int), Some(BComplex32));
    assert_eq!(p(BComplex32, Half), Some(ComplexFloat));
    assert_eq!(p(UInt4, Float4E2M1FnX2), Some(Float4E2M1FnX2));
    assert_eq!(p(Bits8, Bits8), Some(Bits8));
    assert_eq!(p(Int4, Int4), Some(Int4));
    assert_eq!(p(Int4, Float), None);
    assert_eq!(p(Float8E8M0Fnu, Float), None);
}
