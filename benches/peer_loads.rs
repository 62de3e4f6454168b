//! Issue 56's safetensors row of "loads against the peers users have":
//! a 1 GiB safetensors file (8 float32 tensors of 128 MiB, pseudo-random
//! bytes) loaded by tessera's `serialize::load` and by the `safetensors`
//! crate over a `memmap2` map, in one process, same file, same page-cache
//! state (the file is in the page cache: every side loads it once before
//! the timed rounds), the sides of a case interleaved round by round (the
//! cases one after the other):
//!
//! - copy: tessera's copy load (the file read into fresh memory, on the
//!   parallel-loop threads; and on 1 thread) against the crate's
//!   `SafeTensors::deserialize` over the map with every tensor's bytes
//!   copied into fresh memory: a `Vec<u8>` (`to_vec`, what a user of the
//!   crate writes) and a tessera CPU storage (the same allocator as
//!   tessera's load). Both touch every byte.
//! - mmap: tessera's `LoadFlags { mmap: true }` (private mapping) and
//!   with `read_only: true`, against the map and `deserialize` alone (no
//!   copy). Neither side touches the tensors' bytes.
//! - sharded copy: the same 8 tensors saved by `save_sharded` in 8 shards
//!   of 128 MiB and a Hugging Face index; tessera's copy load of the index
//!   against the crate's copy load of every shard the index names (the
//!   index read with serde_json, as a user of the crate does).
//!
//! The single file is written, measured and removed, then the shards, so
//! that at most 1 GiB of files exists at a time.
//!
//! Each sample is one load and the drop of what it loaded (a copy
//! load's sample frees 1 GiB, on every side). Prints a markdown table:
//! medians and quartiles of the samples, the ratio of the medians tessera
//! / peer, and the verdict against the target (at most 1.0x the fastest
//! peer of the case, judged on the medians; the quartiles are printed,
//! not judged).
//!
//! `cargo bench --bench peer_loads [-- FILTER[|FILTER...]]` (ROUNDS=n, 11;
//! FILTER matches case names: "copy", "mmap"). The file is written to a
//! directory under $TMPDIR (BENCH_DIR=dir: under dir), removed at the end,
//! also when the bench fails.

use memmap2::Mmap;
use safetensors::SafeTensors;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera::serialize::{self, Format, LoadFlags, SaveFlags, TensorDict};
use tessera::{DType, Device, Storage, Tensor};

/// The tensors: 8 float32 tensors of 128 MiB.
const TENSORS: usize = 8;
const TENSOR_BYTES: usize = 128 << 20;

/// A directory removed (with what it holds) when dropped, also on a
/// panic's unwinding.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The 1 GiB dict: TENSORS float32 tensors of pseudo-random bytes.
fn make_dict() -> TensorDict {
    let mut dict = TensorDict::new();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..TENSORS {
        let n = (TENSOR_BYTES / 4) as i64;
        let t = Tensor::empty(&[n / 1024, 1024], DType::Float, Device::CPU).unwrap();
        // SAFETY: t is a fresh contiguous CPU tensor of TENSOR_BYTES bytes
        // (8-byte aligned: the CPU allocator's alignment), held by t only.
        let words =
            unsafe { std::slice::from_raw_parts_mut(t.data_ptr() as *mut u64, TENSOR_BYTES / 8) };
        for w in words {
            // xorshift64: bytes that no page-level trick can skip.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *w = x;
        }
        dict.set(&format!("layers.{i}.weight"), t).unwrap();
    }
    dict
}

/// The crate's load over a map: every tensor's view, and with `copy`
/// each tensor's bytes copied into fresh memory made by `fresh`.
fn crate_load<T>(path: &Path, fresh: impl Fn(&[u8]) -> T) -> Vec<T> {
    let file = std::fs::File::open(path).unwrap();
    // SAFETY: the bench's own file, which nothing writes while it is mapped.
    let map = unsafe { Mmap::map(&file) }.unwrap();
    let st = SafeTensors::deserialize(&map).unwrap();
    st.tensors().iter().map(|(_, v)| fresh(v.data())).collect()
}

