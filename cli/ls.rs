//! `tessera ls`: the tensors of tensor files.

use crate::fail::Outcome;
use crate::input::{self, LoadArgs};
use crate::text;
use serde_json::json;
use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use tessera::serialize::{Format, TensorDict};

/// What `--help` says after the options: what the command does, in
/// full, and examples (an `after_help`: a `long_about` would make clap
/// print every option on two lines, past a screen).
const DETAILS: &str = "\
Per tensor its name, dtype, shape, bytes and storage (tensors on one storage\n\
share memory); per file the format (told by the content), the metadata, the\n\
values that are not tensors (a checkpoint's global_step, its config: JSON)\n\
and what the load left out.\n\
\n\
Every record of a zip archive (torch, TorchScript, npz) is read and its\n\
CRC-32 compared with the archive's: a damaged file is refused (status 3).\n\
--no-crc lists without reading them (a large file lists at once).\n\
\n\
Dtypes are c10's names (Float, Half, BFloat16, Long, Bool, ...), as\n\
tessera's C API and messages write them.\n\
\n\
Examples:\n\
\x20 tessera ls model.safetensors\n\
\x20 tessera ls --json checkpoint.pt | jq '.[].name'";

/// List the tensors of files: name, dtype, shape, bytes, shared storages
#[derive(clap::Args, Debug)]
#[command(after_help = DETAILS)]
pub struct Args {
    /// Tensor files: torch (.pt, .pth, .bin), TorchScript, torch's legacy
    /// format, safetensors, npy, npz, GGUF
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Print one JSON array, an object per tensor: file, format, name,
    /// dtype, shape, strides, storage_offset, bytes, storage (the index of
    /// its storage in its file); then one per value: file, format, name,
    /// value
    #[arg(long)]
    json: bool,
    /// List without reading every zip record to compare its CRC-32
    #[arg(long)]
    no_crc: bool,
    #[command(flatten)]
    load: LoadArgs,
}

/// One tensor's row.
struct Row<'a> {
    name: &'a str,
    tensor: &'a tessera::Tensor,
    storage: usize,
}

/// The tensors of `dict` with the index of each one's storage (in order
/// of first use), and the tensors of each storage.
fn rows(dict: &TensorDict) -> (Vec<Row<'_>>, Vec<Vec<&str>>) {
    let mut index: HashMap<usize, usize> = HashMap::new();
    let mut users: Vec<Vec<&str>> = Vec::new();
    let rows = dict
        .iter()
        .map(|(name, tensor)| {
            let key = tessera::Ref::as_ptr(tensor.storage().as_rc()) as usize;
            let next = index.len();
            let storage = *index.entry(key).or_insert(next);
            if storage == users.len() {
                users.push(Vec::new());
            }
            users[storage].push(name);
            Row {
                name,
                tensor,
                storage,
            }
        })
        .collect();
    (rows, users)
}

