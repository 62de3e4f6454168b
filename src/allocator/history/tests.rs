//! The per-thread buffers against the ring: time order across threads,
//! frees on another thread, the ring's bound, thread exit, restarting.
//! Events are recorded directly (not through an allocator) under a tag of
//! each test's own, with the hot path's flag never set (start_with), so
//! that the other tests' allocations cannot reach the ring.

use super::*;
use std::sync::mpsc;
use std::sync::{Barrier, MutexGuard};

fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts recording with the hot path's flag off (see the module's doc).
fn quiet_start(max_entries: usize) {
    stop();
    start_with(max_entries, false, false).unwrap();
}

fn tag(name: &str) -> &'static Tag {
    Tag::new(
        format!("history-test-{name}"),
        Device::CPU,
        crate::allocator::AllocatorKind::Other,
        None,
    )
}

fn alloc(t: &'static Tag, addr: usize, size: usize) {
    record_change(t, addr, size as i64);
}

fn free(t: &'static Tag, addr: usize, size: usize) {
    record_change(t, addr, -(size as i64));
}

fn mine(t: &'static Tag) -> Vec<(Action, usize)> {
    events()
        .into_iter()
        .filter(|e| std::ptr::eq(e.tag, t))
        .map(|e| (e.action, e.addr))
        .collect()
}

