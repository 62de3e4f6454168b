//! DCP checkpoints built here item by item (issue 65): items over one
//! file's bytes, non-compact chunks, one file under two names, and a DCP
//! save over a directory holding the user's directories or links named
//! like a checkpoint's files.

use super::dcp_metadata::{Chunk, Item, Location, Metadata};
use super::safetensors_format::row_major;
use super::tests::filled;
use super::*;
use crate::dtype::DType;
use crate::error::ErrorKind;
use crate::tensor::Tensor;
use std::path::{Path, PathBuf};

const DATA: &str = "__0_0.distcp";

pub(super) fn scratch(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("tsr-dcp-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

/// The torch.save archive of `t` alone, as a DCP chunk's bytes.
pub(super) fn archive(t: &Tensor) -> Vec<u8> {
    let mut one = TensorDict::new();
    one.set("tensor", t.clone()).unwrap();
    let out = super::torch_write::write_lone(&one, "archive", std::io::Cursor::new(Vec::new()));
    out.unwrap().into_inner()
}

/// A DCP checkpoint assembled by hand: archives appended to one data
/// file, entries naming any bytes of it.
#[derive(Default)]
pub(super) struct Dcp {
    pub data: Vec<u8>,
    pub entries: Vec<(String, Item)>,
}

impl Dcp {
    /// Appends `t`'s archive to the data file: where it lies.
    pub fn put(&mut self, t: &Tensor) -> Location {
        let a = archive(t);
        let at = Location {
            file: DATA.into(),
            offset: self.data.len() as u64,
            length: a.len() as u64,
        };
        self.data.extend(a);
        at
    }

    /// Entry `name` of `dtype` and `size` in `chunks` (offsets, sizes, bytes).
    pub fn tensor(&mut self, name: &str, dtype: DType, size: &[i64], chunks: Vec<Chunk>) {
        let item = Item::Tensor {
            dtype,
            size: size.to_vec(),
            chunks,
        };
        self.entries.push((name.into(), item));
    }

    /// Entry `name`: one chunk covering it, `t`'s own archive.
    pub fn whole(&mut self, name: &str, t: &Tensor) {
        let at = self.put(t);
        self.tensor(name, t.dtype(), t.sizes(), vec![whole(t.sizes(), at)]);
    }

    pub fn write(&self, dir: &Path) {
        std::fs::create_dir_all(dir).unwrap();
        let meta = Metadata {
            entries: self.entries.clone(),
        };
        let pkl = super::dcp_metadata_write::write(&meta).unwrap();
        std::fs::write(dir.join(".metadata"), pkl).unwrap();
        std::fs::write(dir.join(DATA), &self.data).unwrap();
    }
}

pub(super) fn whole(size: &[i64], at: Location) -> Chunk {
    Chunk {
        offsets: vec![0; size.len()],
        sizes: size.to_vec(),
        at,
    }
}

const COPY: LoadFlags = LoadFlags {
    mmap: false,
    read_only: false,
    skip_unknown: false,
};
const MMAP: LoadFlags = LoadFlags { mmap: true, ..COPY };

/// The load of `dir` by copy and mapped: both refused with a format
/// error; the message (the same either way).
fn refused(dir: &Path) -> String {
    let mut said = Vec::new();
    for flags in [COPY, MMAP] {
        let e = load(dir, Format::Auto, flags)
            .map(|d| d.iter().map(|(n, _)| n.to_owned()).collect::<Vec<_>>())
            .expect_err("a hostile checkpoint loaded");
        assert_eq!(e.kind(), ErrorKind::Format, "{e}");
        said.push(e.to_string());
    }
    assert_eq!(said[0], said[1]);
    said.pop().unwrap()
}

#[test]
fn items_over_the_same_bytes_are_refused_naming_both() {
    // Issue 65, finding 1: `c` named `a`'s bytes and loaded as a second
    // storage over them (writing a[0] changed c[0]).
    let dir = scratch("alias");
    let mut d = Dcp::default();
    let a = filled(&[4], DType::Float, 1);
    d.whole("a", &a);
    d.whole("b", &filled(&[2], DType::Float, 2));
    let Item::Tensor { chunks, .. } = &d.entries[0].1 else {
        unreachable!()
    };
    let at = chunks[0].at.clone();
    d.tensor("c", DType::Float, &[4], vec![whole(&[4], at.clone())]);
    d.write(&dir);
    let e = refused(&dir);
    assert!(
        e.contains("'a' (chunk at offsets [0])")
            && e.contains("'c' (chunk at offsets [0])")
            && e.contains(&format!("'{DATA}'")),
        "{e}"
    );
    // A chunk and a bytes item sharing part of a range.
    let mut d = Dcp::default();
    d.whole("a", &a);
    let mut inside = at.clone();
    inside.offset += 10;
    inside.length = 5;
    d.entries.push(("step".into(), Item::Bytes(inside)));
    d.write(&dir);
    let e = refused(&dir);
    assert!(e.contains("'a'") && e.contains("'step' at bytes"), "{e}");
    // The same bytes under a second spelling of the file: one file loaded
    // twice would be two storages of it.
    let mut d = Dcp::default();
    d.whole("a", &a);
    let mut again = at.clone();
    again.file = format!("./{DATA}");
    d.tensor("c", DType::Float, &[4], vec![whole(&[4], again)]);
    d.write(&dir);
    let e = refused(&dir);
    assert!(e.contains(&format!("as '{DATA}' and as './{DATA}'")), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn chunks_that_are_not_compact_are_refused() {
    // Issue 65, finding 2: chunks holding a stride-0 expand of one element
    // made the load allocate the metadata's size (a 4 KB checkpoint, 528
    // MiB); here 2^20 floats from two archives of 4 bytes of data.
    let dir = scratch("expand");
    let half = 1i64 << 19;
    let one = filled(&[1], DType::Float, 7);
    let expanded = one.expand(&[half]).unwrap();
    let mut d = Dcp::default();
    let chunks = (0..2)
        .map(|i| Chunk {
            offsets: vec![i * half],
            sizes: vec![half],
            at: d.put(&expanded),
        })
        .collect();
    d.tensor("big", DType::Float, &[2 * half], chunks);
    d.write(&dir);
    let e = refused(&dir);
    assert!(
        e.contains("'big', chunk at offsets [0]")
            && e.contains("strides [0]")
            && e.contains("storage of 4 bytes")
            && e.contains("2097152 bytes"),
        "{e}"
    );
    // One chunk covering its tensor, an expand too.
    let mut d = Dcp::default();
    d.whole("big", &expanded);
    d.write(&dir);
    assert!(refused(&dir).contains("strides [0]"));
    // A view of a larger storage: its archive holds bytes it does not use.
    let wide = filled(&[8], DType::Float, 3);
    let mut d = Dcp::default();
    d.whole("part", &wide.narrow(0, 2, 4).unwrap());
    d.write(&dir);
    let e = refused(&dir);
    assert!(
        e.contains("storage of 32 bytes") && e.contains("(16 bytes"),
        "{e}"
    );
    // A dense chunk in another order (a transpose) is compact: loaded, and
    // stitched beside a contiguous one.
    let w = filled(&[2, 3], DType::Float, 5).transpose(0, 1).unwrap();
    let rest = filled(&[1, 2], DType::Float, 9);
    let mut d = Dcp::default();
    d.whole("t", &w);
    let (at0, at1) = (d.put(&w), d.put(&rest));
    let chunks = vec![
        Chunk {
            offsets: vec![0, 0],
            sizes: vec![3, 2],
            at: at0,
        },
        Chunk {
            offsets: vec![3, 0],
            sizes: vec![1, 2],
            at: at1,
        },
    ];
    d.tensor("s", DType::Float, &[4, 2], chunks);
    d.write(&dir);
    for flags in [COPY, MMAP] {
        let back = load(&dir, Format::Auto, flags).unwrap();
        assert_eq!(row_major(back.get("t").unwrap()), row_major(&w));
        let s = back.get("s").unwrap();
        assert_eq!(s.sizes(), [4, 2]);
        let mut want = row_major(&w).into_owned();
        want.extend_from_slice(&row_major(&rest));
        assert_eq!(row_major(s).as_ref(), want.as_slice());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[cfg(unix)]
#[test]
fn a_dcp_save_replaces_regular_files_only() {
    // Issue 65, finding 4: a directory `.metadata` (an Eclipse workspace)
    // or `tensorboard.distcp` was taken for the checkpoint's own file and
    // deleted with it.
    let mut dict = TensorDict::new();
    dict.set("w", filled(&[3], DType::Float, 1)).unwrap();
    let root = scratch("userdirs");
    std::fs::create_dir_all(&root).unwrap();
    for (entry, kind) in [
        (".metadata/version.ini", "a directory"),
        ("tensorboard.distcp/events", "a directory"),
        ("link.distcp", "a symbolic link"),
        ("pipe.distcp", "a FIFO"),
    ] {
        let dir = root.join("ckpt");
        let _ = std::fs::remove_dir_all(&dir);
        let top = entry.split('/').next().unwrap();
        // An old checkpoint beside the entry (the `.metadata` directory is
        // alone: an Eclipse workspace).
        let old = top != ".metadata";
        if old {
            save(&dict, &dir, Format::Dcp).unwrap();
        } else {
            std::fs::create_dir(&dir).unwrap();
        }
        let target = root.join("kept");
        std::fs::write(&target, b"mine").unwrap();
        match entry {
            "link.distcp" => std::os::unix::fs::symlink(&target, dir.join(top)).unwrap(),
            "pipe.distcp" => {
                let c = std::ffi::CString::new(dir.join(top).into_os_string().into_encoded_bytes());
                // SAFETY: a NUL-terminated path, read by mkfifo only.
                assert_eq!(unsafe { libc::mkfifo(c.unwrap().as_ptr(), 0o600) }, 0);
            }
            _ => {
                std::fs::create_dir(dir.join(top)).unwrap();
                std::fs::write(dir.join(entry), b"mine").unwrap();
            }
        }
        let e = save(&dict, &dir, Format::Dcp).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Io, "{e}");
        assert!(
            e.to_string().contains(&format!("'{top}', which is {kind}")),
            "{e}"
        );
        // Nothing deleted: the entry, what it holds or leads to, the old
        // checkpoint.
        let kept = if entry.contains('/') {
            dir.join(entry)
        } else {
            target.clone()
        };
        assert_eq!(std::fs::read(&kept).unwrap(), b"mine", "{entry}");
        assert!(std::fs::symlink_metadata(dir.join(top)).is_ok(), "{entry}");
        assert_eq!(dir.join(DATA).is_file(), old, "{entry}");
    }
    std::fs::remove_dir_all(&root).unwrap();
}

/// The hostile checkpoints of the bad-input table and the load_files fuzz
/// seeds (issue 65), built as above: `dcp_alias`, whose entry `c` names
/// `a`'s bytes, and `dcp_expand`, a [2^20] float tensor in two chunks
/// that are each a stride-0 expand of one float.
#[cfg_attr(not(unix), allow(dead_code))]
fn hostile_fixtures() -> Vec<(&'static str, Dcp)> {
    let mut alias = Dcp::default();
    alias.whole("a", &filled(&[4], DType::Float, 1));
    alias.whole("b", &filled(&[2], DType::Float, 2));
    let Item::Tensor { chunks, .. } = &alias.entries[0].1 else {
        unreachable!()
    };
    let at = chunks[0].at.clone();
    alias.tensor("c", DType::Float, &[4], vec![whole(&[4], at)]);
    let half = 1i64 << 19;
    let expanded = filled(&[1], DType::Float, 7).expand(&[half]).unwrap();
    let mut expand = Dcp::default();
    let chunks = (0..2)
        .map(|i| Chunk {
            offsets: vec![i * half],
            sizes: vec![half],
            at: expand.put(&expanded),
        })
        .collect();
    expand.tensor("big", DType::Float, &[2 * half], chunks);
    vec![("dcp_alias", alias), ("dcp_expand", expand)]
}

/// The bytes as written on Unix. The zip crate marks each entry of a zip
/// written on Windows as made by MS-DOS: the high byte of "version made by"
/// in the entry's central-directory header is 0 there, 3 (Unix) elsewhere;
/// the archives are otherwise the same (docs/PLATFORMS.md).
fn as_made_on_unix(mut bytes: Vec<u8>) -> Vec<u8> {
    if cfg!(windows) {
        let mut from = 0;
        while let Some(at) = bytes[from..].windows(4).position(|w| w == b"PK\x01\x02") {
            if let Some(system) = bytes.get_mut(from + at + 5) {
                *system = 3;
            }
            from += at + 4;
        }
    }
    bytes
}

/// The committed fixtures (tests/data/shards/hostile/) and fuzz seeds
/// (fuzz/corpus/load_files/) are what `hostile_fixtures` builds; with
/// TESSERA_WRITE_FIXTURES=1 this writes them instead.
#[test]
fn the_committed_hostile_dcp_files_are_the_built_ones() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let write = std::env::var_os("TESSERA_WRITE_FIXTURES").is_some_and(|v| v == "1");
    for (name, mut d) in hostile_fixtures() {
        d.data = as_made_on_unix(d.data);
        let meta = super::dcp_metadata_write::write(&Metadata {
            entries: d.entries.clone(),
        })
        .unwrap();
        // The load_files target's input: a byte whose low bit is 0 (DCP),
        // the metadata's length (u16, little-endian), the metadata, the
        // data file.
        let mut seed = vec![0u8];
        seed.extend((meta.len() as u16).to_le_bytes());
        seed.extend(&meta);
        seed.extend(&d.data);
        let fixture = root.join("tests/data/shards/hostile").join(name);
        let files = [
            (fixture.join(".metadata"), meta),
            (fixture.join(DATA), d.data.clone()),
            (root.join("fuzz/corpus/load_files").join(name), seed),
        ];
        for (path, bytes) in files {
            if write {
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(&path, &bytes).unwrap();
            }
            let committed =
                std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(
                committed == bytes,
                "{} is stale: TESSERA_WRITE_FIXTURES=1",
                path.display()
            );
        }
        // And each is refused.
        let e = refused(&fixture);
        let says = if name == "dcp_alias" {
            "share bytes"
        } else {
            "expected a compact tensor"
        };
        assert!(e.contains(says), "{name}: {e}");
    }
}
