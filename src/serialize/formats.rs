//! The one table of file formats. Each format is one file implementing
//! [`FileFormat`] (in the parent module: detect by content, its
//! extensions, read, and write or
//! "read only"), registered by one row of `format_table!` below, which
//! makes the `Format` enum, its C numbers and the order detection tries.
//! A new format is one file and one row; a `match` on `Format` elsewhere
//! does not exist, so nothing can fall through to another format.

use super::FileFormat;
use crate::error::Result;
use std::path::Path;

/// The formats: `Variant = C number => the FileFormat, its doc`. Detection
/// tries them in this order.
macro_rules! format_table {
    ($( $(#[doc = $doc:literal])* $variant:ident = $number:literal => $handler:expr, )*) => {
        /// A file format (`TSR_FORMAT_*`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Format {
            /// Loading: detected from the bytes (every format); saving: by
            /// the path's extension, else TORCH.
            Auto,
            $( $(#[doc = $doc])* $variant, )*
        }

        impl Format {
            /// Every format but Auto, in detection order.
            pub const ALL: &'static [Format] = &[$( Format::$variant, )*];

            /// The format's C number (TSR_FORMAT_*; Auto is 0).
            pub fn raw(self) -> i32 {
                match self {
                    Format::Auto => 0,
                    $( Format::$variant => $number, )*
                }
            }

            /// The format of a C number, if there is one.
            pub fn from_raw(raw: i32) -> Option<Format> {
                std::iter::once(Format::Auto)
                    .chain(Format::ALL.iter().copied())
                    .find(|f| f.raw() == raw)
            }

            /// The format's implementation (None for Auto).
            pub(crate) fn handler(self) -> Option<&'static dyn FileFormat> {
                match self {
                    Format::Auto => None,
                    $( Format::$variant => Some(&$handler), )*
                }
            }
        }
    };
}

format_table! {
    /// torch.jit.save's archives (read only; before TORCH: both are zip
    /// archives, and only these hold code/ and constants.pkl).
    TorchScript = 5 => super::torchscript::TORCHSCRIPT,
    /// NumPy's .npz: a zip archive of .npy entries (before TORCH: a
    /// zip whose entries are all `*.npy`).
    Npz = 6 => super::npz::NPZ,
    /// torch.save's zip archive (PyTorch 1.6 and later).
    Torch = 1 => super::torch_zip::TORCH_ZIP,
    /// The safetensors layout.
    Safetensors = 2 => super::safetensors_format::SAFETENSORS,
    /// NumPy's .npy: one array.
    Npy = 3 => super::npy::NPY,
    /// torch.save's format before PyTorch 1.6 (read only).
    TorchLegacy = 4 => super::torch_legacy::TORCH_LEGACY,
    /// llama.cpp's GGUF (versions 3 and 2, little-endian).
    Gguf = 7 => super::gguf::GGUF,
    /// torch.distributed.checkpoint: a directory (`.metadata` and
    /// `.distcp` files), loaded and saved by its path only.
    Dcp = 8 => super::dcp::DCP,
}

impl Format {
    /// The format's name in messages.
    pub fn name(self) -> &'static str {
        self.handler().map_or("auto", |h| h.name())
    }

    /// The file name extensions that name the format (without the dot;
    /// none for Auto and the read-only formats).
    pub fn extensions(self) -> &'static [&'static str] {
        self.handler().map_or(&[], |h| h.extensions())
    }

    /// Whether tessera writes the format (saving a read-only one is
    /// refused by name).
    pub fn writes(self) -> bool {
        self.handler().is_some_and(|h| h.writes())
    }

    /// The format `path`'s extension names (ASCII case ignored), if one
    /// does: what saving with Auto writes.
    pub fn of_path(path: &Path) -> Option<Format> {
        let ext = path.extension().and_then(|e| e.to_str())?;
        Format::ALL
            .iter()
            .copied()
            .find(|f| f.extensions().iter().any(|e| e.eq_ignore_ascii_case(ext)))
    }

    /// The formats and their numbers, for "expected ..." messages.
    pub(crate) fn expected() -> String {
        let names: Vec<String> = std::iter::once(Format::Auto)
            .chain(Format::ALL.iter().copied())
            .map(|f| format!("{} ({})", f.name(), f.raw()))
            .collect();
        names.join(", ")
    }
}

/// The concrete format of `path` for saving: `format`, or for Auto the
/// format its extension names (TORCH when none does).
pub(crate) fn for_saving(path: &Path, format: Format) -> &'static dyn FileFormat {
    if let Some(h) = format.handler() {
        return h;
    }
    Format::of_path(path)
        .and_then(Format::handler)
        .unwrap_or(&super::torch_zip::TORCH_ZIP)
}

/// The format of a file's bytes: the first in the table whose content
/// check accepts them (the content decides, never the name).
pub fn detect(bytes: &[u8]) -> Result<Format> {
    if let Some(f) = Format::ALL
        .iter()
        .copied()
        .find(|f| f.handler().is_some_and(|h| h.detect(bytes)))
    {
        return Ok(f);
    }
    let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
    crate::bail!(
        Format,
        "the {} bytes are in none of the formats tessera reads ({})",
        bytes.len(),
        names.join(", ")
    )
}
