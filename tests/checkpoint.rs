//! Checkpoints opened once and loaded in parts (`serialize::Checkpoint`,
//! the tsr_checkpoint_* exports): every format opens and loads what
//! `serialize::load` loads; one tensor, rows of one, or a set read only
//! their bytes (the handle's count of bytes read says so); sets fetched
//! by several threads in chunks equal one read; progress and cancel;
//! memory from the allocator registered for the device asked for (a
//! counting plugin says where the bytes landed); reads into a caller's
//! buffer; files changed under an open handle refused; loads from
//! several threads at once.

use std::any::Any;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tessera::allocator::{registry, Allocator, RawAllocator};
use tessera::data_ptr::DataPtr;
use tessera::device::{Device, DeviceType};
use tessera::error::{ErrorKind, Result};
use tessera::serialize::{self, Checkpoint, FetchOptions, Format, LoadFlags, Progress, TensorDict};
use tessera::DType;

#[path = "common/checkpoint.rs"]
mod common;
use common::*;

#[test]
fn every_format_loads_what_load_loads() {
    let d = sample();
    for (name, format) in [
        ("a.safetensors", Format::Safetensors),
        ("a.pt", Format::Torch),
        ("a.npz", Format::Npz),
        ("a.gguf", Format::Gguf),
    ] {
        let mut dict = TensorDict::new();
        for (n, t) in d.iter() {
            // GGUF has no 0-d or empty tensors to compare as they were.
            if format == Format::Gguf && (t.sizes().is_empty() || t.numel() == 0) {
                continue;
            }
            dict.set(n, t.clone()).unwrap();
        }
        if format != Format::Npz {
            dict.set_metadata("origin", "tests/checkpoint.rs").unwrap();
        }
        check_against_load(&saved(&dict, name, format), name);
    }
    let mut one = TensorDict::new();
    one.set("x", filled(&[5, 7], DType::Int, 9)).unwrap();
    check_against_load(&saved(&one, "a.npy", Format::Npy), "npy");
    // A directory format (DCP) and a shard index.
    check_against_load(&saved(&d, "dcp", Format::Dcp), "dcp");
    let dir = scratch("sharded");
    std::fs::create_dir_all(&dir).unwrap();
    serialize::save_sharded(&d, &dir, Format::Safetensors, 4096, Default::default()).unwrap();
    check_against_load(&dir.join("model.safetensors.index.json"), "shard index");
}