/// The crate's load of every shard a Hugging Face index names (in the
/// order they first appear in its weight map).
fn crate_load_shards<T>(index: &Path, fresh: impl Fn(&[u8]) -> T + Copy) -> Vec<Vec<T>> {
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(index).unwrap()).unwrap();
    let mut shards: Vec<&str> = Vec::new();
    for v in json["weight_map"].as_object().unwrap().values() {
        let name = v.as_str().unwrap();
        if !shards.contains(&name) {
            shards.push(name);
        }
    }
    let dir = index.parent().unwrap();
    shards
        .iter()
        .map(|s| crate_load(&dir.join(s), fresh))
        .collect()
}

/// `bytes` copied into a fresh tessera CPU storage.
fn into_storage(bytes: &[u8]) -> Storage {
    let s = Storage::new(bytes.len(), Device::CPU, false).unwrap();
    // SAFETY: s is a fresh CPU storage of bytes.len() bytes, held here only.
    let dst = unsafe { std::slice::from_raw_parts_mut(s.data() as *mut u8, bytes.len()) };
    dst.copy_from_slice(bytes);
    s
}

struct Side {
    name: &'static str,
    run: Box<dyn FnMut()>,
    samples: Vec<f64>,
}

struct Case {
    name: &'static str,
    /// What the peers do with the bytes (the table's last column).
    note: &'static str,
    tessera: Side,
    peers: Vec<Side>,
}

fn side(name: &'static str, run: impl FnMut() + 'static) -> Side {
    Side {
        name,
        run: Box::new(run),
        samples: vec![],
    }
}

/// Median, first and third quartile of the samples, in ms.
fn quartiles(s: &[f64]) -> (f64, f64, f64) {
    let mut s = s.to_vec();
    s.sort_by(f64::total_cmp);
    (s[s.len() / 2], s[s.len() / 4], s[3 * s.len() / 4])
}

/// Runs `cases`, one after the other: each side once untimed, then
/// `rounds` rounds of all its sides in turn; prints their table rows. A
/// case's rounds run back to back, not interleaved with the other cases':
/// a mapped load's 0.03 ms right after a copy case's 3 GiB of frees took
/// 0.15 ms (docs/PERFORMANCE.md), and the side first in each round paid
/// it alone.
fn measure(mut cases: Vec<Case>, rounds: usize) {
    for c in cases.iter_mut() {
        // Untimed: the files in the page cache, the allocators warm.
        (c.tessera.run)();
        for p in c.peers.iter_mut() {
            (p.run)();
        }
        for _ in 0..rounds {
            for s in std::iter::once(&mut c.tessera).chain(c.peers.iter_mut()) {
                let t = Instant::now();
                (s.run)();
                s.samples.push(t.elapsed().as_nanos() as f64 / 1e6);
            }
        }
    }
    for c in &cases {
        let (tm, tq1, tq3) = quartiles(&c.tessera.samples);
        let fastest = c
            .peers
            .iter()
            .map(|p| quartiles(&p.samples).0)
            .fold(f64::INFINITY, f64::min);
        for p in &c.peers {
            let (pm, pq1, pq3) = quartiles(&p.samples);
            let verdict = if pm != fastest {
                "(not the fastest peer)"
            } else if tm <= fastest {
                "PASS"
            } else {
                "FAIL"
            };
            println!(
                "| {} | {tm:.2} ms [{tq1:.2}-{tq3:.2}] | {} | {pm:.2} ms [{pq1:.2}-{pq3:.2}] \
                 | {:.2}x | <= 1.0x the fastest peer | {verdict} | {} |",
                c.name,
                p.name,
                tm / pm,
                c.note
            );
        }
    }
}

/// A tessera load of `path` with `flags` on `threads` parallel-loop
/// threads, dropped.
fn tessera_side(path: &Path, flags: LoadFlags, threads: usize) -> Side {
    let path = path.to_path_buf();
    side("tessera", move || {
        // Changing the count rebuilds the thread pool (about 0.1 ms, the
        // mapped loads' whole time): only when it differs, and the
        // 1-thread case runs last in its rounds.
        if tessera::parallel::get_num_threads() != threads {
            tessera::parallel::set_num_threads(threads);
        }
        black_box(serialize::load(&path, Format::Safetensors, flags).unwrap());
    })
}

