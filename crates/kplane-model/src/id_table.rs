//! Bounded per-key state by a 64-bit id that is already a uniform hash (a keyed flow hash).
//!
//! Open addressing with linear probing over a power-of-two array kept at most half full, so
//! a key is almost always in the first slot probed — one cache line, which callers load
//! ahead of the lookup ([`IdTable::prefetch`]).
//!
//! Every entry remembers the second it was last seen — any lookup that finds it live counts,
//! the read-only [`IdTable::get`] too (the stamp is a `Cell`, so a read-only first look needs
//! no second probe to mark the entry seen) — and the table has [`Limits`]:
//! * **idle**: an entry not seen for more than `idle_s` seconds is gone — lookups no longer
//!   find it (it is removed and counted the moment one tries), and a sweep that advances a
//!   few slots on every insert frees the ones nobody asks for;
//! * **capacity**: at `max` entries an insert first evicts the least recently seen of the
//!   next [`IdTable::SAMPLE`] entries from the sweep's position (an approximation of LRU at
//!   a bounded cost per insert).
//!
//! A removal shifts the rest of its probe run back, so there are no tombstones. State
//! evicted and then seen again starts afresh, like a key never seen. Methods that may evict
//! hand the evicted values to the caller's `evicted` closure (to keep its own counts).

use std::cell::Cell;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// When entries go: idle for more than `idle`, or the table holds `max` and a new key
/// comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Limits {
    #[serde(with = "humantime_serde")]
    pub idle: Duration,
    pub max: usize,
}

impl Limits {
    /// A configuration problem with these limits, if any (for `Validate`): `max` of at least
    /// one entry, `idle` of at least a second (the table's clock counts whole seconds).
    pub fn problem(&self) -> Option<&'static str> {
        (self.max < 1 || self.idle < Duration::from_secs(1))
            .then_some("max must be >= 1 and idle at least 1s")
    }

    fn idle_s(&self) -> u32 {
        u32::try_from(self.idle.as_secs()).unwrap_or(u32::MAX)
    }
}

/// Entries evicted, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Evictions {
    /// Not seen for longer than `idle`.
    pub idle: u64,
    /// Least recently seen when a new key came to a full table.
    pub capacity: u64,
}

impl Evictions {
    /// (reason, count) pairs, for metric labels.
    pub fn by_reason(&self) -> [(&'static str, u64); 2] {
        [("idle", self.idle), ("capacity", self.capacity)]
    }
}

#[derive(Debug)]
struct Entry<V> {
    id: u64,
    seen_s: Cell<u32>,
    value: V,
}

impl<V> Entry<V> {
    #[inline]
    fn seen(&self) -> u32 {
        self.seen_s.get()
    }

    #[inline]
    fn stamp(&self, now_s: u32) {
        self.seen_s.set(self.seen_s.get().max(now_s));
    }
}

/// Values `V` by 64-bit id, bounded by [`Limits`].
#[derive(Debug)]
pub struct IdTable<V> {
    slots: Vec<Option<Entry<V>>>,
    len: usize,
    /// Where the sweep (and the capacity eviction's sample) continues.
    hand: usize,
    limits: Limits,
    idle_s: u32,
    evicted: Evictions,
}

impl<V> IdTable<V> {
    const MIN_SLOTS: usize = 1024;
    /// Entries the capacity eviction compares.
    pub const SAMPLE: usize = 16;
    /// Slots the sweep advances on each insert: the table is at most half full, so a table
    /// of n entries is swept at least once per n/4 inserts.
    const SWEEP_STEP: usize = 8;

    pub fn new(limits: Limits) -> Self {
        Self {
            slots: Vec::new(),
            len: 0,
            hand: 0,
            idle_s: limits.idle_s(),
            limits,
            evicted: Evictions::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Evictions since the table was made.
    pub fn evictions(&self) -> Evictions {
        self.evicted
    }

    /// Bytes of the slot array (values' own heap allocations aside).
    pub fn slot_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Option<Entry<V>>>()
    }

    /// Every (id, value).
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> {
        self.slots.iter().flatten().map(|e| (e.id, &e.value))
    }

    /// Removes `id`'s entry, live or idle (not counted: the caller chose to forget it).
    pub fn remove(&mut self, id: u64) -> Option<V> {
        let i = self.find(id)?;
        Some(self.remove_at(i))
    }

    /// Removes every entry (not counted as evictions: the caller chose to forget).
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = None);
        self.len = 0;
    }

    /// Every (id, second last seen, value): what a snapshot saves.
    pub fn entries(&self) -> impl Iterator<Item = (u64, u32, &V)> {
        self.slots
            .iter()
            .flatten()
            .map(|e| (e.id, e.seen(), &e.value))
    }

    /// Puts back an entry of [`IdTable::entries`] (its id absent), seen at `seen_s`.
    pub fn restore(&mut self, id: u64, seen_s: u32, value: V) {
        self.get_or_insert_with(id, seen_s, || value, drop);
    }