#[test]
fn one_tensor_reads_only_the_header_and_its_bytes() {
    let mut d = TensorDict::new();
    for i in 0..8 {
        d.set(&format!("t{i}"), filled(&[256, 1024], DType::Float, i))
            .unwrap();
    }
    let path = saved(&d, "big.safetensors", Format::Safetensors);
    let c = Checkpoint::open(&path, Format::Auto, COPY).unwrap();
    let mut head = [0u8; 8];
    std::io::Read::read_exact(&mut std::fs::File::open(&path).unwrap(), &mut head).unwrap();
    let header = 8 + u64::from_le_bytes(head);
    assert_eq!(
        c.bytes_read(),
        header,
        "open reads the 8-byte length and the header"
    );
    let t = c.load("t3", Device::CPU).unwrap();
    assert_same(&t, d.get("t3").unwrap(), "t3");
    assert_eq!(c.bytes_read(), header + (1 << 20), "one tensor: its 1 MiB");
    // 1% of the rows: only their bytes.
    let rows = c.load_rows("t5", 100, 103, Device::CPU).unwrap();
    assert_eq!(rows.sizes(), &[3, 1024]);
    assert_same(
        &rows,
        &d.get("t5").unwrap().narrow(0, 100, 3).unwrap(),
        "rows",
    );
    assert_eq!(c.bytes_read(), header + (1 << 20) + 3 * 4096);
    // npy: its header, then the rows' bytes.
    let mut one = TensorDict::new();
    one.set("arr_0", d.get("t6").unwrap().clone()).unwrap();
    let npy = saved(&one, "big.npy", Format::Npy);
    let c = Checkpoint::open(&npy, Format::Auto, COPY).unwrap();
    let header = std::fs::metadata(&npy).unwrap().len() - (1 << 20);
    assert_eq!(c.bytes_read(), header, "open reads the npy header");
    let rows = c.load_rows("arr_0", 7, 9, Device::CPU).unwrap();
    assert_same(
        &rows,
        &d.get("t6").unwrap().narrow(0, 7, 2).unwrap(),
        "npy rows",
    );
    assert_eq!(c.bytes_read(), header + 2 * 4096);
    // GGUF: the first 256 KiB hold its header, then one tensor's bytes.
    let gguf = saved(&d, "big.gguf", Format::Gguf);
    let c = Checkpoint::open(&gguf, Format::Auto, COPY).unwrap();
    assert_eq!(
        c.bytes_read(),
        256 << 10,
        "open reads the GGUF header's first step"
    );
    assert_same(
        &c.load("t2", Device::CPU).unwrap(),
        d.get("t2").unwrap(),
        "gguf",
    );
    assert_eq!(c.bytes_read(), (256 << 10) + (1 << 20));
    // A torch archive: its tail, central directory, local headers and
    // pickles, then only the bytes asked for.
    let pt = saved(&d, "big.pt", Format::Torch);
    let c = Checkpoint::open(&pt, Format::Auto, COPY).unwrap();
    let index = c.bytes_read();
    assert!(
        index > 0 && index < (200 << 10),
        "the torch index is read, not the storages: {index}"
    );
    c.load("t1", Device::CPU).unwrap();
    c.load_rows("t2", 0, 1, Device::CPU).unwrap();
    assert_eq!(c.bytes_read(), index + (1 << 20) + 4096);
}

/// Every file of `dir` whose name ends with `ext`, sorted.
#[test]
fn rows_of_strided_tensors_read_the_covering_range() {
    // A transposed view saved by torch keeps its strides: rows of it are
    // columns of the storage.
    let base = filled(&[6, 10], DType::Float, 7);
    let mut d = TensorDict::new();
    d.set("t", base.transpose(0, 1).unwrap()).unwrap();
    d.set("base", base.clone()).unwrap();
    let path = saved(&d, "strided.pt", Format::Torch);
    let c = Checkpoint::open(&path, Format::Auto, COPY).unwrap();
    let full = base.transpose(0, 1).unwrap();
    for (a, b) in [(0, 10), (3, 4), (9, 10), (5, 5)] {
        let r = c.load_rows("t", a, b, Device::CPU).unwrap();
        assert_same(
            &r,
            &full.narrow(0, a, b - a).unwrap(),
            &format!("rows {a}..{b}"),
        );
    }
    // Tensors sharing a storage loaded together share it again.
    let all = c
        .load_many(None, Device::CPU, FetchOptions::default())
        .unwrap();
    assert!(tessera::Storage::ptr_eq(
        all.get("t").unwrap().storage(),
        all.get("base").unwrap().storage()
    ));
    let mut buf = vec![0u8; 240];
    c.read_into("t", &mut buf).unwrap();
    assert_eq!(
        &buf[..],
        &serialize::row_major(&full)[..],
        "read_into: row-major"
    );
    let e = c.load_rows("t", 2, 11, Device::CPU).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("[2, 11)"), "{}", e.message());
}