/// The crate's copy loads of the file at `path` (`shards`: of the index
/// at `path`): into `Vec`s and into tessera storages.
fn copy_peers(path: &Path, shards: bool) -> Vec<Side> {
    let (p1, p2) = (path.to_path_buf(), path.to_path_buf());
    if shards {
        vec![
            side("safetensors crate + to_vec", move || {
                black_box(crate_load_shards(&p1, |b| b.to_vec()));
            }),
            side("safetensors crate + tessera storage", move || {
                black_box(crate_load_shards(&p2, into_storage));
            }),
        ]
    } else {
        vec![
            side("safetensors crate + to_vec", move || {
                black_box(crate_load(&p1, |b| b.to_vec()));
            }),
            side("safetensors crate + tessera storage", move || {
                black_box(crate_load(&p2, into_storage));
            }),
        ]
    }
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| {
        filter
            .as_ref()
            .is_none_or(|f| f.split('|').any(|f| name.contains(f)))
    };
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(11)
        .max(1);
    let base = std::env::var_os("BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = TempDir(base.join(format!("tsr-peer-loads-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).unwrap();
    // Set, so that get_num_threads in the tessera sides is a load of the
    // setting (unset, it reads the cgroup's CPU quota: ten system calls).
    let threads = tessera::parallel::get_num_threads();
    tessera::parallel::set_num_threads(threads);
    let copy = LoadFlags::default();
    let mmap = LoadFlags {
        mmap: true,
        ..LoadFlags::default()
    };
    let read_only = LoadFlags {
        read_only: true,
        ..mmap
    };
    println!(
        "1 GiB of safetensors ({TENSORS} float32 tensors of {} MiB), {rounds} rounds, \
         {threads} parallel-loop threads, {} CPUs",
        TENSOR_BYTES >> 20,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!();
    println!(
        "| case | tessera median [q1-q3] | peer | peer median [q1-q3] | ratio | target \
         | result | note |"
    );
    println!("|---|---|---|---|---|---|---|---|");

    let path = dir.0.join("model.safetensors");
    let map_peer = |path: &Path| {
        let path = path.to_path_buf();
        vec![side("safetensors crate (map + deserialize)", move || {
            black_box(crate_load(&path, |b| b.len()));
        })]
    };
    let cases: Vec<Case> = [
        ("copy", "peers copy every byte", copy, threads),
        (
            "mmap",
            "neither side touches the tensors' bytes",
            mmap,
            threads,
        ),
        (
            "mmap read-only",
            "neither side touches the tensors' bytes",
            read_only,
            threads,
        ),
        (
            "copy, tessera on 1 thread",
            "peers copy every byte",
            copy,
            1,
        ),
    ]
    .into_iter()
    .filter(|(name, ..)| wanted(name))
    .map(|(name, note, flags, threads)| Case {
        name,
        note,
        tessera: tessera_side(&path, flags, threads),
        peers: if flags.mmap {
            map_peer(&path)
        } else {
            copy_peers(&path, false)
        },
    })
    .collect();
    if !cases.is_empty() {
        serialize::save(&make_dict(), &path, Format::Safetensors).unwrap();
        measure(cases, rounds);
        std::fs::remove_file(&path).unwrap();
    }

    let name = "8 shards copy";
    if wanted(name) {
        let shards = dir.0.join("shards");
        std::fs::create_dir(&shards).unwrap();
        let index = serialize::save_sharded(
            &make_dict(),
            &shards,
            Format::Safetensors,
            TENSOR_BYTES as u64,
            SaveFlags::default(),
        )
        .unwrap();
        measure(
            vec![Case {
                name,
                note: "peers copy every byte",
                tessera: tessera_side(&index, copy, threads),
                peers: copy_peers(&index, true),
            }],
            rounds,
        );
    }
}
