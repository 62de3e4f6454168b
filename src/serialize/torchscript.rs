//! The TORCHSCRIPT format's entry in the format table: archives written
//! by torch.jit.save. They are torch zip archives whose data.pkl holds the
//! scripted module as `__torch__.*` objects (placeholders: never imported
//! or called), each object's attributes its state; the tensors are named
//! by attribute path ("0.weight", "conv1.bias"), other attributes skipped.
//! The tensor constants of the module's code (a tensor captured in
//! forward, or parameters that torch.jit.freeze folded) are the tuple of
//! constants.pkl, their storages in `<archive>/constants/`: constant N is
//! named "constants.N", after the attributes. The code/ directory
//! (TorchScript source) is never read. Read only (tessera writes no code).

use super::dict::TensorDict;
use super::source::Source;
use super::torch_pickle;
use super::torch_read::{self, Tree};
use super::zip_index;
use super::{FileFormat, LoadFlags};
use crate::error::Result;

/// The name the tensors of constants.pkl are under: "constants.0", ...
pub(crate) const CONSTANTS: &str = "constants";

/// torch.jit.save's archives.
pub(crate) struct TorchScript;

/// The TORCHSCRIPT format.
pub(crate) static TORCHSCRIPT: TorchScript = TorchScript;

impl FileFormat for TorchScript {
    fn name(&self) -> &'static str {
        "torchscript"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &[]
    }

    /// A zip archive with a `<archive>/constants.pkl` or `<archive>/code/`
    /// entry (torch.save's archives have neither).
    fn detect(&self, bytes: &[u8]) -> bool {
        if !bytes.starts_with(b"PK\x03\x04") {
            return false;
        }
        let Ok(entries) = zip_index::entries(bytes) else {
            return false;
        };
        let found = entries.iter().any(|e| {
            e.name
                .split_once('/')
                .is_some_and(|(_, rest)| rest == "constants.pkl" || rest.starts_with("code/"))
        });
        found
    }

    fn read(&self, source: &Source<'_>, flags: LoadFlags) -> Result<TensorDict> {
        let records = torch_pickle::index_archive(source.bytes)?;
        let data = records
            .pickle(source, "data.pkl", flags)?
            .expect("index_archive found data.pkl");
        let constants = records.pickle(source, "constants.pkl", flags)?;
        let mut trees = vec![Tree::data(data.root(), "data.pkl")];
        if let Some(c) = &constants {
            trees.push(Tree {
                root: c.root(),
                what: "constants.pkl",
                tensor_dir: "constants/",
                names: CONSTANTS,
            });
        }
        let big_endian = torch_read::byte_order(source, &records)?;
        let cx = super::torch_loader::Context {
            source,
            records,
            flags,
            big_endian,
            tar: None,
        };
        torch_read::read_tree(cx, &trees)
    }

    fn writes(&self) -> bool {
        false
    }
}
