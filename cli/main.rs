//! The `tessera` command: list, convert, compare and verify tensor files
//! and make the memory viewer page of a snapshot, without Python; built
//! on the library's public API (docs/CLI.md).
//!
//! One file per command (`ls.rs`, `convert.rs`, `diff.rs`, `verify.rs`,
//! `memory_view.rs`); `input.rs` loads an input, `fail.rs` holds the exit
//! statuses, `progress.rs` the progress bars, `text.rs` how text and
//! numbers are written (every line printed escaped: a name from a file
//! cannot act on the terminal).

mod convert;
mod diff;
mod fail;
mod input;
mod ls;
mod memory_view;
mod progress;
mod text;
mod verify;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// List, convert, compare and verify tensor files (torch, TorchScript,
/// safetensors, npy, npz, GGUF), and make the memory viewer page of a
/// snapshot.
///
/// Exit status: 0 done; 1 the files differ (diff), a file is invalid
/// (verify) or the output cannot be written; 2 usage; 3 an input cannot be
/// read.
#[derive(Parser, Debug)]
#[command(name = "tessera", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    Ls(ls::Args),
    Convert(convert::Args),
    Diff(diff::Args),
    Verify(verify::Args),
    MemoryView(memory_view::Args),
}

impl Command {
    fn name(&self) -> &'static str {
        match self {
            Command::Ls(_) => "ls",
            Command::Convert(_) => "convert",
            Command::Diff(_) => "diff",
            Command::Verify(_) => "verify",
            Command::MemoryView(_) => "memory-view",
        }
    }
}

fn main() -> ExitCode {
    // Usage errors exit with status 2 here, --help and --version with 0.
    let cli = Cli::parse();
    let name = cli.command.name();
    let outcome = match cli.command {
        Command::Ls(a) => ls::run(a),
        Command::Convert(a) => convert::run(a),
        Command::Diff(a) => diff::run(a),
        Command::Verify(a) => verify::run(a),
        Command::MemoryView(a) => memory_view::run(a),
    };
    match outcome {
        Ok(code) => code,
        Err(f) => {
            if let Some(m) = f.message {
                text::warn(format_args!("tessera {name}: {m}"));
            }
            ExitCode::from(f.code)
        }
    }
}
