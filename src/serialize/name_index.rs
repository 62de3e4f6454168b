//! `NameIndex`: name -> position, the map beside each ordered list of a
//! [`TensorDict`](super::TensorDict) (tensor names, metadata keys), so
//! that a lookup costs one hash and about one key comparison however many
//! names there are (a linear search made loading a file with 80,000
//! metadata keys take 74 s).
//!
//! Tests count the key comparisons ([`comparisons`]) to check that the
//! work of loading grows linearly with the number of keys.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// An owned name in the map.
#[derive(Debug, Clone)]
struct Key(Box<str>);

/// A borrowed name: the map's lookup type, so that a lookup by `&str`
/// neither allocates nor bypasses the counted comparison.
#[repr(transparent)]
#[derive(Debug)]
struct KeyRef(str);

impl KeyRef {
    fn new(s: &str) -> &KeyRef {
        // SAFETY: KeyRef is a repr(transparent) wrapper of str, so both
        // have the same layout and pointer metadata; the lifetime is kept.
        unsafe { &*(s as *const str as *const KeyRef) }
    }
}

impl PartialEq for KeyRef {
    fn eq(&self, other: &KeyRef) -> bool {
        count_comparison();
        self.0 == other.0
    }
}

impl Eq for KeyRef {}

impl Hash for KeyRef {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state)
    }
}

impl Borrow<KeyRef> for Key {
    fn borrow(&self) -> &KeyRef {
        KeyRef::new(&self.0)
    }
}

impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        <Key as Borrow<KeyRef>>::borrow(self) == other.borrow()
    }
}

impl Eq for Key {}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        <Key as Borrow<KeyRef>>::borrow(self).hash(state)
    }
}

/// Name -> position in an ordered list.
#[derive(Debug, Clone, Default)]
pub(crate) struct NameIndex {
    map: HashMap<Key, usize>,
}

impl NameIndex {
    /// The position of `name`.
    pub fn get(&self, name: &str) -> Option<usize> {
        self.map.get(KeyRef::new(name)).copied()
    }

    /// Records `name` at position `i` (a name not yet present).
    pub fn insert(&mut self, name: &str, i: usize) {
        self.map.insert(Key(name.into()), i);
    }

    /// The position of `name`, or None after recording it at `i`: one
    /// hash of the name either way.
    pub fn get_or_insert(&mut self, name: &str, i: usize) -> Option<usize> {
        use std::collections::hash_map::Entry;
        match self.map.entry(Key(name.into())) {
            Entry::Occupied(e) => Some(*e.get()),
            Entry::Vacant(e) => {
                e.insert(i);
                None
            }
        }
    }
}

#[cfg(test)]
thread_local! {
    static COMPARISONS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

#[inline]
fn count_comparison() {
    #[cfg(test)]
    COMPARISONS.with(|c| c.set(c.get() + 1));
}

/// Key comparisons made by this thread's name lookups so far (tests).
#[cfg(test)]
pub(crate) fn comparisons() -> u64 {
    COMPARISONS.with(|c| c.get())
}