/// Live blocks of `t` by address.
fn live(t: &'static Tag) -> Vec<usize> {
    let guard = lock_drained();
    let mut v: Vec<usize> = guard
        .as_ref()
        .map(|r| {
            r.live
                .iter()
                .filter(|(_, b)| std::ptr::eq(b.tag, t))
                .map(|(&(_, a), _)| a)
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn events_of_several_threads_merge_in_time_order() {
    let _s = serial();
    quiet_start(100_000);
    let t = tag("merge");
    std::thread::scope(|s| {
        for th in 0..4usize {
            s.spawn(move || {
                for i in 0..1000usize {
                    let a = (th << 20) | (i << 4);
                    alloc(t, a, 16);
                    // Every other block stays live.
                    if i % 2 == 0 {
                        free(t, a, 16);
                    }
                }
            });
        }
    });
    let all = events();
    assert!(
        all.windows(2).all(|w| w[0].ticks <= w[1].ticks),
        "times never decrease along the ring"
    );
    let ours = mine(t);
    assert_eq!(ours.len(), 4 * 1500);
    for th in 0..4usize {
        let of: Vec<_> = ours.iter().filter(|(_, a)| a >> 20 == th).collect();
        let mut expected = Vec::new();
        for i in 0..1000usize {
            let a = (th << 20) | (i << 4);
            expected.push((Action::Alloc, a));
            if i % 2 == 0 {
                expected.push((Action::Free, a));
            }
        }
        let of: Vec<_> = of.into_iter().copied().collect();
        assert_eq!(of, expected, "thread {th}'s events in its order");
    }
    let want: Vec<usize> = (0..4usize)
        .flat_map(|th| {
            (1..1000usize)
                .step_by(2)
                .map(move |i| (th << 20) | (i << 4))
        })
        .collect();
    let mut want = want;
    want.sort();
    assert_eq!(live(t), want);
    stop();
}

#[test]
fn frees_on_another_thread_end_the_blocks() {
    let _s = serial();
    quiet_start(100_000);
    let t = tag("cross");
    let (to_b, from_a) = mpsc::channel::<usize>();
    let done = &Barrier::new(2);
    std::thread::scope(|s| {
        s.spawn(move || {
            // Fewer events than a buffer holds: they stay in A's buffer
            // while B frees the blocks and drains.
            for i in 1..=100usize {
                alloc(t, i << 8, 64);
                to_b.send(i << 8).unwrap();
            }
            drop(to_b);
            done.wait();
        });
        s.spawn(move || {
            let mut n = 0;
            for a in from_a.iter() {
                free(t, a, 64);
                n += 1;
                if n % 10 == 0 {
                    let _ = events();
                }
            }
            done.wait();
        });
    });
    assert_eq!(live(t), Vec::<usize>::new(), "every block was freed");
    let ours = mine(t);
    assert_eq!(ours.len(), 200);
    for i in 1..=100usize {
        let at = |act| ours.iter().position(|&e| e == (act, i << 8)).unwrap();
        assert!(at(Action::Alloc) < at(Action::Free), "block {i}");
    }
    stop();
}

#[test]
fn a_free_drained_before_its_allocation_cancels_it() {
    let t = tag("late");
    let ev = |action, addr, ticks| Slot::new(t, action, addr, 8, ticks, false);
    let mut ring = Ring {
        recording: true,
        max_entries: 10,
        start_ticks: 1,
        ..Ring::default()
    };
    let key = |addr| (Tag::key(t), addr);
    // The free of 0x10 comes in one drain, its allocation in the next.
    ring.apply(ev(Action::Free, 0x10, 20), None, false);
    // A free of a block allocated before recording started.
    ring.apply(ev(Action::Free, 0x20, 21), None, false);
    ring.end_drain();
    ring.apply(ev(Action::Alloc, 0x10, 10), None, false);
    ring.end_drain();
    assert!(!ring.live.contains_key(&key(0x10)), "cancelled by its free");
    let times: Vec<u64> = ring.events.iter().map(|e| e.ticks).collect();
    assert_eq!(times, [10, 20, 21], "the late allocation goes in its place");
    // The note about 0x20 is gone: a new allocation there is live.
    ring.apply(ev(Action::Alloc, 0x20, 5), None, false);
    assert!(ring.live.contains_key(&key(0x20)));
    // An older free of an address allocated again since is ignored.
    ring.apply(ev(Action::Alloc, 0x30, 40), None, false);
    ring.apply(ev(Action::Free, 0x30, 30), None, false);
    assert!(ring.live.contains_key(&key(0x30)));
    // Events from before the start are not part of the recording.
    let n = ring.recorded;
    ring.apply(ev(Action::Alloc, 0x40, 0), None, false);
    assert_eq!(ring.recorded, n);
    assert!(!ring.live.contains_key(&key(0x40)));
}

#[test]
fn the_ring_keeps_the_newest_events_of_all_buffers() {
    let _s = serial();
    quiet_start(60);
    let t = tag("bound");
    // Three threads record 50 events each, one after the other, and stay
    // alive (their buffers undrained) until the ring is read.
    let turn = [Barrier::new(2), Barrier::new(2), Barrier::new(2)];
    let read = Barrier::new(4);
    let got = std::thread::scope(|s| {
        for th in 0..3usize {
            let (turn, read) = (&turn, &read);
            s.spawn(move || {
                if th > 0 {
                    turn[th - 1].wait();
                }
                for i in 0..50usize {
                    alloc(t, (th << 12) | (i << 4), 16);
                }
                if th < 2 {
                    turn[th].wait();
                }
                read.wait();
                read.wait();
            });
        }
        read.wait();
        let got = mine(t);
        read.wait();
        got
    });
    let want: Vec<(Action, usize)> = (40..50usize)
        .map(|i| (1 << 12) | (i << 4))
        .chain((0..50usize).map(|i| (2 << 12) | (i << 4)))
        .map(|a| (Action::Alloc, a))
        .collect();
    assert_eq!(got, want);
    let guard = lock();
    let ring = guard.as_ref().unwrap();
    assert_eq!(ring.recorded, 150);
    assert_eq!(ring.events.len(), 60);
    // Dropped allocations stay live.
    drop(guard);
    assert_eq!(live(t).len(), 150);
    stop();
}

#[test]
fn thread_exit_drains_its_buffer_and_frees_it() {
    let _s = serial();
    quiet_start(1000);
    let t = tag("exit");
    std::thread::spawn(move || {
        for i in 1..=10usize {
            alloc(t, i << 4, 16);
        }
    })
    .join()
    .unwrap();
    // Read without draining: the exit put them in the ring.
    let n = lock()
        .as_ref()
        .unwrap()
        .events
        .iter()
        .filter(|e| std::ptr::eq(e.tag(), t))
        .count();
    assert_eq!(n, 10);
    let (all, free) = buffer::count();
    assert!(free >= 1);
    // Threads that come later take freed buffers instead of new ones.
    for _ in 0..3 {
        std::thread::spawn(move || alloc(t, 0x1000, 16))
            .join()
            .unwrap();
    }
    assert_eq!(buffer::count().0, all);
    stop();
}

#[test]
fn stopping_forgets_and_restarting_starts_empty() {
    let _s = serial();
    quiet_start(1000);
    let t = tag("restart");
    alloc(t, 0x10, 16);
    alloc(t, 0x20, 16);
    stop();
    // Recorded while stopped (a thread racing with stop): not kept.
    alloc(t, 0x30, 16);
    quiet_start(1000);
    assert_eq!(mine(t), []);
    assert_eq!(live(t), Vec::<usize>::new());
    free(t, 0x10, 16);
    alloc(t, 0x40, 16);
    assert_eq!(mine(t), [(Action::Free, 0x10), (Action::Alloc, 0x40)]);
    assert_eq!(live(t), [0x40]);
    // Changing the options while recording keeps the newest events that
    // fit.
    start_with(1, false, false).unwrap();
    assert_eq!(mine(t), [(Action::Alloc, 0x40)]);
    assert_eq!(events().len(), 1);
    assert!(is_recording());
    stop();
    assert!(!is_recording());
}

#[test]
fn stacks_are_kept_beside_and_dropped_with_their_events() {
    let _s = serial();
    quiet_start(3);
    start_with(3, true, false).unwrap();
    let t = tag("stacks");
    for i in 1..=5usize {
        alloc(t, i << 4, 16);
    }
    free(t, 5 << 4, 16);
    let ours = events();
    let ours: Vec<_> = ours.iter().filter(|e| std::ptr::eq(e.tag, t)).collect();
    assert_eq!(ours.len(), 3);
    for e in &ours {
        // Allocations carry their stack, frees none.
        assert_eq!(e.stack.is_some(), e.action == Action::Alloc, "{e:?}");
    }
    let guard = lock();
    let ring = guard.as_ref().unwrap();
    let with = ring.events.iter().filter(|s| s.has_stack()).count();
    assert_eq!(ring.stacks.len(), with, "no stack outlives its event");
    // The live blocks keep their stacks after the events are dropped.
    assert!(ring
        .live
        .values()
        .filter(|b| std::ptr::eq(b.tag, t))
        .all(|b| b.stack.is_some()));
    drop(guard);
    stop();
}
