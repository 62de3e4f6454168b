//! The ring's side of a drain: each event into the live-block table
//! (unless paired with its free, see buffer.rs) and into the ring, in time
//! order, keeping the newest `max_entries`.

use super::{Action, Event, LiveBlock, Ring, Slot, Stack, Tag};

impl Ring {
    /// Applies one drained event (in time order, but for the rare event a
    /// thread published late): the live-block table (unless `paired`: an
    /// allocation and its free drained together, see buffer.rs), then the
    /// ring, in time order.
    pub(crate) fn apply(&mut self, slot: Slot, stack: Option<Stack>, paired: bool) {
        debug_assert_eq!(slot.has_stack(), stack.is_some());
        if slot.ticks < self.start_ticks {
            return;
        }
        let key = (Tag::key(slot.tag()), slot.addr);
        if !paired {
            match slot.action() {
                Action::Alloc => self.live_alloc(key, &slot, &stack),
                Action::Free => self.live_free(key, slot.ticks),
                Action::Oom => {}
            }
        }
        self.recorded += 1;
        let late = self.events.back().is_some_and(|b| b.ticks > slot.ticks);
        if late {
            let at = self.events.partition_point(|e| e.ticks <= slot.ticks);
            if at == 0 && self.events.len() >= self.max_entries {
                // Older than every event the ring keeps.
                return;
            }
            self.events.insert(at, slot);
        } else {
            self.events.push_back(slot);
        }
        if let Some(s) = stack {
            self.stacks.insert(slot.stack_key(), s);
        }
        if self.events.len() > self.max_entries {
            self.pop_oldest();
        }
    }

    /// Appends one thread's run of events (in time order) at once, when it
    /// comes after every event in the ring: the live-block table, then
    /// the ring, copied. Returns false (and does nothing) otherwise.
    /// `stack(i)` takes the stack of `run[i]`.
    pub(crate) fn append_run(
        &mut self,
        run: &[Slot],
        mut stack: impl FnMut(usize) -> Option<Stack>,
    ) -> bool {
        let Some(first) = run.first() else {
            return true;
        };
        if first.ticks < self.start_ticks
            || self.events.back().is_some_and(|b| b.ticks > first.ticks)
        {
            return false;
        }
        for (i, s) in run.iter().enumerate() {
            let stack = if s.has_stack() { stack(i) } else { None };
            // An allocation and its free next to each other: no other
            // event of that block can come between them, so neither
            // touches the live-block table (see buffer.rs).
            let paired = match s.action() {
                Action::Alloc => run
                    .get(i + 1)
                    .is_some_and(|n| n.action() == Action::Free && n.same_block(s)),
                Action::Free => {
                    i > 0 && run[i - 1].action() == Action::Alloc && run[i - 1].same_block(s)
                }
                Action::Oom => false,
            };
            if !paired {
                let key = (Tag::key(s.tag()), s.addr);
                match s.action() {
                    Action::Alloc => self.live_alloc(key, s, &stack),
                    Action::Free => self.live_free(key, s.ticks),
                    Action::Oom => {}
                }
            }
            if let Some(st) = stack {
                self.stacks.insert(s.stack_key(), st);
            }
        }
        self.recorded += run.len() as u64;
        self.events.extend(run.iter().copied());
        let excess = self.events.len().saturating_sub(self.max_entries);
        if excess > 0 {
            if !self.stacks.is_empty() {
                for i in 0..excess {
                    let s = self.events[i];
                    if s.has_stack() {
                        self.stacks.remove(&s.stack_key());
                    }
                }
            }
            self.events.drain(..excess);
        }
        true
    }

    /// Drops the oldest event.
    pub(super) fn pop_oldest(&mut self) {
        if let Some(s) = self.events.pop_front() {
            if s.has_stack() {
                self.stacks.remove(&s.stack_key());
            }
        }
    }

    /// The event `slot` keeps.
    pub(crate) fn event(&self, slot: &Slot) -> Event {
        Event {
            action: slot.action(),
            tag: slot.tag(),
            addr: slot.addr,
            size: slot.size,
            ticks: slot.ticks,
            stack: if slot.has_stack() {
                self.stacks.get(&slot.stack_key()).cloned()
            } else {
                None
            },
        }
    }

    /// The events, oldest first.
    pub(crate) fn event_list(&self) -> Vec<Event> {
        self.events.iter().map(|s| self.event(s)).collect()
    }

    fn live_alloc(&mut self, key: (usize, usize), slot: &Slot, stack: &Option<Stack>) {
        if !self.unmatched.is_empty() {
            if let Some(&(free_ticks, _)) = self.unmatched.get(&key) {
                if free_ticks >= slot.ticks {
                    // Its free was drained first.
                    self.unmatched.remove(&key);
                    return;
                }
            }
        }
        self.live.insert(
            key,
            LiveBlock {
                tag: slot.tag(),
                size: slot.size,
                ticks: slot.ticks,
                stack: stack.clone(),
            },
        );
    }

    fn live_free(&mut self, key: (usize, usize), ticks: u64) {
        match self.live.get(&key) {
            // A later allocation at the address is in already: this free's
            // allocation was drained before it and replaced.
            Some(b) if b.ticks > ticks => {}
            Some(_) => {
                self.live.remove(&key);
            }
            // Allocated before recording started, or its allocation is
            // not drained yet.
            None => {
                self.unmatched.insert(key, (ticks, self.drains));
            }
        }
    }

    /// Ends a drain: forgets the unmatched frees the previous drain met
    /// (this one brought their allocations if there were any).
    pub(crate) fn end_drain(&mut self) {
        if !self.unmatched.is_empty() {
            let now = self.drains;
            self.unmatched.retain(|_, (_, d)| *d == now);
        }
        self.drains += 1;
    }
}
