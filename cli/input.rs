//! Opening an input file for a command: the library's load, mapped (the
//! tensors view the file; nothing is read until used), every record of a
//! zip archive (torch, TorchScript, npz) then read and its CRC-32
//! compared (a mapped load checks none), and what it left out.

use crate::fail::Fail;
use std::path::Path;
use tessera::serialize::{self, Format, LoadFlags, TensorDict};

/// How inputs are loaded: `--strict` refuses a file with pickled objects
/// tessera does not load; without it they are left out and listed.
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct LoadArgs {
    /// Refuse a torch file holding pickled objects tessera does not load
    /// (a training checkpoint's argparse.Namespace, a module's class),
    /// instead of loading the tensors around them and listing the objects
    #[arg(long)]
    pub strict: bool,
}

impl LoadArgs {
    pub fn flags(self) -> LoadFlags {
        LoadFlags {
            mmap: true,
            skip_unknown: !self.strict,
            read_only: true,
        }
    }
}

/// Loads `path` (format by content) and checks the CRC-32 of every record
/// of the zip archives its tensors lie in, or fails with status 3.
pub fn load(path: &Path, args: LoadArgs) -> Result<(Format, TensorDict), Fail> {
    let (format, dict) = load_unchecked(path, args)?;
    if format == Format::Dcp {
        // Its .distcp files hold an archive per item, found through the
        // metadata: verify's check (every record and tensor byte read).
        serialize::verify(path, args.flags(), &mut |_, _| {})
            .map_err(|e| Fail::unreadable(path, &e))?;
    } else {
        serialize::check_archives(&dict).map_err(|e| Fail::unreadable(path, &e))?;
    }
    Ok((format, dict))
}

/// Loads `path` (format by content), mapped, reading no record whole
/// (`ls --no-crc`), or fails with status 3.
pub fn load_unchecked(path: &Path, args: LoadArgs) -> Result<(Format, TensorDict), Fail> {
    serialize::load_as(path, Format::Auto, args.flags()).map_err(|e| Fail::unreadable(path, &e))
}

/// The objects a load left out (`tessera.skipped`), one per line.
pub fn skipped(dict: &TensorDict) -> Vec<&str> {
    dict.metadata(serialize::SKIPPED_KEY)
        .map(|s| s.lines().filter(|l| !l.is_empty()).collect())
        .unwrap_or_default()
}
