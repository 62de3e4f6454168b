//! The TORCH format's entry in the format table: torch.save's zip archive
//! (PyTorch 1.6 and later), read by `torch_read`, written by
//! `torch_write`.

use super::dict::TensorDict;
use super::source::Source;
use super::{torch_read, torch_write};
use super::{FileFormat, LoadFlags};
use crate::error::Result;
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// The archive directory name of tessera's torch files.
const ARCHIVE: &str = "archive";

/// torch.save's zip archive.
pub(crate) struct TorchZip;

/// The TORCH format.
pub(crate) static TORCH_ZIP: TorchZip = TorchZip;

impl FileFormat for TorchZip {
    fn name(&self) -> &'static str {
        "torch"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["pt", "pth", "bin", "ckpt"]
    }

    fn detect(&self, bytes: &[u8]) -> bool {
        bytes.starts_with(b"PK\x03\x04") || bytes.starts_with(b"PK\x05\x06")
    }

    fn read(&self, source: &Source<'_>, flags: LoadFlags) -> Result<TensorDict> {
        torch_read::read(source, flags)
    }

    fn write_bytes(&self, dict: &TensorDict) -> Result<Vec<u8>> {
        let out = torch_write::write(dict, ARCHIVE, std::io::Cursor::new(Vec::new()))?;
        Ok(out.into_inner())
    }

    /// Each storage is one whole record, written once.
    fn size_floor(&self, dict: &TensorDict) -> u64 {
        let mut seen = std::collections::HashSet::new();
        dict.iter()
            .filter(|(_, t)| seen.insert(crate::refcount::Ref::as_ptr(&t.storage().0) as usize))
            .map(|(_, t)| t.storage().nbytes() as u64)
            .fold(0, u64::saturating_add)
    }

    fn write_file(&self, dict: &TensorDict, file: &mut File, _: &Path, dest: &Path) -> Result<()> {
        let prepared = torch_write::prepare(dict)?;
        let file: &File = file;
        let w = std::io::BufWriter::with_capacity(1 << 20, file);
        torch_write::write_prepared(&prepared, ARCHIVE, w, Some(file))
            .and_then(|mut w| {
                w.flush()
                    .map_err(|e| crate::err!(Io, "flushing failed: {}", crate::files::reason(&e)))
            })
            .map(|_| ())
            .map_err(|e| match e.kind() {
                crate::error::ErrorKind::Io => {
                    e.context(format!("cannot write {}", dest.display()))
                }
                _ => e,
            })
    }
}
