//! `tessera convert`: a tensor file in another format.

use crate::fail::{Fail, Outcome, DIFFERENT, USAGE};
use crate::input::{self, LoadArgs};
use crate::progress::Progress;
use crate::text;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tessera::serialize::{self, Format, TensorDict};

/// What `--help` says after the options: what the command does, in
/// full, and examples (an `after_help`: a `long_about` would make clap
/// print every option on two lines, past a screen).
const DETAILS: &str = "\
Any format tessera reads to any it writes: the one OUT's extension names\n\
(.pt .pth .bin .ckpt: torch; .safetensors; .npy; .npz; .gguf), or --format.\n\
\n\
The input is mapped and each tensor written from it, so memory stays small;\n\
every record of a zip input (torch, npz) is first read and its CRC-32\n\
checked (damaged: status 3). The output appears only when complete: a failed\n\
conversion leaves nothing behind. What the output cannot hold (a dtype,\n\
metadata in npz, several tensors in npy, shared memory in safetensors, 0-d\n\
tensors in GGUF) is refused, naming it. Nothing changes silently: a change\n\
is made only with the flag naming it (--drop-metadata, --copy-shared,\n\
--allow-reshape) and printed as one line per kind (--verbose: the names).\n\
Left-out input is counted under tessera.source (docs/CLI.md).\n\
\n\
With --shard-size, OUT is a directory of Hugging Face shards and their index\n\
(model-00001-of-00002.safetensors + model.safetensors.index.json; with\n\
--format torch, pytorch_model-00001-of-00002.bin). An index as IN loads all.\n\
\n\
Examples:\n\
\x20 tessera convert pytorch_model.bin model.safetensors\n\
\x20 tessera convert --shard-size 5GB model.safetensors out_dir\n\
\x20 tessera convert --allow-reshape -v checkpoint.pt model.gguf\n\
\x20 tessera convert --drop-metadata model.safetensors arrays.npz";

/// Convert a file to another format (by the output's extension)
#[derive(clap::Args, Debug)]
#[command(after_help = DETAILS)]
pub struct Args {
    /// The file to convert (its format is told by its content)
    #[arg(value_name = "IN")]
    input: PathBuf,
    /// The file to write
    #[arg(value_name = "OUT")]
    output: PathBuf,
    /// The output's format: torch, safetensors, npy, npz, gguf
    #[arg(long, value_parser = parse_format)]
    format: Option<Format>,
    /// Leave the input's metadata and values out (npz and npy hold none)
    #[arg(long)]
    drop_metadata: bool,
    /// Write a tensor sharing memory with an earlier one as a copy
    #[arg(long)]
    copy_shared: bool,
    /// Write 0-d tensors as shape [1] (GGUF has no 0-d tensors)
    #[arg(long)]
    allow_reshape: bool,
    /// Name every tensor or key each kind of change changed
    #[arg(short, long)]
    verbose: bool,
    /// OUT a directory of shards of at most SIZE (5GB, 2GiB, bytes)
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    shard_size: Option<u64>,
    /// Print nothing but errors (no summary, no progress)
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    load: LoadArgs,
}

/// Left-out values named in the note convert prints (`tessera ls` shows
/// them all).
const SHOWN_SKIPPED: usize = 4;

/// The formats tessera writes, as `--format` names them.
fn writable() -> Vec<&'static str> {
    Format::ALL
        .iter()
        .filter(|f| f.writes())
        .map(|f| f.name())
        .collect()
}

fn parse_format(name: &str) -> Result<Format, String> {
    Format::ALL
        .iter()
        .copied()
        .find(|f| f.writes() && f.name().eq_ignore_ascii_case(name))
        .ok_or_else(|| {
            format!(
                "'{name}' is not a format tessera writes: expected one of {}",
                writable().join(", ")
            )
        })
}

/// The output format: `--format`, else the one the extension names.
/// A size as transformers' `max_shard_size` takes it: bytes, or a number
/// with KB / MB / GB (powers of 10) or KiB / MiB / GiB (powers of 2).
fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let unit_bytes: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KIB" => 1 << 10,
        "MIB" => 1 << 20,
        "GIB" => 1 << 30,
        _ => 0,
    };
    digits
        .parse::<u64>()
        .ok()
        .filter(|&n| n > 0 && unit_bytes > 0)
        .and_then(|n| n.checked_mul(unit_bytes))
        .ok_or_else(|| {
            format!("'{text}': expected a size above 0: bytes, or with KB, MB, GB, KiB, MiB, GiB")
        })
}

