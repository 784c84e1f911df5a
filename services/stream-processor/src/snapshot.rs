//! A little-endian byte encoding for a lane's saved state (detectors, previous paths): written once per commit, so
//! compact and allocation-light rather than self-describing (a version byte guards it).

/// Appends fixed-width little-endian values.
#[derive(Debug, Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn i64(&mut self, v: i64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// Length-prefixed (u32) bytes.
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
    }
    /// A length-prefixed (u16) list of u32, cut at 65,535 (paths are at most 255 hops).
    pub(crate) fn u32s(&mut self, v: &[u32]) {
        let v = &v[..v.len().min(usize::from(u16::MAX))];
        self.u16(v.len() as u16);
        v.iter().for_each(|&x| self.u32(x));
    }
}

/// Reads what [`Writer`] wrote; running short is an error naming what was being read.
#[derive(Debug)]
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    fn take<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or_else(|| format!("detector state ends inside {what}"))?;
        self.0 = rest;
        Ok(*head)
    }
    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take::<1>(what)?[0])
    }
    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, String> {
        Ok(u16::from_le_bytes(self.take(what)?))
    }
    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(what)?))
    }
    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(what)?))
    }
    pub(crate) fn i64(&mut self, what: &str) -> Result<i64, String> {
        Ok(i64::from_le_bytes(self.take(what)?))
    }
    pub(crate) fn bytes(&mut self, what: &str) -> Result<&'a [u8], String> {
        let n = self.u32(what)? as usize;
        if self.0.len() < n {
            return Err(format!("detector state ends inside {what}"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    pub(crate) fn u32s(&mut self, what: &str) -> Result<Vec<u32>, String> {
        let n = self.u16(what)?;
        (0..n).map(|_| self.u32(what)).collect()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_and_a_short_read_says_where() {
        let mut w = Writer::default();
        w.u8(7);
        w.u16(300);
        w.u32(70_000);
        w.u64(u64::MAX - 1);
        w.i64(-5);
        w.u32s(&[1, 2, 3]);
        w.bytes(b"ab");
        let mut r = Reader(&w.0);
        assert_eq!(r.u8("a").unwrap(), 7);
        assert_eq!(r.u16("b").unwrap(), 300);
        assert_eq!(r.u32("c").unwrap(), 70_000);
        assert_eq!(r.u64("d").unwrap(), u64::MAX - 1);
        assert_eq!(r.i64("e").unwrap(), -5);
        assert_eq!(r.u32s("f").unwrap(), vec![1, 2, 3]);
        assert_eq!(r.bytes("g").unwrap(), b"ab");
        assert!(r.is_empty());
        assert_eq!(
            r.u32("a path").unwrap_err(),
            "detector state ends inside a path"
        );
    }
}
