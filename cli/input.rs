//! Opening an input file for a command: the library's load, mapped (the
//! tensors view the file; nothing is read until used), every record of a
//! zip archive (torch, TorchScript, npz) then read and its CRC-32
//! compared (a mapped load checks none), and what it left out. A URL is
//! read through a checkpoint handle. What is read shows as a bar.

use crate::fail::Fail;
use crate::progress::Progress;
use std::path::Path;
use tessera::serialize::{self, Checkpoint, FetchOptions, Format, LoadFlags, TensorDict};
use tessera::Device;

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
/// of the zip archives its tensors lie in, or fails with status 3. A bar
/// on stderr (unless `quiet`) follows what is read: a URL's tensors, an
/// archive's records.
pub fn load(path: &Path, args: LoadArgs, quiet: bool) -> Result<(Format, TensorDict), Fail> {
    let (format, dict) = load_unchecked(path, args, quiet)?;
    if format == Format::Dcp {
        // Its .distcp files hold an archive per item, found through the
        // metadata: verify's check (every record and tensor byte read).
        serialize::verify(path, args.flags(), &mut |_, _| {})
            .map_err(|e| Fail::unreadable(path, &e))?;
    } else {
        let bar = Progress::bytes(
            quiet,
            0,
            format!("checking the CRC-32s of {}", serialize::shown_path(path)),
        );
        serialize::check_archives_progress(&dict, &mut |done, total| {
            bar.set_total(total);
            bar.set(done);
        })
        .map_err(|e| Fail::unreadable(path, &e))?;
    }
    Ok((format, dict))
}

/// Loads `path` (format by content), mapped, reading no record whole
/// (`ls --no-crc`), or fails with status 3. A URL is read through a
/// checkpoint handle, its fetch's progress shown as a bar (unless
/// `quiet`).
pub fn load_unchecked(
    path: &Path,
    args: LoadArgs,
    quiet: bool,
) -> Result<(Format, TensorDict), Fail> {
    if serialize::is_url(path) {
        let fail = |e: tessera::Error| Fail::unreadable(path, &e);
        let c = Checkpoint::open(path, Format::Auto, args.flags()).map_err(fail)?;
        let bar = Progress::bytes(quiet, 0, format!("reading {}", serialize::shown_path(path)));
        let mut report = |p: &serialize::Progress<'_>| {
            bar.set_total(p.total);
            bar.set(p.done);
            true
        };
        let opts = FetchOptions {
            progress: Some(&mut report),
            ..FetchOptions::default()
        };
        let dict = c.load_many(None, Device::CPU, opts).map_err(fail)?;
        return Ok((c.format(), dict));
    }
    serialize::load_as(path, Format::Auto, args.flags()).map_err(|e| Fail::unreadable(path, &e))
}

/// The objects a load left out (`tessera.skipped`), one per line.
pub fn skipped(dict: &TensorDict) -> Vec<&str> {
    dict.metadata(serialize::SKIPPED_KEY)
        .map(|s| s.lines().filter(|l| !l.is_empty()).collect())
        .unwrap_or_default()
}
