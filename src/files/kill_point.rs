//! The steps of a save of several files (each rename of
//! [`write_beside`](super::write_beside) and
//! [`replace_dir`](super::replace_dir), each stale file a sharded save
//! removes), where the crate's tests stop a save as a SIGKILL would:
//! after the k-th step, leaving the temporary files behind, so that they
//! can check what every stopping point leaves (the old checkpoint whole,
//! the new one whole, or one a load refuses). Outside the crate's own
//! tests [`reached`] is always false and costs nothing.

#[cfg(test)]
use std::cell::Cell;

#[cfg(test)]
thread_local! {
    /// Steps left before the stop: None runs every save to its end.
    static LEFT: Cell<Option<usize>> = const { Cell::new(None) };
    /// Whether `replace_dir` acts as if renameat2's exchange were
    /// missing (its fallback of two renames).
    static NO_EXCHANGE: Cell<bool> = const { Cell::new(false) };
}

/// Stops this thread's next saves after their `k`-th step in all
/// (None: never).
#[cfg(test)]
pub(crate) fn stop_after(k: Option<usize>) {
    LEFT.with(|l| l.set(k));
}

/// Makes `replace_dir` on this thread take its fallback path.
#[cfg(test)]
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) fn without_exchange(on: bool) {
    NO_EXCHANGE.with(|n| n.set(on));
}

#[cfg(test)]
pub(crate) fn exchange_missing() -> bool {
    NO_EXCHANGE.with(|n| n.get())
}

#[cfg(not(test))]
#[inline(always)]
pub(crate) fn exchange_missing() -> bool {
    false
}

/// Counts a step just taken: true when the save must stop here as if
/// killed (its caller then returns [`killed`] without cleaning up).
#[cfg(test)]
pub(crate) fn reached() -> bool {
    LEFT.with(|l| match l.get() {
        Some(n) if n <= 1 => {
            l.set(None);
            true
        }
        Some(n) => {
            l.set(Some(n - 1));
            false
        }
        None => false,
    })
}

#[cfg(not(test))]
#[inline(always)]
pub(crate) fn reached() -> bool {
    false
}

/// The error a save stopped by [`reached`] returns.
pub(crate) fn killed(at: &str) -> crate::error::Error {
    crate::err!(Io, "the save was stopped (a test's kill point) after {at}")
}