pub fn run(args: Args) -> Outcome {
    let mut loaded = Vec::with_capacity(args.files.len());
    for path in &args.files {
        let (format, dict) = if args.no_crc {
            input::load_unchecked(path, args.load, false)?
        } else {
            input::load(path, args.load, false)?
        };
        loaded.push((path, format, dict));
    }
    let out = &mut std::io::stdout().lock();
    if args.json {
        let mut all = Vec::new();
        for (path, format, dict) in &loaded {
            for r in rows(dict).0 {
                let t = r.tensor;
                all.push(json!({
                    "file": tessera::serialize::shown_path(path),
                    "format": format.name(),
                    "name": r.name,
                    "dtype": t.dtype().name(),
                    "shape": t.sizes(),
                    "strides": t.strides(),
                    "storage_offset": t.storage_offset(),
                    "bytes": text::tensor_bytes(t),
                    "storage": r.storage,
                }));
            }
            for (name, value) in dict.values_iter() {
                all.push(json!({
                    "file": tessera::serialize::shown_path(path),
                    "format": format.name(),
                    "name": name,
                    "value": value,
                }));
            }
        }
        // One object per line: readable, and greppable.
        text::put_json(out, "[")?;
        for (i, o) in all.iter().enumerate() {
            let sep = if i + 1 < all.len() { "," } else { "" };
            text::put_json(out, &format!("  {o}{sep}"))?;
        }
        text::put_json(out, "]")?;
    } else {
        for (i, (path, format, dict)) in loaded.iter().enumerate() {
            if i > 0 {
                text::put(out, format_args!(""))?;
            }
            write_file(out, &tessera::serialize::shown_path(path), *format, dict)?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// One file as text: a heading, a table of its tensors, the storages
/// several tensors share, the metadata, the values and what the load left
/// out.
fn write_file(
    out: &mut dyn Write,
    path: &str,
    format: Format,
    dict: &TensorDict,
) -> std::io::Result<()> {
    let (rows, users) = rows(dict);
    // The data's size: each storage counted once.
    let mut seen = std::collections::HashSet::new();
    let total: u64 = rows
        .iter()
        .filter(|r| seen.insert(r.storage))
        .map(|r| r.tensor.storage().nbytes() as u64)
        .sum();
    text::put(
        out,
        format_args!(
            "{path}: {}, {} on {}, {}",
            format.name(),
            text::count(rows.len(), "tensor"),
            text::count(users.len(), "storage"),
            text::bytes(total)
        ),
    )?;
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.name.to_owned(),
                r.tensor.dtype().name().to_owned(),
                text::shape(r.tensor.sizes()),
                text::bytes(text::tensor_bytes(r.tensor)),
                r.storage.to_string(),
            ]
        })
        .collect();
    let head = ["name", "dtype", "shape", "bytes", "storage"];
    let mut width = head.map(str::len);
    for c in &cells {
        for (w, cell) in width.iter_mut().zip(c) {
            // As printed: escaped (text::put).
            *w = (*w).max(text::width(cell));
        }
    }
    if !cells.is_empty() {
        let line = |cells: [&str; 5]| {
            let parts: Vec<String> = cells
                .iter()
                .zip(width)
                .map(|(c, w)| format!("{c}{}", " ".repeat(w - text::width(c))))
                .collect();
            format!("  {}", parts.join("  ").trim_end())
        };
        text::put(out, format_args!("{}", line(head)))?;
        for c in &cells {
            let l = line([&c[0], &c[1], &c[2], &c[3], &c[4]]);
            text::put(out, format_args!("{l}"))?;
        }
    }
    for (s, names) in users.iter().enumerate().filter(|(_, n)| n.len() > 1) {
        text::put(
            out,
            format_args!("  storage {s} is shared by {}", names.join(", ")),
        )?;
    }
    let skipped = input::skipped(dict);
    let meta: Vec<(&str, &str)> = dict
        .metadata_iter()
        .filter(|(k, _)| *k != tessera::serialize::SKIPPED_KEY)
        .collect();
    if !meta.is_empty() {
        text::put(out, format_args!("  metadata:"))?;
        for (k, v) in meta {
            text::put(out, format_args!("    {k}: {}", one_line(v)))?;
        }
    }
    if dict.value_count() > 0 {
        text::put(out, format_args!("  values:"))?;
        for (name, value) in dict.values_iter() {
            text::put(
                out,
                format_args!("    {name} = {}", one_line(&value.to_string())),
            )?;
        }
    }
    if !skipped.is_empty() {
        text::put(
            out,
            format_args!(
                "  left out ({}: objects tessera does not load, values JSON cannot hold):",
                tessera::serialize::SKIPPED_KEY
            ),
        )?;
        for s in skipped {
            text::put(out, format_args!("    {s}"))?;
        }
    }
    Ok(())
}

/// A metadata value of at most 200 characters (on one line: newlines
/// and other control characters are escaped as all printed text is).
fn one_line(v: &str) -> String {
    let n = v.chars().count();
    if n <= 200 {
        v.to_owned()
    } else {
        let cut: String = v.chars().take(200).collect();
        format!("{cut}... ({n} characters)")
    }
}
