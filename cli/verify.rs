//! `tessera verify`: a file checked end to end (the library's
//! `serialize::verify`).

use crate::fail::{Fail, Outcome, DIFFERENT};
use crate::input::LoadArgs;
use crate::progress::Progress;
use crate::text;
use std::path::PathBuf;
use std::process::ExitCode;
use tessera::ErrorKind;

/// What `--help` says after the options: what the command does, in
/// full, and examples (an `after_help`: a `long_about` would make clap
/// print every option on two lines, past a screen).
const DETAILS: &str = "\
Loads each file with every check a load makes (the format by content, every\n\
record within the file, every tensor's geometry within its record; for torch\n\
files, every storage the pickle names is in a tensor or listed as left out),\n\
reads every record of a zip archive (torch, TorchScript, npz) and compares\n\
its CRC-32 with the archive's, and reads every byte of every tensor (a bool\n\
must be 0 or 1).\n\
\n\
A shard index (model.safetensors.index.json, pytorch_model.bin.index.json)\n\
or a DCP checkpoint (its directory or its .metadata) is loaded whole with\n\
its own checks, then every file it names is checked so, each reported.\n\
\n\
Prints one line per file (and one counting what the load left out, if\n\
anything); exit status 1 when a file is invalid, naming what\n\
is wrong, 3 when one cannot be opened.\n\
\n\
Examples:\n\
\x20 tessera verify model.pt model.safetensors\n\
\x20 tessera verify model.safetensors.index.json checkpoint_dir";

/// Check files end to end: records, CRCs, bounds, every byte
#[derive(clap::Args, Debug)]
#[command(after_help = DETAILS)]
pub struct Args {
    /// Tensor files
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Print nothing but errors
    #[arg(short, long)]
    quiet: bool,
    #[command(flatten)]
    load: LoadArgs,
}

pub fn run(args: Args) -> Outcome {
    let mut worst: Option<Fail> = None;
    for path in &args.files {
        let progress = Progress::bytes(
            args.quiet,
            0,
            format!("verifying {}", tessera::serialize::shown_path(path)),
        );
        let result = tessera::serialize::verify(path, args.load.flags(), &mut |done, total| {
            progress.set_total(total);
            progress.set(done);
        });
        drop(progress);
        match result {
            Ok(v) => {
                if !args.quiet {
                    let out = &mut std::io::stdout().lock();
                    let records = if v.records > 0 {
                        format!(", {} CRC-checked", text::count(v.records, "record"))
                    } else {
                        String::new()
                    };
                    text::put(
                        out,
                        format_args!(
                            "ok: {}: {}, {} on {}{records}, {} read",
                            tessera::serialize::shown_path(path),
                            v.format.name(),
                            text::count(v.tensors, "tensor"),
                            text::count(v.storages, "storage"),
                            text::bytes(v.bytes_read)
                        ),
                    )?;
                    for f in &v.files {
                        let records = if f.records > 0 {
                            format!(", {} CRC-checked", text::count(f.records, "record"))
                        } else {
                            String::new()
                        };
                        let what = if f.format == tessera::serialize::Format::Dcp {
                            "tensor chunk"
                        } else {
                            "tensor"
                        };
                        text::put(
                            out,
                            format_args!(
                                "  ok: {}: {}, {}{records}, {} read",
                                f.name,
                                f.format.name(),
                                text::count(f.tensors, what),
                                text::bytes(f.bytes_read)
                            ),
                        )?;
                    }
                    if !v.skipped.is_empty() {
                        text::put(
                            out,
                            format_args!(
                                "  left out: {} (tessera ls {} lists them)",
                                text::count(v.skipped.len(), "value"),
                                tessera::serialize::shown_path(path)
                            ),
                        )?;
                    }
                }
            }
            Err(e) => {
                // An input that cannot be opened is unreadable (3); one
                // that opens but fails a check is invalid (1).
                let code = if e.kind() == ErrorKind::Io {
                    crate::fail::UNREADABLE
                } else {
                    DIFFERENT
                };
                let what = if code == DIFFERENT { "invalid: " } else { "" };
                text::warn(format_args!(
                    "tessera verify: {}: {what}{}",
                    tessera::serialize::shown_path(path),
                    e.message()
                ));
                if worst.as_ref().is_none_or(|w| code > w.code) {
                    worst = Some(Fail {
                        code,
                        message: None,
                    });
                }
            }
        }
    }
    match worst {
        Some(f) => Err(f),
        None => Ok(ExitCode::SUCCESS),
    }
}