#[test]
fn sets_in_parallel_chunks_report_progress_and_cancel() {
    let mut d = TensorDict::new();
    for i in 0..6 {
        d.set(&format!("w{i}"), filled(&[100, 1000], DType::Float, i))
            .unwrap();
    }
    let path = saved(&d, "set.safetensors", Format::Safetensors);
    let c = Checkpoint::open(&path, Format::Auto, COPY).unwrap();
    let names = ["w4", "w1", "w2"];
    for (concurrency, chunk) in [(1, 0), (2, 4096), (4, 100_000), (8, 1 << 20)] {
        let mut reports: Vec<(u64, u64, Option<String>)> = Vec::new();
        let mut cb = |p: &Progress<'_>| {
            reports.push((p.done, p.total, p.finished.map(str::to_owned)));
            true
        };
        let got = c
            .load_many(
                Some(&names),
                Device::CPU,
                FetchOptions {
                    concurrency,
                    chunk_bytes: chunk,
                    progress: Some(&mut cb),
                },
            )
            .unwrap();
        let what = format!("{concurrency} threads, chunk {chunk}");
        assert_eq!(got.len(), 3);
        for n in names {
            assert_same(got.get(n).unwrap(), d.get(n).unwrap(), &what);
        }
        let total = 3 * 400_000;
        assert!(
            reports.windows(2).all(|w| w[0].0 <= w[1].0),
            "{what}: done grows"
        );
        assert_eq!(
            reports.last().unwrap().0,
            total,
            "{what}: done ends at the total"
        );
        assert!(reports.iter().all(|r| r.1 == total));
        let mut finished: Vec<String> = reports.iter().filter_map(|r| r.2.clone()).collect();
        finished.sort();
        assert_eq!(
            finished,
            ["w1", "w2", "w4"],
            "{what}: each tensor finished once"
        );
    }
    // Cancel after the first report: Cancelled, and nothing kept.
    let before = c.bytes_read();
    let mut calls = 0;
    let mut cancel = |_: &Progress<'_>| {
        calls += 1;
        false
    };
    let e = c
        .load_many(
            None,
            Device::CPU,
            FetchOptions {
                concurrency: 1,
                chunk_bytes: 65536,
                progress: Some(&mut cancel),
            },
        )
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Cancelled, "{}", e.message());
    assert_eq!(calls, 1);
    assert_eq!(
        c.bytes_read() - before,
        65536,
        "no chunk read after the cancel"
    );
    // Names unknown or given twice.
    let e = c.load_many(Some(&["w1", "nope"]), Device::CPU, FetchOptions::default());
    assert!(e.unwrap_err().message().contains("'nope'"));
    let e = c.load_many(Some(&["w1", "w1"]), Device::CPU, FetchOptions::default());
    assert!(e.unwrap_err().message().contains("twice"));
}

/// A backend over malloc that counts its bytes and its copies in.
struct Counting {
    allocated: Arc<AtomicUsize>,
    copied: Arc<AtomicUsize>,
}

unsafe extern "C" fn libc_free(p: *mut std::ffi::c_void) {
    // SAFETY: p came from malloc in Counting::allocate.
    unsafe { libc::free(p) }
}

impl RawAllocator for Counting {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        self.allocated.fetch_add(nbytes, Ordering::Relaxed);
        // SAFETY: plain malloc; freed by libc_free.
        let p = unsafe { libc::malloc(nbytes.max(1)) };
        // SAFETY: libc_free frees exactly this pointer.
        Ok(unsafe { DataPtr::from_raw_parts(p, p, Some(libc_free), device) })
    }
    unsafe fn copy_data(
        &self,
        dst: *mut std::ffi::c_void,
        src: *const std::ffi::c_void,
        nbytes: usize,
    ) -> Result<()> {
        self.copied.fetch_add(nbytes, Ordering::Relaxed);
        // SAFETY: the caller's contract: both valid for nbytes, disjoint.
        unsafe { std::ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, nbytes) };
        Ok(())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