fn output_format(args: &Args) -> Result<Format, Fail> {
    let dir = args.output.is_dir();
    if let Some(f) = args.format {
        if !(dir && args.shard_size.is_none() && f != Format::Dcp) {
            return Ok(f);
        }
    }
    if args.shard_size.is_some() {
        return Ok(args.format.unwrap_or(Format::Safetensors));
    }
    if dir {
        return Err(Fail::new(
            DIFFERENT,
            format!(
                "{}: is a directory: expected a file to write (name it, e.g. {}), or \
                 --shard-size to write shards into the directory",
                args.output.display(),
                args.output.join("model.safetensors").display()
            ),
        ));
    }
    Format::of_path(&args.output).ok_or_else(|| {
        let exts: Vec<String> = Format::ALL
            .iter()
            .flat_map(|f| f.extensions())
            .map(|e| format!(".{e}"))
            .collect();
        Fail::new(
            USAGE,
            format!(
                "{}: no format has this extension: name the file {} or give --format ({})",
                args.output.display(),
                exts.join(", "),
                writable().join(", ")
            ),
        )
    })
}

/// The directory the output goes into must exist: checked before the
/// input is read (a large input is not loaded for nothing).
fn check_output_dir(out: &Path) -> Result<(), Fail> {
    if serialize::is_url(out) {
        // Uploaded (s3://) or refused by the save, naming the URL.
        return Ok(());
    }
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if dir.is_dir() {
        return Ok(());
    }
    Err(Fail::new(
        DIFFERENT,
        format!(
            "{}: cannot write there: the directory {} does not exist",
            out.display(),
            dir.display()
        ),
    ))
}

/// A kind of change a conversion makes, each made only with the flag
/// that names it: the names it changed, and what it is in words.
struct Change {
    names: Vec<String>,
    /// What was changed (`text::count` makes it plural).
    thing: &'static str,
    /// What was done to it.
    what: &'static str,
    flag: &'static str,
}

/// The dict to write: `dict`, without its metadata and values
/// (`--drop-metadata`),
/// with each tensor whose storage an earlier tensor uses copied into a
/// storage of its own (`--copy-shared`); and the changes made.
fn to_write(dict: TensorDict, args: &Args) -> Result<(TensorDict, Vec<Change>), tessera::Error> {
    let mut dropped = Change {
        names: Vec::new(),
        thing: "metadata key",
        what: "dropped",
        flag: "--drop-metadata",
    };
    let mut copied = Change {
        names: Vec::new(),
        thing: "tensor",
        what: "sharing memory with an earlier one written as a copy of its own",
        flag: "--copy-shared",
    };
    if !args.drop_metadata && !args.copy_shared {
        return Ok((dict, Vec::new()));
    }
    let mut out = TensorDict::new();
    let mut seen = std::collections::HashSet::new();
    for (name, t) in dict.iter() {
        let first = seen.insert(tessera::Ref::as_ptr(t.storage().as_rc()) as usize);
        let t = if args.copy_shared && !first {
            copied.names.push(name.to_owned());
            t.clone_tensor(tessera::MemoryFormat::Contiguous)?
        } else {
            t.clone()
        };
        out.set(name, t)?;
    }
    let mut dropped_values = Change {
        names: Vec::new(),
        thing: "value",
        what: "dropped",
        flag: "--drop-metadata",
    };
    for (k, v) in dict.metadata_iter() {
        if args.drop_metadata {
            dropped.names.push(k.to_owned());
        } else {
            out.set_metadata(k, v)?;
        }
    }
    for (name, v) in dict.values_iter() {
        if args.drop_metadata {
            dropped_values.names.push(name.to_owned());
        } else {
            out.set_value(name, v.clone())?;
        }
    }
    Ok((out, vec![dropped, dropped_values, copied]))
}

/// The 0-d tensors of `dict` a `format` without 0-d tensors (GGUF) writes
/// as shape [1]: refused without `--allow-reshape`, naming them.
fn reshaped(dict: &TensorDict, format: Format, args: &Args) -> Result<Change, Fail> {
    let names: Vec<String> = if format == Format::Gguf {
        dict.iter()
            .filter(|(_, t)| t.ndim() == 0)
            .map(|(n, _)| n.to_owned())
            .collect()
    } else {
        Vec::new()
    };
    if !names.is_empty() && !args.allow_reshape {
        let shown = SHOWN_SKIPPED.min(names.len());
        let more = if names.len() > shown {
            format!(", and {} more", names.len() - shown)
        } else {
            String::new()
        };
        let quoted: Vec<String> = names[..shown].iter().map(|n| format!("'{n}'")).collect();
        return Err(Fail::new(
            DIFFERENT,
            format!(
                "cannot write {} as {}: {} has no 0-d tensors: {} ({}{more}) would be written \
                 as shape [1] (--allow-reshape writes them so)",
                args.output.display(),
                format.name(),
                format.name(),
                text::count(names.len(), "0-d tensor"),
                quoted.join(", ")
            ),
        ));
    }
    Ok(Change {
        names,
        thing: "0-d tensor",
        what: "written as shape [1]",
        flag: "--allow-reshape",
    })
}

