//! Little-endian fields read and written in order, every read bounded.

/// Why bytes were not a command, answer or queue entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// Fewer bytes than the layout needs.
    #[error("{what}: {need} bytes needed, {have} given")]
    Short {
        /// What was being read.
        what: &'static str,
        /// Bytes it needs.
        need: usize,
        /// Bytes there were.
        have: usize,
    },
    /// A field holds a value outside its range.
    #[error("{what}: {value} is out of range")]
    Range {
        /// The field.
        what: &'static str,
        /// Its value.
        value: u64,
    },
    /// A command number nobody implements.
    #[error("command {0:#x} is not one of the NIC's")]
    UnknownCommand(u32),
    /// The declared length disagrees with the bytes written.
    #[error("the header says {declared} bytes, {written} were written")]
    Length {
        /// Bytes the header declares.
        declared: usize,
        /// Bytes there are.
        written: usize,
    },
}

/// Reads fields in order from a byte slice.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    what: &'static str,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader { bytes, at: 0, what }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or(DecodeError::Short {
                what: self.what,
                need: self.at.saturating_add(n),
                have: self.bytes.len(),
            })?;
        let s = &self.bytes[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(self.u32()? as i32)
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut x = [0u8; 8];
        x.copy_from_slice(b);
        Ok(u64::from_le_bytes(x))
    }

    pub(crate) fn bytes<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut x = [0u8; N];
        x.copy_from_slice(self.take(N)?);
        Ok(x)
    }

    pub(crate) fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.take(n).map(|_| ())
    }
}

/// Appends fields in order.
pub(crate) struct Writer<'a> {
    pub(crate) out: &'a mut Vec<u8>,
}

impl Writer<'_> {
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.out.push(v);
        self
    }

    pub(crate) fn u16(&mut self, v: u16) -> &mut Self {
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(crate) fn i32(&mut self, v: i32) -> &mut Self {
        self.u32(v as u32)
    }

    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.out.extend_from_slice(&v.to_le_bytes());
        self
    }

    pub(crate) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.out.extend_from_slice(v);
        self
    }

    pub(crate) fn zeros(&mut self, n: usize) -> &mut Self {
        self.out.resize(self.out.len() + n, 0);
        self
    }
}