    /// Every value, mutable (stamps and limits unchanged).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.slots.iter_mut().flatten().map(|e| &mut e.value)
    }

    /// Starts loading `id`'s first slot into cache; no effect on correctness.
    #[inline]
    pub fn prefetch(&self, id: u64) {
        if !self.slots.is_empty() {
            crate::hint::prefetch(&self.slots[self.home(id)]);
        }
    }

    #[inline]
    fn home(&self, id: u64) -> usize {
        id as usize & (self.slots.len() - 1)
    }

    #[inline]
    fn idle(&self, e: &Entry<V>, now_s: u32) -> bool {
        now_s.saturating_sub(e.seen()) > self.idle_s
    }

    /// The slot holding `id`, live or idle.
    #[inline]
    fn find(&self, id: u64) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(id);
        loop {
            match &self.slots[i] {
                Some(e) if e.id == id => return Some(i),
                Some(_) => i = (i + 1) & mask,
                None => return None,
            }
        }
    }

    /// `id`'s value if it is live at `now_s`, stamped seen (an idle one is left for the next
    /// [`IdTable::get_mut`] or sweep to remove).
    #[inline]
    pub fn get(&self, id: u64, now_s: u32) -> Option<&V> {
        let e = self.slots[self.find(id)?].as_ref()?;
        if self.idle(e, now_s) {
            return None;
        }
        e.stamp(now_s);
        Some(&e.value)
    }

    /// `id`'s value, stamped seen at `now_s`; an idle entry is removed (counted, passed to
    /// `evicted`) and `None` returned, so the caller starts afresh.
    #[inline]
    pub fn get_mut(&mut self, id: u64, now_s: u32, evicted: impl FnMut(V)) -> Option<&mut V> {
        let i = self.live(id, now_s, evicted)?;
        self.slots[i].as_mut().map(|e| &mut e.value)
    }

    /// `id`'s value (stamped seen) and whether it was inserted just now from `new`; entries
    /// evicted on the way go to `evicted`.
    #[inline]
    pub fn get_or_insert_with(
        &mut self,
        id: u64,
        now_s: u32,
        new: impl FnOnce() -> V,
        mut evicted: impl FnMut(V),
    ) -> (&mut V, bool) {
        let (i, inserted) = match self.live(id, now_s, &mut evicted) {
            Some(i) => (i, false),
            None => (self.insert(id, now_s, new(), evicted), true),
        };
        match &mut self.slots[i] {
            Some(e) => (&mut e.value, inserted),
            None => unreachable!("slot {i} was just found or filled"),
        }
    }

    /// The slot of live `id`, stamped; an idle one is removed.
    #[inline]
    fn live(&mut self, id: u64, now_s: u32, mut evicted: impl FnMut(V)) -> Option<usize> {
        let i = self.find(id)?;
        let e = self.slots[i].as_mut()?;
        if now_s.saturating_sub(e.seen()) > self.idle_s {
            evicted(self.remove_at(i));
            self.evicted.idle += 1;
            return None;
        }
        e.stamp(now_s);
        Some(i)
    }

    /// Inserts an absent `id`; returns its slot.
    #[cold]
    #[inline(never)]
    fn insert(&mut self, id: u64, now_s: u32, value: V, mut evicted: impl FnMut(V)) -> usize {
        self.sweep(now_s, Self::SWEEP_STEP, &mut evicted);
        if self.len >= self.limits.max.max(1) {
            self.evict_least_recent(evicted);
        }
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        self.len += 1;
        self.place(Entry {
            id,
            seen_s: Cell::new(now_s),
            value,
        })
    }

    /// Puts an entry whose id is absent into the first empty slot of its run.
    fn place(&mut self, e: Entry<V>) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = self.home(e.id);
        while self.slots[i].is_some() {
            i = (i + 1) & mask;
        }
        self.slots[i] = Some(e);
        i
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(Self::MIN_SLOTS);
        let old = std::mem::take(&mut self.slots);
        self.slots.resize_with(size, || None);
        self.hand = 0;
        for e in old.into_iter().flatten() {
            self.place(e);
        }
    }

    /// Frees idle entries among the next `steps` slots from the hand.
    fn sweep(&mut self, now_s: u32, steps: usize, mut evicted: impl FnMut(V)) {
        if self.slots.is_empty() {
            return;
        }
        let mask = self.slots.len() - 1;
        for _ in 0..steps {
            let i = self.hand;
            match &self.slots[i] {
                Some(e) if self.idle(e, now_s) => {
                    // The run shifts back into `i`: look at it again next step.
                    evicted(self.remove_at(i));
                    self.evicted.idle += 1;
                }
                _ => self.hand = (i + 1) & mask,
            }
        }
    }

    /// Evicts the least recently seen of the next [`Self::SAMPLE`] entries from the hand and
    /// moves the hand past them.
    fn evict_least_recent(&mut self, mut evicted: impl FnMut(V)) {
        let mask = self.slots.len() - 1;
        let mut oldest: Option<(u32, usize)> = None;
        let (mut seen, mut i) = (0, self.hand);
        for _ in 0..self.slots.len() {
            if let Some(e) = &self.slots[i] {
                if oldest.is_none_or(|(s, _)| e.seen() < s) {
                    oldest = Some((e.seen(), i));
                }
                seen += 1;
                if seen == Self::SAMPLE {
                    break;
                }
            }
            i = (i + 1) & mask;
        }
        if let Some((_, victim)) = oldest {
            self.hand = (i + 1) & mask;
            evicted(self.remove_at(victim));
            self.evicted.capacity += 1;
        }
    }

    /// Empties slot `hole` and shifts the rest of its probe run back so every entry stays
    /// reachable from its home slot; returns the value.
    fn remove_at(&mut self, mut hole: usize) -> V {
        let mask = self.slots.len() - 1;
        let Some(removed) = self.slots[hole].take() else {
            unreachable!("removing empty slot {hole}")
        };
        self.len -= 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let home = match &self.slots[j] {
                None => return removed.value,
                Some(e) => self.home(e.id),
            };
            // The entry at `j` stays unless its home lies cyclically outside (hole, j].
            let stays = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !stays {
                self.slots[hole] = self.slots[j].take();
                hole = j;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(idle_s: u64, max: usize) -> Limits {
        Limits {
            idle: Duration::from_secs(idle_s),
            max,
        }
    }

    /// Ids that share home slots, to exercise probe runs and their repair.
    fn crowded(n: u64) -> impl Iterator<Item = u64> {
        (0..n).map(|i| (i % 7) | (i << 32))
    }

    #[test]
    fn finds_what_it_holds_through_removals_in_long_runs() {
        let mut t = IdTable::new(limits(1000, 10_000));
        for id in crowded(600) {
            let (v, inserted) = t.get_or_insert_with(id, 0, || id, drop);
            assert!(inserted);
            assert_eq!(*v, id);
        }
        // Remove every third through idleness: stamp the rest at a later second.
        for id in crowded(600).filter(|i| (i >> 32) % 3 != 0) {
            t.get(id, 900);
        }
        for id in crowded(600) {
            let live = t.get_mut(id, 1500, drop).is_some();
            assert_eq!(live, (id >> 32) % 3 != 0, "id {id:#x}");
        }
        assert_eq!(t.len(), 400);
        assert_eq!(t.evictions().idle, 200);
        assert_eq!(t.iter().count(), 400);
    }

    #[test]
    fn an_idle_entry_is_new_again_and_a_live_one_is_not() {
        let mut t = IdTable::new(limits(10, 100));
        *t.get_or_insert_with(7, 100, || 0, drop).0 = 5;
        assert_eq!(t.get(7, 110), Some(&5), "10 s is not more than idle");
        assert_eq!(t.get_mut(7, 110, drop).copied(), Some(5));
        assert_eq!(t.get(7, 121), None, "read-only look: idle");
        let (v, inserted) = t.get_or_insert_with(7, 121, || 0, drop);
        assert!(inserted);
        assert_eq!(*v, 0);
        assert_eq!(
            t.evictions(),
            Evictions {
                idle: 1,
                capacity: 0
            }
        );
    }

    #[test]
    fn a_full_table_evicts_the_least_recently_seen() {
        let max = 1000;
        let mut t = IdTable::new(limits(3600, max));
        let id = |i: u64| i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for i in 0..max as u64 {
            t.get_or_insert_with(id(i), 0, || i, drop);
        }
        // The first half is seen again later: the rest are the older ones.
        for i in 0..max as u64 / 2 {
            t.get(id(i), 10);
        }
        let mut gone = Vec::new();
        for i in max as u64..max as u64 + 100 {
            t.get_or_insert_with(id(i), 20, || i, |v| gone.push(v));
        }
        assert!(gone.iter().all(|&v| v >= max as u64 / 2), "{gone:?}");
        assert_eq!(t.len(), max);
        assert_eq!(t.evictions().capacity, 100);
        let kept_recent = (0..max as u64 / 2)
            .filter(|&i| t.get(id(i), 20).is_some())
            .count();
        assert_eq!(
            kept_recent,
            max / 2,
            "recently seen entries are never the oldest"
        );
        assert!(t.slot_bytes() <= 2048 * std::mem::size_of::<Option<Entry<u64>>>());
    }

    #[test]
    fn inserts_sweep_idle_entries_nobody_asks_for() {
        let mut t = IdTable::new(limits(5, 1_000_000));
        for i in 0..400u64 {
            t.get_or_insert_with(i.wrapping_mul(0x9E37_79B9_7F4A_7C15), 0, || (), drop);
        }
        let mut gone = 0;
        for i in 0..2000u64 {
            t.get_or_insert_with(i | 1 << 40, 100, || (), |()| gone += 1);
        }
        assert_eq!(t.evictions().idle, 400, "all of the old ones were swept");
        assert_eq!(gone, 400);
        assert_eq!(t.len(), 2000);
    }
}