/// One line per kind of change made (stderr), each name on a line of
/// its own under `--verbose`.
fn print_changes(changes: &[Change], args: &Args) {
    for c in changes.iter().filter(|c| !c.names.is_empty()) {
        text::warn(format_args!(
            "tessera convert: {} {} ({})",
            text::count(c.names.len(), c.thing),
            c.what,
            c.flag
        ));
        if args.verbose {
            for n in &c.names {
                text::warn(format_args!("  {n}"));
            }
        }
    }
}

/// Records where the output came from under `tessera.source` when the
/// load left something out: the input's file name and format, how many
/// entries were left out and the first few (the output's own load leaves
/// nothing out; its `tessera.skipped` would be the input's, so no save
/// writes it). npy and npz hold no metadata: nothing is recorded there.
fn record_source(dict: &mut TensorDict, args: &Args, in_format: Format, out_format: Format) {
    let skipped: Vec<String> = input::skipped(dict)
        .into_iter()
        .map(str::to_owned)
        .collect();
    if skipped.is_empty() || args.drop_metadata || matches!(out_format, Format::Npy | Format::Npz) {
        return;
    }
    let file = args.input.file_name().map_or_else(
        || tessera::serialize::shown_path(&args.input),
        |f| f.to_string_lossy().into_owned(),
    );
    let source = serde_json::json!({
        "file": file,
        "format": in_format.name(),
        "left_out": skipped.len(),
        "left_out_first": &skipped[..SHOWN_SKIPPED.min(skipped.len())],
    });
    // A metadata value holds no NUL: the names come from the input's
    // metadata, which held none either.
    let _ = dict.set_metadata(serialize::SOURCE_KEY, &source.to_string());
}

pub fn run(args: Args) -> Outcome {
    let format = output_format(&args)?;
    check_output_dir(&args.output)?;
    let (in_format, loaded) = input::load(&args.input, args.load, args.quiet)?;
    let (mut dict, mut changes) =
        to_write(loaded, &args).map_err(|e| Fail::new(DIFFERENT, e.message()))?;
    record_source(&mut dict, &args, in_format, format);
    changes.push(reshaped(&dict, format, &args)?);
    let total: u64 = dict.iter().map(|(_, t)| text::tensor_bytes(t)).sum();
    let progress = Progress::spinner(
        args.quiet,
        format!(
            "writing {} ({}, {})",
            serialize::shown_path(&args.output),
            format.name(),
            text::bytes(total)
        ),
    );
    let saved = match args.shard_size {
        Some(max) => serialize::save_sharded(
            &dict,
            &args.output,
            format,
            max,
            serialize::SaveFlags::default(),
        )
        .map(|_| ()),
        None => serialize::save(&dict, &args.output, format),
    };
    drop(progress);
    if let Err(e) = saved {
        let hint = if !args.drop_metadata
            && dict.metadata_iter().next().is_some()
            && e.message().contains("metadata")
        {
            " (--drop-metadata converts without it)"
        } else if !args.copy_shared && e.message().contains("share memory") {
            " (--copy-shared writes each as a copy of its own)"
        } else {
            ""
        };
        return Err(Fail::new(
            DIFFERENT,
            format!(
                "cannot write {} as {}: {}{hint}",
                serialize::shown_path(&args.output),
                format.name(),
                e.message()
            ),
        ));
    }
    if !args.quiet {
        print_changes(&changes, &args);
        let skipped = input::skipped(&dict);
        if !skipped.is_empty() {
            let listed = if dict.metadata(serialize::SOURCE_KEY).is_some() {
                format!(
                    " (counted in the output's metadata key {})",
                    serialize::SOURCE_KEY
                )
            } else {
                String::new()
            };
            let shown = SHOWN_SKIPPED.min(skipped.len());
            let more = if skipped.len() > shown {
                format!("; and {} more", skipped.len() - shown)
            } else {
                String::new()
            };
            text::warn(format_args!(
                "tessera convert: {}: left out {}{listed}: {}{more}",
                tessera::serialize::shown_path(&args.input),
                text::count(skipped.len(), "value"),
                skipped[..shown].join("; ")
            ));
        }
        let mut out = std::io::stdout().lock();
        text::put(
            &mut out,
            format_args!(
                "{} ({}) -> {} ({}): {}, {}",
                tessera::serialize::shown_path(&args.input),
                in_format.name(),
                serialize::shown_path(&args.output),
                format.name(),
                text::count(dict.len(), "tensor"),
                text::bytes(total)
            ),
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
