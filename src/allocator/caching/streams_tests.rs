//! The caching layer's stream rules, over a host-memory backend with
//! streams whose events complete when a test says so (the same rules run
//! on a GPU in allocator::cuda's tests). Each test uses streams of its own.

use super::*;
use crate::data_ptr::DataPtr;
use std::cell::Cell;
use std::sync::Mutex;

/// Events: (stream, completed, destroyed); an event is its index + 1.
static EVENTS: Mutex<Vec<(usize, bool, bool)>> = Mutex::new(Vec::new());

thread_local! {
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

struct Fake;
static FAKE: Fake = Fake;

impl StreamOps for Fake {
    fn current(&self, _device: Device) -> usize {
        CURRENT.get()
    }
    fn record(&self, _device: Device, stream: usize) -> Result<usize> {
        let mut ev = EVENTS.lock().unwrap();
        ev.push((stream, false, false));
        Ok(ev.len())
    }
    fn query(&self, _device: Device, event: usize) -> Result<bool> {
        Ok(EVENTS.lock().unwrap()[event - 1].1)
    }
    fn synchronize(&self, _device: Device, event: usize) -> Result<()> {
        EVENTS.lock().unwrap()[event - 1].1 = true;
        Ok(())
    }
    fn destroy(&self, _device: Device, event: usize) {
        let e = &mut EVENTS.lock().unwrap()[event - 1];
        assert!(!e.2, "event {event} destroyed twice");
        e.2 = true;
    }
}

/// (recorded, completed, destroyed) events of `stream`.
fn events_of(stream: usize) -> (usize, usize, usize) {
    let ev = EVENTS.lock().unwrap();
    let mine = ev.iter().filter(|e| e.0 == stream);
    let n = mine.clone().count();
    let done = mine.clone().filter(|e| e.1).count();
    (n, done, mine.filter(|e| e.2).count())
}

/// The work queued on `stream` so far is done.
fn complete(stream: usize) {
    for e in EVENTS.lock().unwrap().iter_mut().filter(|e| e.0 == stream) {
        e.1 = true;
    }
}

struct Streamed;

unsafe extern "C" fn malloc_free(ctx: *mut c_void) {
    // SAFETY: ctx came from libc::malloc in Streamed::allocate, freed once.
    unsafe { libc::free(ctx) };
}

impl RawAllocator for Streamed {
    fn allocate(&self, nbytes: usize, device: Device) -> Result<DataPtr> {
        // SAFETY: plain malloc; the result is checked.
        let p = unsafe { libc::malloc(nbytes) };
        crate::ensure!(!p.is_null(), OutOfMemory, "malloc({nbytes}) failed");
        // SAFETY: malloc_free frees exactly this allocation, once.
        Ok(unsafe { DataPtr::from_raw_parts(p, p, Some(malloc_free), device) })
    }
    fn device_hooks(&self) -> crate::allocator::DeviceHooks {
        crate::allocator::DeviceHooks {
            streams: Some(&FAKE),
            ..crate::allocator::DeviceHooks::NONE
        }
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

fn streamed() -> Allocator {
    let inner = Allocator::new("streamed", Device::CPU, Box::new(Streamed));
    new(inner, CachingOptions::default()).unwrap()
}

fn active(a: &Allocator) -> u64 {
    of(a).unwrap().stats().unwrap().all.active_bytes.current
}

const MIB: usize = 1 << 20;

#[test]
fn pools_are_per_stream() {
    let a = streamed();
    CURRENT.set(101);
    let p = a.allocate(4096).unwrap();
    let addr = p.get();
    drop(p);
    CURRENT.set(102);
    let q = a.allocate(4096).unwrap();
    assert_ne!(q.get(), addr, "stream 102 got a block stream 101 freed");
    CURRENT.set(101);
    let r = a.allocate(4096).unwrap();
    assert_eq!(r.get(), addr, "stream 101 reuses its own block");
    let segments = of(&a).unwrap().shared().lock.lock().unwrap().segments();
    let mut streams: Vec<usize> = segments.iter().map(|s| s.stream).collect();
    streams.sort();
    assert_eq!(streams, [101, 102], "one small segment per stream");
    CURRENT.set(0);
}

#[test]
fn recorded_streams_hold_a_block_until_their_events_complete() {
    let a = streamed();
    CURRENT.set(201);
    let p = a.allocate(MIB).unwrap();
    let addr = p.get();
    assert!(
        record_stream(&p, 201).unwrap(),
        "its own stream: nothing to wait for"
    );
    assert!(record_stream(&p, 202).unwrap());
    assert!(record_stream(&p, 202).unwrap());
    assert!(record_stream(&p, 203).unwrap());
    drop(p);
    assert_eq!(events_of(201), (0, 0, 0));
    assert_eq!(
        events_of(202),
        (1, 0, 0),
        "one event per stream, recorded once"
    );
    assert_eq!(events_of(203), (1, 0, 0));
    assert_eq!(active(&a), MIB as u64, "a pending block stays active");
    let q = a.allocate(MIB).unwrap();
    assert_ne!(
        q.get(),
        addr,
        "handed out while stream 203 may still use it"
    );
    complete(202);
    let r = a.allocate(3 * MIB).unwrap();
    assert_eq!(
        active(&a),
        5 * MIB as u64,
        "stream 203's event has not completed"
    );
    complete(203);
    let s = a.allocate(5 * MIB).unwrap();
    assert_eq!(
        active(&a),
        9 * MIB as u64,
        "both completed: the block went back"
    );
    assert_eq!(events_of(202), (1, 1, 1));
    assert_eq!(events_of(203), (1, 1, 1));
    drop((q, r, s));
    CURRENT.set(0);
}

#[test]
fn empty_cache_and_the_last_free_wait_for_pending_blocks() {
    let a = streamed();
    CURRENT.set(301);
    let p = a.allocate(4096).unwrap();
    record_stream(&p, 302).unwrap();
    drop(p);
    assert_eq!(events_of(302), (1, 0, 0));
    a.empty_cache().unwrap();
    assert_eq!(
        events_of(302),
        (1, 1, 1),
        "empty_cache waited for the event"
    );
    let st = of(&a).unwrap().stats().unwrap();
    assert_eq!(
        (st.all.active_bytes.current, st.all.reserved_bytes.current),
        (0, 0)
    );
    // The owner goes while a used block is out: its free waits at once
    // (no allocation will ever poll) and destroys the state.
    let p = a.allocate(4096).unwrap();
    record_stream(&p, 303).unwrap();
    drop(a);
    drop(p);
    assert_eq!(events_of(303), (1, 1, 1));
    // A pending block when the owner goes: the owner's drop waits.
    let a = streamed();
    let p = a.allocate(4096).unwrap();
    record_stream(&p, 304).unwrap();
    drop(p);
    drop(a);
    assert_eq!(events_of(304), (1, 1, 1));
    CURRENT.set(0);
}

#[test]
fn memory_of_other_allocators_records_nothing() {
    let plain = Allocator::new("streamed", Device::CPU, Box::new(Streamed));
    let p = plain.allocate(64).unwrap();
    assert!(!record_stream(&p, 401).unwrap(), "not a caching block");
    let (cached, _) = super::tests::cached();
    let q = cached.allocate(64).unwrap();
    assert!(
        !record_stream(&q, 401).unwrap(),
        "a caching allocator without streams"
    );
    assert!(!record_stream(&DataPtr::empty(Device::CPU), 401).unwrap());
    assert_eq!(events_of(401), (0, 0, 0));
}
