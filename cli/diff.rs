//! `tessera diff`: the differences between the tensors of two files.

use crate::fail::{Fail, Outcome, DIFFERENT};
use crate::input::{self, LoadArgs};
use crate::progress::Progress;
use crate::text;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use tessera::{DType, Tensor};

/// What `--help` says after the options: what the command does, in
/// full, and examples (an `after_help`: a `long_about` would make clap
/// print every option on two lines, past a screen).
const DETAILS: &str = "\
Lists names on one side only, dtypes and shapes that differ, and for each\n\
tensor whose values differ: how many elements do, the largest absolute\n\
difference |a - b| and the largest relative one |a - b| / |b|, and where.\n\
\n\
Elements are equal when their values are (0.0 and -0.0 are; NaN and NaN\n\
are), or within the tolerance: |a - b| <= atol + rtol * |b|, as\n\
numpy.allclose (0 and 0 by default: exactly equal). Exit status 0 when every\n\
tensor is in both files with the same dtype, shape and values, 1 otherwise.\n\
Metadata is not compared.\n\
\n\
Examples:\n\
\x20 tessera diff model.pt model.safetensors\n\
\x20 tessera diff --rtol 1e-3 model_fp32.safetensors model_bf16.safetensors";

/// Compare the tensors of two files (exit status 1 when they differ)
#[derive(clap::Args, Debug)]
#[command(after_help = DETAILS)]
pub struct Args {
    /// The first file (a)
    #[arg(value_name = "A")]
    a: PathBuf,
    /// The second file (b)
    #[arg(value_name = "B")]
    b: PathBuf,
    /// Relative tolerance: elements within atol + rtol * |b| are equal
    #[arg(long, default_value_t = 0.0, value_parser = tolerance)]
    rtol: f64,
    /// Absolute tolerance: elements within atol + rtol * |b| are equal
    #[arg(long, default_value_t = 0.0, value_parser = tolerance)]
    atol: f64,
    /// Print nothing: the exit status says whether the files differ
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    load: LoadArgs,
}

fn tolerance(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("'{s}' is not a tolerance: expected a number >= 0")),
    }
}

/// Elements compared at a time (their f64 copies: 16 MiB at most).
const CHUNK: i64 = 1 << 20;

/// The largest difference seen: its size, its flat index, and the two
/// values there (real dtypes).
#[derive(Clone, Copy)]
struct Largest {
    value: f64,
    at: u64,
    pair: Option<(f64, f64)>,
}

/// What comparing two tensors of one shape found.
#[derive(Default)]
struct Found {
    /// Elements not equal within the tolerance.
    differ: u64,
    /// The largest |a - b| and |a - b| / |b| over elements whose values
    /// differ at all.
    max_abs: Option<Largest>,
    max_rel: Option<Largest>,
}

impl Found {
    fn note(&mut self, at: u64, abs: f64, rel: f64, pair: Option<(f64, f64)>) {
        if self.max_abs.is_none_or(|m| abs > m.value) {
            self.max_abs = Some(Largest {
                value: abs,
                at,
                pair,
            });
        }
        if self.max_rel.is_none_or(|m| rel > m.value) {
            self.max_rel = Some(Largest {
                value: rel,
                at,
                pair,
            });
        }
    }
}

/// The values of a chunk as f64 (complex: re, im pairs), or None for a
/// dtype without arithmetic (quantized, bits, sub-byte: bytes compared).
fn values(t: &Tensor, complex: bool) -> Option<Vec<f64>> {
    let target = if complex {
        DType::ComplexDouble
    } else {
        DType::Double
    };
    let converted = t.to_dtype(target).ok()?;
    let bytes = tessera::serialize::row_major(&converted);
    Some(
        bytes
            .chunks_exact(8)
            .map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes")))
            .collect(),
    )
}

/// Compares `a` and `b` (same shape) element by element.
fn compare(
    a: &Tensor,
    b: &Tensor,
    args: &Args,
    done: &mut dyn FnMut(u64),
) -> Result<Found, String> {
    let err = |e: tessera::Error| e.message().to_owned();
    let fa = a.reshape(&[-1]).map_err(err)?;
    let fb = b.reshape(&[-1]).map_err(err)?;
    let n = fa.numel();
    let same = a.dtype() == b.dtype();
    let exact = same && (a.dtype().is_integral(true) || a.dtype().is_storage_only());
    let complex = a.dtype().is_complex() || b.dtype().is_complex();
    let width = if complex { 2 } else { 1 };
    let (ia, ib) = (a.itemsize(), b.itemsize());
    let mut found = Found::default();
    let mut start = 0i64;
    while start < n {
        let len = CHUNK.min(n - start);
        let ca = fa.narrow(0, start, len).map_err(err)?;
        let cb = fb.narrow(0, start, len).map_err(err)?;
        let (ra, rb) = (
            tessera::serialize::row_major(&ca),
            tessera::serialize::row_major(&cb),
        );
        if same && ra == rb {
            // Equal bytes, equal values: nothing to convert.
            done((len as u64) * ia as u64);
            start += len;
            continue;
        }
        let vals = match (values(&ca, complex), values(&cb, complex)) {
            (Some(va), Some(vb)) => Some((va, vb)),
            _ if same => None,
            _ => {
                return Err(format!(
                    "the values of {} and {} cannot be compared (a dtype without arithmetic)",
                    a.dtype().name(),
                    b.dtype().name()
                ))
            }
        };
        for k in 0..len as usize {
            let i = (start as usize + k) as u64;
            let bytes_equal = same && ra[k * ia..(k + 1) * ia] == rb[k * ib..(k + 1) * ib];
            let Some((va, vb)) = &vals else {
                found.differ += u64::from(!bytes_equal);
                continue;
            };
            if bytes_equal {
                continue;
            }
            let (x, y) = (
                &va[k * width..(k + 1) * width],
                &vb[k * width..(k + 1) * width],
            );
            let both_nan = x
                .iter()
                .zip(y)
                .all(|(p, q)| p == q || (p.is_nan() && q.is_nan()));
            if both_nan && !exact {
                continue; // equal values: 0.0 and -0.0, NaN and NaN
            }
            let abs = x
                .iter()
                .zip(y)
                .map(|(p, q)| (p - q) * (p - q))
                .sum::<f64>()
                .sqrt();
            let mag = y.iter().map(|q| q * q).sum::<f64>().sqrt();
            let rel = if mag > 0.0 { abs / mag } else { f64::INFINITY };
            let (abs, rel) = if abs.is_nan() {
                (f64::INFINITY, f64::INFINITY) // NaN against a number
            } else {
                (abs, rel)
            };
            found.note(i, abs, rel, (width == 1).then(|| (x[0], y[0])));
            let close = !exact && abs <= args.atol + args.rtol * mag;
            found.differ += u64::from(!close);
        }
        done((len as u64) * ia as u64);
        start += len;
    }
    Ok(found)
}

