//! Per-switch state by node id: an array indexed by the small, dense ids fabrics give their
//! switches, a hash table for ids from [`ByNode::DIRECT`] up. Used by the threshold
//! detector's switch keys and by loss accounting's sequence streams.

use kplane_model::FlowHashKey;
use kplane_model::id_table::{Evictions, IdTable, Limits};

/// Per-node values: switches with ids below [`ByNode::DIRECT`] in an array (at most that
/// many, so bounded by construction, kept while the process runs), the rest in a bounded
/// [`IdTable`] (idle timeout and cap, `[collector.state] nodes`).
#[derive(Debug)]
pub struct ByNode<T> {
    /// Indexed by node id; grown to the largest id seen below `DIRECT`, never past it.
    direct: Vec<T>,
    other: IdTable<T>,
    /// Keys the table's ids: node ids come from the wire, so a sender must not be able to
    /// crowd one probe run.
    key: FlowHashKey,
}

impl<T: Default> ByNode<T> {
    /// Node ids below this are array indices.
    pub const DIRECT: u32 = 4096;

    pub fn new(limits: Limits) -> Self {
        Self {
            direct: Vec::new(),
            other: IdTable::new(limits),
            key: FlowHashKey::random(),
        }
    }

    #[inline]
    fn id(&self, node: u32) -> u64 {
        self.key.hash_words(&[u64::from(node)])
    }

    /// The node's value, if it has one (stamped seen at `now_s`); an idle one goes to
    /// `evicted`.
    #[inline(always)]
    pub fn get_mut(&mut self, node: u32, now_s: u32, evicted: impl FnMut(T)) -> Option<&mut T> {
        // `direct` never grows past `DIRECT`, so an index inside it is a direct node.
        if (node as usize) < self.direct.len() {
            return Some(&mut self.direct[node as usize]);
        }
        if node < Self::DIRECT {
            return None;
        }
        let id = self.id(node);
        self.other.get_mut(id, now_s, evicted)
    }

    /// [`ByNode::get_mut`], shared (a live node is still stamped seen).
    #[inline(always)]
    pub fn get(&self, node: u32, now_s: u32) -> Option<&T> {
        match self.direct.get(node as usize) {
            Some(v) => Some(v),
            None if node < Self::DIRECT => None,
            None => self.other.get(self.id(node), now_s),
        }
    }

    /// The node's value, created (default) on first use; values evicted on the way go to
    /// `evicted`.
    #[inline(always)]
    pub fn get_or_default(&mut self, node: u32, now_s: u32, evicted: impl FnMut(T)) -> &mut T {
        if (node as usize) < self.direct.len() {
            return &mut self.direct[node as usize];
        }
        self.insert_default(node, now_s, evicted)
    }

    #[cold]
    #[inline(never)]
    fn insert_default(&mut self, node: u32, now_s: u32, evicted: impl FnMut(T)) -> &mut T {
        if node < Self::DIRECT {
            let i = node as usize;
            self.direct.resize_with(i + 1, T::default);
            &mut self.direct[i]
        } else {
            let id = self.id(node);
            self.other
                .get_or_insert_with(id, now_s, T::default, evicted)
                .0
        }
    }

    /// Every value (array slots of nodes never seen hold defaults).
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.direct.iter_mut().chain(self.other.values_mut())
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.direct.iter().chain(self.other.iter().map(|(_, v)| v))
    }

    /// Nodes held in the bounded table (ids from `DIRECT` up).
    pub fn other_len(&self) -> usize {
        self.other.len()
    }

    pub fn evictions(&self) -> Evictions {
        self.other.evictions()
    }

    /// Bytes of the array and the table themselves (not what the values point to).
    pub fn table_bytes(&self) -> usize {
        self.direct.capacity() * std::mem::size_of::<T>() + self.other.slot_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ids_are_indexed_large_ones_hashed() {
        let mut m = ByNode::<u32>::new(Limits {
            idle: std::time::Duration::from_secs(60),
            max: 2,
        });
        assert!(m.get_mut(3, 0, drop).is_none());
        *m.get_or_default(3, 0, drop) += 1;
        *m.get_or_default(70_000, 0, drop) += 2;
        *m.get_or_default(3, 0, drop) += 1;
        assert_eq!(m.get_mut(3, 0, drop).copied(), Some(2));
        assert_eq!(m.get_mut(70_000, 0, drop).copied(), Some(2));
        assert_eq!(
            m.get_mut(2, 0, drop).copied(),
            Some(0),
            "below the largest id: a default slot"
        );
        assert!(m.get_mut(100, 0, drop).is_none());
        assert!(m.get_mut(70_001, 0, drop).is_none());
        let mut seen: Vec<u32> = m.values().copied().filter(|&v| v != 0).collect();
        seen.sort();
        assert_eq!(seen, vec![2, 2]);
        // Large ids are bounded: idle ones go, and at the cap the least recent.
        assert_eq!(m.get(70_000, 61), None);
        let mut gone = Vec::new();
        *m.get_or_default(80_000, 10, |v| gone.push(v)) = 8;
        *m.get_or_default(90_000, 11, |v| gone.push(v)) = 9;
        assert_eq!(gone, vec![2], "70 000 was the least recently seen");
        assert_eq!(m.other_len(), 2);
        assert_eq!(m.evictions().capacity, 1);
        assert_eq!(m.get(3, 1_000_000).copied(), Some(2), "small ids stay");
    }
}
