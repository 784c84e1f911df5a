//! The detectors' per-flow state, by `flow_id` (already a 64-bit hash of the 5-tuple, see
//! `frame.rs`): open addressing with linear probing over a power-of-two array kept at most
//! half full, so a flow is almost always in the first slot probed. The detector prefetches
//! that slot a few reports ahead ([`FlowTable::prefetch`]); the lookup in a `HashMap` of
//! 10,000 flows missed the cache on most reports (half the detectors' time).

/// Per-flow values `V` by 64-bit flow id.
#[derive(Debug)]
pub(crate) struct FlowTable<V> {
    slots: Vec<Option<(u64, V)>>,
    len: usize,
}

impl<V> Default for FlowTable<V> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            len: 0,
        }
    }
}

impl<V: Default> FlowTable<V> {
    const MIN_SLOTS: usize = 1024;

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Starts loading `id`'s first slot into cache; no effect on correctness.
    #[inline]
    pub(crate) fn prefetch(&self, id: u64) {
        if self.slots.is_empty() {
            return;
        }
        kplane_runtime::hint::prefetch(&self.slots[self.home(id)]);
    }

    #[inline]
    fn home(&self, id: u64) -> usize {
        // The low bits of an avalanched hash.
        id as usize & (self.slots.len() - 1)
    }

    /// `id`'s value, a default one inserted if it had none.
    #[inline]
    pub(crate) fn get_or_default(&mut self, id: u64) -> &mut V {
        if (self.len + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(id);
        loop {
            match &self.slots[i] {
                Some((k, _)) if *k == id => break,
                Some(_) => i = (i + 1) & mask,
                None => {
                    self.slots[i] = Some((id, V::default()));
                    self.len += 1;
                    break;
                }
            }
        }
        match &mut self.slots[i] {
            Some((_, v)) => v,
            None => unreachable!("slot {i} was just found or filled"),
        }
    }

    /// Keeps only the flows `keep` says yes to. Rebuilds the table (linear probing cannot
    /// simply empty a slot); the detectors sweep a few times per idle timeout.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(u64, &V) -> bool) {
        let kept: Vec<(u64, V)> = std::mem::take(&mut self.slots)
            .into_iter()
            .flatten()
            .filter(|(k, v)| keep(*k, v))
            .collect();
        self.len = 0;
        self.slots = Self::empty_slots((kept.len() * 2).next_power_of_two());
        for (k, v) in kept {
            self.insert_new(k, v);
        }
    }

    fn grow(&mut self) {
        let doubled = Self::empty_slots(self.slots.len() * 2);
        let old = std::mem::replace(&mut self.slots, doubled);
        self.len = 0;
        for (k, v) in old.into_iter().flatten() {
            self.insert_new(k, v);
        }
    }

    fn empty_slots(n: usize) -> Vec<Option<(u64, V)>> {
        std::iter::repeat_with(|| None)
            .take(n.max(Self::MIN_SLOTS))
            .collect()
    }

    /// Inserts a key known to be absent.
    fn insert_new(&mut self, id: u64, v: V) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(id);
        while self.slots[i].is_some() {
            i = (i + 1) & mask;
        }
        self.slots[i] = Some((id, v));
        self.len += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_inserts_grows_and_retains() {
        let mut t = FlowTable::<u32>::default();
        // Ids sharing their low bits collide in one home slot and probe on.
        let ids: Vec<u64> = (0..5000u64)
            .map(|i| {
                if i % 2 == 0 {
                    i << 20
                } else {
                    i.wrapping_mul(0x9e37_79b9_7f4a_7c15)
                }
            })
            .collect();
        for (n, &id) in ids.iter().enumerate() {
            t.prefetch(id);
            *t.get_or_default(id) += n as u32 + 1;
        }
        assert_eq!(t.len(), ids.len());
        for (n, &id) in ids.iter().enumerate() {
            assert_eq!(*t.get_or_default(id), n as u32 + 1, "{id:#x}");
        }
        assert_eq!(t.len(), ids.len());
        t.retain(|_, &v| v % 2 == 0);
        assert_eq!(t.len(), ids.len() / 2);
        for (n, &id) in ids.iter().enumerate() {
            let v = *t.get_or_default(id);
            // Removed flows come back with the default value.
            assert_eq!(v, if (n + 1) % 2 == 0 { n as u32 + 1 } else { 0 });
        }
        t.retain(|_, _| false);
        assert_eq!(t.len(), 0);
    }
}