#[test]
fn loads_land_in_the_allocator_registered_for_the_device() {
    let allocated = Arc::new(AtomicUsize::new(0));
    let copied = Arc::new(AtomicUsize::new(0));
    let device = Device::new(DeviceType::PrivateUse1, 0).unwrap();
    let alloc = Allocator::new(
        "counting",
        device,
        Box::new(Counting {
            allocated: allocated.clone(),
            copied: copied.clone(),
        }),
    );
    assert!(registry::set_allocator(DeviceType::PrivateUse1, &alloc, 9));
    let d = sample();
    for (name, format) in [
        ("dev.safetensors", Format::Safetensors),
        ("dev.pt", Format::Torch),
    ] {
        let path = saved(&d, name, format);
        let c = Checkpoint::open(&path, Format::Auto, COPY).unwrap();
        let (a0, c0) = (
            allocated.load(Ordering::Relaxed),
            copied.load(Ordering::Relaxed),
        );
        let t = c.load("embed", device).unwrap();
        assert_eq!(t.device(), device);
        assert_eq!(
            allocated.load(Ordering::Relaxed) - a0,
            4096,
            "{name}: 64 x 16 floats"
        );
        assert_eq!(
            copied.load(Ordering::Relaxed) - c0,
            4096,
            "{name}: copied in by the plugin"
        );
        assert_same(&t, d.get("embed").unwrap(), name);
        let all = c
            .load_many(
                None,
                device,
                FetchOptions {
                    chunk_bytes: 1000,
                    ..Default::default()
                },
            )
            .unwrap();
        for (n, t) in all.iter() {
            assert_eq!(t.device(), device, "{name}: {n}");
            assert_same(t, d.get(n).unwrap(), &format!("{name}: {n}"));
        }
    }
    registry::clear_allocator(DeviceType::PrivateUse1);
}

#[test]
fn a_file_changed_under_an_open_handle_is_refused() {
    let d = sample();
    for (name, format) in [
        ("chg.safetensors", Format::Safetensors),
        ("chg.pt", Format::Torch),
    ] {
        let path = saved(&d, name, format);
        let len = std::fs::metadata(&path).unwrap().len();
        let c = Checkpoint::open(&path, Format::Auto, COPY).unwrap();
        c.load("norm", Device::CPU).unwrap();
        // Truncated.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 64)
            .unwrap();
        let e = c.load("norm", Device::CPU).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Format, "{name}");
        assert!(
            e.message().contains("changed since it was opened"),
            "{}",
            e.message()
        );
        // Written in place at the same size: its modification time moves.
        let c = {
            serialize::save(&d, &path, format).unwrap();
            Checkpoint::open(&path, Format::Auto, COPY).unwrap()
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let e = c.load("embed", Device::CPU).unwrap_err();
        assert!(
            e.message().contains("changed since it was opened"),
            "{}",
            e.message()
        );
        // Replaced by a save (a rename over it): the handle still reads the
        // file it opened, whole and unchanged.
        let c = Checkpoint::open(&path, Format::Auto, COPY).unwrap();
        let mut other = TensorDict::new();
        other.set("norm", filled(&[16], DType::Double, 99)).unwrap();
        serialize::save(&other, &path, format).unwrap();
        assert_same(
            &c.load("norm", Device::CPU).unwrap(),
            d.get("norm").unwrap(),
            name,
        );
    }
}

#[test]
fn several_threads_load_from_one_handle_and_outlive_its_owner() {
    let mut d = TensorDict::new();
    for i in 0..16 {
        d.set(&format!("t{i}"), filled(&[64, 64], DType::Float, i))
            .unwrap();
    }
    let path = saved(&d, "threads.safetensors", Format::Safetensors);
    let c = Arc::new(Checkpoint::open(&path, Format::Auto, COPY).unwrap());
    let d = Arc::new(d);
    let threads: Vec<_> = (0..4)
        .map(|k| {
            let (c, d) = (c.clone(), d.clone());
            std::thread::spawn(move || {
                for round in 0..20 {
                    let name = format!("t{}", (k * 5 + round) % 16);
                    let t = c.load(&name, Device::CPU).unwrap();
                    assert_same(&t, d.get(&name).unwrap(), &name);
                }
            })
        })
        .collect();
    drop(c); // the threads hold it until they finish
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn mapped_loads_view_the_file_and_read_nothing() {
    let d = sample();
    let path = saved(&d, "mapped.safetensors", Format::Safetensors);
    let flags = LoadFlags {
        mmap: true,
        read_only: true,
        ..COPY
    };
    let c = Checkpoint::open(&path, Format::Auto, flags).unwrap();
    let after_open = c.bytes_read();
    let t = c.load("embed", Device::CPU).unwrap();
    assert_same(&t, d.get("embed").unwrap(), "embed");
    assert!(
        t.is_read_only(),
        "a read-only mapping gives read-only tensors"
    );
    assert_eq!(c.bytes_read(), after_open, "a view reads nothing");
}
