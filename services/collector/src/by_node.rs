//! Per-switch state by node id: an array indexed by the small, dense ids fabrics give their
//! switches, a hash table for ids from [`ByNode::DIRECT`] up. Used by the threshold
//! detector's switch keys and by loss accounting's sequence streams.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use crate::detect::MixHasher;

#[derive(Debug)]
pub struct ByNode<T> {
    /// Indexed by node id; grown to the largest id seen below `DIRECT`, never past it.
    direct: Vec<T>,
    other: HashMap<u32, T, BuildHasherDefault<MixHasher>>,
}

impl<T> Default for ByNode<T> {
    fn default() -> Self {
        Self {
            direct: Vec::new(),
            other: HashMap::default(),
        }
    }
}

impl<T: Default> ByNode<T> {
    /// Node ids below this are array indices.
    pub const DIRECT: u32 = 4096;

    /// The node's value, if it has one.
    #[inline(always)]
    pub fn get_mut(&mut self, node: u32) -> Option<&mut T> {
        // `direct` never grows past `DIRECT`, so an index inside it is a direct node.
        match self.direct.get_mut(node as usize) {
            Some(v) => Some(v),
            None if node < Self::DIRECT => None,
            None => self.other.get_mut(&node),
        }
    }

    /// [`ByNode::get_mut`], shared.
    #[inline(always)]
    pub fn get(&self, node: u32) -> Option<&T> {
        match self.direct.get(node as usize) {
            Some(v) => Some(v),
            None if node < Self::DIRECT => None,
            None => self.other.get(&node),
        }
    }

    /// The node's value, created (default) on first use.
    #[inline(always)]
    pub fn get_or_default(&mut self, node: u32) -> &mut T {
        if (node as usize) < self.direct.len() {
            return &mut self.direct[node as usize];
        }
        self.insert_default(node)
    }

    #[cold]
    #[inline(never)]
    fn insert_default(&mut self, node: u32) -> &mut T {
        if node < Self::DIRECT {
            let i = node as usize;
            self.direct.resize_with(i + 1, T::default);
            &mut self.direct[i]
        } else {
            self.other.entry(node).or_default()
        }
    }

    /// Every slot with its node id (array slots of nodes never seen hold defaults).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut T)> {
        let direct = self
            .direct
            .iter_mut()
            .enumerate()
            .map(|(n, v)| (n as u32, v));
        direct.chain(self.other.iter_mut().map(|(&n, v)| (n, v)))
    }

    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.direct.iter().chain(self.other.values())
    }

    /// Bytes of the array and the table themselves (not what the values point to).
    pub fn table_bytes(&self) -> usize {
        self.direct.capacity() * std::mem::size_of::<T>()
            + self.other.capacity() * (std::mem::size_of::<(u32, T)>() + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_ids_are_indexed_large_ones_hashed() {
        let mut m = ByNode::<u32>::default();
        assert!(m.get_mut(3).is_none());
        *m.get_or_default(3) += 1;
        *m.get_or_default(70_000) += 2;
        *m.get_or_default(3) += 1;
        assert_eq!(m.get_mut(3).copied(), Some(2));
        assert_eq!(m.get_mut(70_000).copied(), Some(2));
        assert_eq!(
            m.get_mut(2).copied(),
            Some(0),
            "below the largest id: a default slot"
        );
        assert!(m.get_mut(100).is_none());
        assert!(m.get_mut(70_001).is_none());
        let mut seen: Vec<(u32, u32)> = m.iter_mut().map(|(n, v)| (n, *v)).collect();
        seen.retain(|&(_, v)| v != 0);
        assert_eq!(seen, vec![(3, 2), (70_000, 2)]);
    }
}
