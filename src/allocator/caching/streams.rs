//! Streams in the caching layer (c10's stream-ordered reuse), for inner
//! allocators that have them (CUDA; the others use stream 0 throughout).
//!
//! - Pools are per device *and stream*: an allocation is served from the
//!   pools of the calling thread's current stream, and a freed block goes
//!   back to the pools of the stream it was allocated on. Work queued on
//!   one stream is ordered, so a block freed on its own stream can be
//!   handed out again at once, to that stream only.
//! - `record_stream` marks a handed-out block as used by another stream
//!   too. When such a block is freed, an event is recorded on each of
//!   those streams and the block waits, out of the pools and still counted
//!   active, until every event has completed: the next allocation that
//!   misses the front cache polls them, and `empty_cache`, an
//!   out-of-memory retry and the allocator's destruction wait for them.
//!
//! Events are recorded and polled under the allocator's lock (a driver
//! call of about a microsecond), only for blocks that had other streams
//! recorded; everything else pays one comparison.

use super::block::{BlockId, Pending};
use super::lock::SpinGuard;
use super::pool::State;
use super::Shared;
use crate::allocator::StreamOps;
use crate::device::Device;
use crate::error::Result;

impl State {
    /// Whether a handed-out block was used by other streams.
    #[inline(always)]
    pub(super) fn has_stream_uses(&mut self, b: BlockId) -> bool {
        !self.bs(b).stream_uses.is_empty()
    }

    /// Adds `stream` to the users of handed-out block `b` (nothing if it is
    /// the block's own stream or already recorded).
    pub(super) fn add_stream_use(&mut self, b: BlockId, stream: usize) {
        let slot = self.bs(b).slot;
        if self.slot_stream(slot) == stream {
            return;
        }
        // Its free must record events: never parked in a thread front.
        b.clear_front();
        let uses = &mut self.bs(b).stream_uses;
        if !uses.contains(&stream) {
            uses.push(stream);
        }
    }

    /// Releases the pending blocks whose events have all completed.
    #[cold]
    pub(super) fn process_events(&mut self, ops: &dyn StreamOps) {
        let mut i = 0;
        while i < self.pending.len() {
            let p = &mut self.pending[i];
            let device = p.device;
            // An event that cannot be queried stays: the block is kept out
            // of the pools until a wait (empty_cache) settles it.
            p.events.retain(|&e| {
                let done = ops.query(device, e).unwrap_or(false);
                if done {
                    ops.destroy(device, e);
                }
                !done
            });
            if p.events.is_empty() {
                let p = self.pending.swap_remove(i);
                self.release(p.block);
            } else {
                i += 1;
            }
        }
    }
}

/// Frees a block that other streams used: records an event on each of
/// them and files the block as pending (or, for an orphaned allocator,
/// which no later allocation will poll, waits and releases it now).
/// Returns whether to destroy the state. A block whose event cannot be
/// recorded is never reused: it stays out of the pools (counted active),
/// since its memory may still be in use.
#[cold]
pub(super) fn free_after_uses(
    shared: &Shared,
    st: &mut SpinGuard<'_, State>,
    block: BlockId,
) -> bool {
    let Some(ops) = shared.streams else {
        // Uses are only recorded for allocators with streams.
        st.bs(block).stream_uses.clear();
        st.release(block);
        return st.should_destroy();
    };
    let device = st.bs(block).device;
    let uses = std::mem::take(&mut st.bs(block).stream_uses);
    let mut events = Vec::with_capacity(uses.len());
    for stream in uses {
        match ops.record(device, stream) {
            Ok(e) => events.push(e),
            Err(_) => {
                for e in events {
                    ops.destroy(device, e);
                }
                return false;
            }
        }
    }
    if st.orphaned {
        for e in events {
            let _ = ops.synchronize(device, e);
            ops.destroy(device, e);
        }
        st.release(block);
        return st.should_destroy();
    }
    st.pending.push(Pending {
        block,
        device,
        events,
    });
    false
}

impl Shared {
    /// The calling thread's current stream on `device` (0 without streams).
    #[inline(always)]
    pub(super) fn current_stream(&self, device: Device) -> usize {
        match self.streams {
            None => 0,
            Some(ops) => ops.current(device),
        }
    }

    /// Waits for every pending block's events and releases the blocks
    /// (before the cache is emptied, and before the owner goes). The waits
    /// happen outside the lock.
    pub(super) fn settle_pending(&self) -> Result<()> {
        let Some(ops) = self.streams else {
            return Ok(());
        };
        let pending = std::mem::take(&mut self.lock.lock()?.pending);
        if pending.is_empty() {
            return Ok(());
        }
        let mut settled = Vec::with_capacity(pending.len());
        let mut stuck = Vec::new();
        for p in pending {
            if p.events
                .iter()
                .all(|&e| ops.synchronize(p.device, e).is_ok())
            {
                for &e in &p.events {
                    ops.destroy(p.device, e);
                }
                settled.push(p.block);
            } else {
                stuck.push(p);
            }
        }
        let mut st = self.lock.lock()?;
        for b in settled {
            st.release(b);
        }
        st.pending.extend(stuck);
        Ok(())
    }
}
