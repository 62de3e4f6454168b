//! The pickle reader's peak heap, measured by a counting global
//! allocator: no pickle makes it hold more than 1 MiB + 32 bytes per input
//! byte (issue 51: `Limits::bound`), hostile pickles built opcode by
//! opcode to cost the most per byte, and torch.save's pickles of a large
//! state dict. Each is read whole (parse) and its arena kept until the
//! measurement: the peak covers the reader's stack, memo and the arena.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use tessera::pickle::{parse, Limits};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every method forwards to System with the caller's arguments and
// only updates counters besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for alloc, forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: ptr was allocated by alloc above with layout (GlobalAlloc's
        // default realloc allocates anew, copies and deallocates: both
        // blocks count while the copy is made).
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const SIZE: usize = 1 << 20;

/// PROTO 2, `head`, `body` repeated to about SIZE bytes, `tail`.
fn repeat(head: &[u8], body: &[u8], tail: &[u8]) -> Vec<u8> {
    let mut b = vec![0x80, 2];
    b.extend_from_slice(head);
    while b.len() + body.len() + tail.len() < SIZE {
        b.extend_from_slice(body);
    }
    b.extend_from_slice(tail);
    b
}

/// The hostile pickles: each opcode pattern that costs the reader the
/// most per input byte, repeated over 1 MiB (under the stack limit of 2^20 values).
fn hostile() -> Vec<(&'static str, Vec<u8>)> {
    let lbinput = |i: u32| {
        let mut v = vec![b'r'];
        v.extend_from_slice(&i.to_le_bytes());
        v
    };
    vec![
        (
            "a list of Nones (MARK, NONE..., APPENDS)",
            repeat(b"](", b"N", b"e."),
        ),
        (
            "a list of empty lists (MARK, EMPTY_LIST..., LIST)",
            repeat(b"(", b"]", b"l."),
        ),
        ("empty dicts left on the stack", repeat(b"", b"}", b".")),
        ("empty lists, each memoized", repeat(b"", b"]\x94", b".")),
        (
            "a tuple of a tuple of ... (TUPLE1)",
            repeat(b"N", b"\x85", b"."),
        ),
        ("pairs of DUPs (TUPLE2)", repeat(b"N", b"2\x86", b".")),
        ("triples of DUPs (TUPLE3)", repeat(b"N", b"222\x87", b".")),
        (
            "a tuple of a million values (MARK, ..., TUPLE)",
            repeat(b"(", b"N", b"t."),
        ),
        ("lists appended one in another", repeat(b"](", b"]", b"e.")),
        ("a list each APPENDed a None", repeat(b"(", b"]Na", b"l.")),
        ("dict items (SETITEM)", repeat(b"}", b"NNs", b".")),
        ("set items (ADDITEMS)", repeat(b"\x8f(", b"N", b"\x90.")),
        ("a dict built by DICT", repeat(b"(", b"NN", b"d.")),
        (
            "calls of a memoized global (REDUCE)",
            repeat(b"ccollections\nOrderedDict\nq\x00(", b"h\x00)R", b"l."),
        ),
        (
            "calls given a state (BUILD)",
            repeat(b"ccollections\nOrderedDict\nq\x00(", b"h\x00)R}b", b"l."),
        ),
        (
            "persistent ids of None (BINPERSID)",
            repeat(b"(", b"NQ", b"l."),
        ),
        (
            "empty strs (SHORT_BINUNICODE)",
            repeat(b"(", b"\x8c\x00", b"l."),
        ),
        (
            "one-byte Latin-1 strs (SHORT_BINSTRING)",
            repeat(b"(", b"U\x01\xe9", b"l."),
        ),
        ("ints (BININT1)", repeat(b"(", b"K\x07", b"l.")),
        (
            "floats (BINFLOAT)",
            repeat(b"(", b"G\0\0\0\0\0\0\0\0", b"l."),
        ),
        (
            "memo gets of a list (BINGET)",
            repeat(b"]q\x00(", b"h\x00", b"l."),
        ),
        ("DUPs of a list", repeat(b"]", b"2", b".")),
        ("a memo index near the input's length", {
            let mut b = vec![0x80, 2, b'N'];
            b.extend(lbinput((SIZE / 2) as u32 - 1));
            b.extend(std::iter::repeat_n(b'N', SIZE - b.len() - 1));
            b.push(b'.');
            b
        }),
        ("memo puts at growing sparse indices", {
            let mut b = vec![0x80, 2, b'N'];
            let mut i = SIZE as u32;
            while b.len() < SIZE - 8 {
                b.extend(lbinput(i));
                i += 7;
            }
            b.push(b'.');
            b
        }),
    ]
}

/// A torch.save-style pickle (tessera's torch writer writes torch.save's
/// layout: an OrderedDict of `_rebuild_tensor_v2` calls over persistent
/// ids) of a state dict of `n` tensors.
fn torch_state_dict(n: usize) -> Vec<u8> {
    use tessera::serialize::{save_to_bytes, Format, TensorDict};
    let mut d = TensorDict::new();
    for i in 0..n {
        let t =
            tessera::Tensor::empty(&[2, 3], tessera::DType::Float, tessera::Device::CPU).unwrap();
        d.set(&format!("layers.{i}.attention.weight"), t).unwrap();
    }
    let archive = save_to_bytes(&d, Format::Torch).unwrap();
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(archive)).unwrap();
    let name = zip
        .file_names()
        .find(|n| n.ends_with("/data.pkl"))
        .unwrap()
        .to_owned();
    let mut pkl = Vec::new();
    std::io::Read::read_to_end(&mut zip.by_name(&name).unwrap(), &mut pkl).unwrap();
    pkl
}

/// The heap `parse` holds at its peak (the arena kept), beyond what was
/// live before.
fn peak_of(bytes: &[u8]) -> (usize, bool) {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let r = parse(bytes, &|_, _| true, Limits::default());
    let ok = r.is_ok();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    drop(r);
    (peak, ok)
}

#[test]
fn no_pickle_makes_the_reader_hold_more_than_32_bytes_per_byte() {
    let limits = Limits::default();
    let mut cases = hostile();
    cases.push((
        "torch.save pickle, 20,000 tensors",
        torch_state_dict(20_000),
    ));
    let mut worst = 0.0f64;
    // Tests in this binary run one at a time (one test), so the peak is
    // the reader's.
    for (what, bytes) in &cases {
        let (peak, ok) = peak_of(bytes);
        let bound = limits.bound(bytes.len()) as usize;
        let per_byte = peak.saturating_sub(1 << 20) as f64 / bytes.len() as f64;
        worst = worst.max(per_byte);
        eprintln!(
            "{what}: {} bytes, peak {peak} ({per_byte:.1} per byte over 1 MiB), {}",
            bytes.len(),
            if ok { "read" } else { "refused" }
        );
        assert!(
            peak <= bound,
            "{what}: peak heap {peak} bytes, bound {bound} (1 MiB + 32 x {})",
            bytes.len()
        );
    }
    eprintln!("worst: {worst:.1} bytes per input byte over 1 MiB");
}