/// `[1, 2]`: the index of flat element `i` in `sizes`.
fn index(mut i: u64, sizes: &[i64]) -> String {
    let mut idx = vec![0u64; sizes.len()];
    for (d, &s) in sizes.iter().enumerate().rev() {
        let s = s.max(1) as u64;
        idx[d] = i % s;
        i /= s;
    }
    let parts: Vec<String> = idx.iter().map(u64::to_string).collect();
    format!("[{}]", parts.join(", "))
}

pub fn run(args: Args) -> Outcome {
    let (_, da) = input::load(&args.a, args.load, args.quiet)?;
    let (_, db) = input::load(&args.b, args.load, args.quiet)?;
    let (na, nb) = (
        tessera::serialize::shown_path(&args.a),
        tessera::serialize::shown_path(&args.b),
    );
    let mut lines: Vec<String> = Vec::new();
    let only_a: Vec<&str> = da
        .iter()
        .map(|(n, _)| n)
        .filter(|n| db.get(n).is_none())
        .collect();
    let only_b: Vec<&str> = db
        .iter()
        .map(|(n, _)| n)
        .filter(|n| da.get(n).is_none())
        .collect();
    for n in &only_a {
        lines.push(format!("{n}: only in {na}"));
    }
    for n in &only_b {
        lines.push(format!("{n}: only in {nb}"));
    }
    let common: Vec<(&str, &Tensor, &Tensor)> = da
        .iter()
        .filter_map(|(n, ta)| db.get(n).map(|tb| (n, ta, tb)))
        .collect();
    let total: u64 = common.iter().map(|(_, t, _)| text::tensor_bytes(t)).sum();
    let progress = Progress::bytes(args.quiet, total, format!("comparing {na} and {nb}"));
    let mut done = 0u64;
    let mut differ = 0usize;
    for (name, ta, tb) in &common {
        let mut what = Vec::new();
        if ta.dtype() != tb.dtype() {
            what.push(format!(
                "dtype {} in a, {} in b",
                ta.dtype().name(),
                tb.dtype().name()
            ));
        }
        if ta.sizes() != tb.sizes() {
            what.push(format!(
                "shape {} in a, {} in b",
                text::shape(ta.sizes()),
                text::shape(tb.sizes())
            ));
        } else {
            let found = compare(ta, tb, &args, &mut |n| {
                done += n;
                progress.set(done);
            });
            match found {
                Err(e) => what.push(e),
                Ok(f) => {
                    if let (Some(abs), Some(rel)) = (f.max_abs, f.max_rel) {
                        let count = if f.differ == 0 {
                            "equal within the tolerance".to_owned()
                        } else {
                            format!("{} of {} elements differ", f.differ, ta.numel())
                        };
                        let values = abs.pair.map_or(String::new(), |(x, y)| {
                            format!(" (a {}, b {})", text::number(x), text::number(y))
                        });
                        what.push(format!(
                            "{count}; largest |a - b| {} at {}{values}, largest |a - b| / |b| \
                             {} at {}",
                            text::number(abs.value),
                            index(abs.at, ta.sizes()),
                            text::number(rel.value),
                            index(rel.at, ta.sizes())
                        ));
                    } else if f.differ > 0 {
                        what.push(format!("{} of {} elements differ", f.differ, ta.numel()));
                    }
                    if f.differ == 0 && ta.dtype() == tb.dtype() {
                        if let Some(w) = what.pop() {
                            lines.push(format!("{name}: {w}"));
                        }
                        continue;
                    }
                }
            }
        }
        if !what.is_empty() {
            differ += 1;
            lines.push(format!("{name}: {}", what.join("; ")));
        }
    }
    drop(progress);
    let different = differ > 0 || !only_a.is_empty() || !only_b.is_empty();
    if !args.quiet {
        let out = &mut std::io::stdout().lock();
        for l in &lines {
            text::put(out, format_args!("{l}"))?;
        }
        text::put(
            out,
            format_args!(
                "{}: {} in both ({} equal, {} differ), {} only in {na}, {} only in {nb}",
                if different { "different" } else { "equal" },
                text::count(common.len(), "tensor"),
                common.len() - differ,
                differ,
                only_a.len(),
                only_b.len()
            ),
        )?;
        out.flush()?;
    }
    if different {
        return Err(Fail {
            code: DIFFERENT,
            message: None,
        });
    }
    Ok(ExitCode::SUCCESS)
}
