//! Priority-based flow control (IEEE 802.1Qbb) frames: MAC control frames a receiver sends up a
//! link to stop chosen priorities of its sender for a time, as lossless RoCE fabrics do.
//!
//! Layout after the Ethernet header (destination 01:80:c2:00:00:01, EtherType 0x8808): opcode
//! 0x0101, class-enable vector (bit n of its low byte: priority n), eight pause times (priority
//! 0 first) in quanta of 512 bit times at the link's rate; 0 resumes at once. Padded to the
//! 60-byte minimum frame (the FCS is the NIC's).

use crate::error::{Error, Layer, Result, need};
use crate::ethernet::{EthernetFrame, EthernetRepr, MacAddress, ethertype};
use crate::field::{set_u16, u16_at};

/// The reserved multicast address PFC frames are sent to (never forwarded by bridges).
pub const PFC_DESTINATION: MacAddress = MacAddress([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
/// The MAC control opcode of a PFC frame (a plain 802.3x PAUSE is 0x0001).
pub const OPCODE_PFC: u16 = 0x0101;
/// Priorities a PFC frame addresses.
pub const PRIORITIES: usize = 8;
/// Bit times in one pause quantum.
pub const BITS_PER_QUANTUM: u64 = 512;

const OPCODE: usize = 14;
const CLASS_ENABLE: usize = 16;
const TIMES: usize = 18;
/// Bytes up to the last pause time.
const BODY_END: usize = TIMES + 2 * PRIORITIES;

/// A read/write view of a PFC frame, Ethernet header included.
#[derive(Debug, Clone)]
pub struct PfcFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> PfcFrame<T> {
    /// Bytes of a PFC frame on the wire without the FCS (the Ethernet minimum).
    pub const LEN: usize = 60;

    /// Wraps a buffer without checking it.
    pub fn new_unchecked(buffer: T) -> Self {
        PfcFrame { buffer }
    }

    /// Wraps a buffer after checking that it holds a whole PFC frame: a MAC control EtherType
    /// and the PFC opcode.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let f = Self::new_unchecked(buffer);
        f.check()?;
        Ok(f)
    }

    fn check(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        need(Layer::Pfc, BODY_END, b.len())?;
        if EthernetFrame::new_unchecked(b).ethertype() != ethertype::MAC_CONTROL {
            return Err(Error::NotApplicable {
                layer: Layer::Pfc,
                what: "not a MAC control frame",
            });
        }
        if u16_at(b, OPCODE) != OPCODE_PFC {
            return Err(Error::NotApplicable {
                layer: Layer::Pfc,
                what: "a MAC control frame other than PFC",
            });
        }
        Ok(())
    }

    /// The class-enable vector: bit n set when the frame addresses priority n.
    pub fn class_enable(&self) -> u8 {
        // The high byte is reserved.
        u16_at(self.buffer.as_ref(), CLASS_ENABLE) as u8
    }

    /// The pause time of priority `p` in quanta, if the frame addresses it.
    pub fn quanta(&self, p: usize) -> Option<u16> {
        let enabled = p < PRIORITIES && self.class_enable() & (1 << p) != 0;
        enabled.then(|| u16_at(self.buffer.as_ref(), TIMES + 2 * p))
    }
}

/// What a PFC frame says, with its sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PfcRepr {
    /// The sender's address.
    pub src: MacAddress,
    /// Pause time per priority in quanta; `None` leaves that priority as it is.
    pub quanta: [Option<u16>; PRIORITIES],
}

impl PfcRepr {
    /// Reads a checked view.
    pub fn parse<T: AsRef<[u8]>>(f: &PfcFrame<T>) -> Result<Self> {
        f.check()?;
        Ok(PfcRepr {
            src: EthernetFrame::new_unchecked(f.buffer.as_ref()).src_addr(),
            quanta: core::array::from_fn(|p| f.quanta(p)),
        })
    }

    /// Writes the whole frame, padding included, into the front of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = PfcFrame::<&[u8]>::LEN;
        let Some(b) = buf.get_mut(..len) else {
            return Err(Error::NoRoom {
                need: len,
                capacity: buf.len(),
            });
        };
        b.fill(0);
        let eth = EthernetRepr {
            src: self.src,
            dst: PFC_DESTINATION,
            ethertype: ethertype::MAC_CONTROL,
        };
        eth.emit(&mut EthernetFrame::new_unchecked(&mut *b));
        set_u16(b, OPCODE, OPCODE_PFC);
        let mut enable = 0u16;
        for (p, q) in self.quanta.iter().enumerate() {
            if let Some(q) = q {
                enable |= 1 << p;
                set_u16(b, TIMES + 2 * p, *q);
            }
        }
        set_u16(b, CLASS_ENABLE, enable);
        Ok(len)
    }
}

/// One priority's pause at a PFC receiver: until when it holds, and how long it has held in
/// all. Times in any one unit (the switch keeps ps, a host ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PauseState {
    from: u64,
    until: u64,
    /// Time paused by the pauses before the current one.
    before: u64,
}

impl PauseState {
    /// A frame received at `at` pauses until `until` (`at` for an XON), replacing the pause in
    /// effect.
    pub fn pause(&mut self, at: u64, until: u64) {
        self.before = self.total(at);
        self.from = at;
        self.until = until;
    }

    /// When the current pause ends (in the past when none holds).
    pub fn until(&self) -> u64 {
        self.until
    }

    /// Time paused up to `now`, each pause cut short by the next.
    pub fn total(&self, now: u64) -> u64 {
        self.before + self.until.min(now).saturating_sub(self.from)
    }
}

/// How long `quanta` pause a link of `rate_bps` (ps; 512 bit times each).
pub fn pause_ps(quanta: u16, rate_bps: u64) -> u64 {
    (u128::from(quanta) * u128::from(BITS_PER_QUANTUM) * 1_000_000_000_000 / u128::from(rate_bps.max(1))) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_for_priority_3_is_laid_out_as_the_standard_says() {
        let repr = PfcRepr {
            src: MacAddress([2, 0, 0, 0, 0, 9]),
            quanta: [None, None, None, Some(0xffff), None, None, Some(0), None],
        };
        let mut buf = [0xaa; 64];
        assert_eq!(repr.emit(&mut buf), Ok(60));
        assert_eq!(&buf[0..6], &[0x01, 0x80, 0xc2, 0, 0, 1]);
        assert_eq!(&buf[12..18], &[0x88, 0x08, 0x01, 0x01, 0x00, 0b0100_1000]);
        assert_eq!(&buf[18 + 6..18 + 8], &[0xff, 0xff], "priority 3's time");
        assert!(buf[34..60].iter().all(|&b| b == 0), "padding");
        assert_eq!(buf[60], 0xaa, "nothing written past the frame");
        let view = PfcFrame::new_checked(&buf[..60]).expect("a PFC frame");
        assert_eq!(PfcRepr::parse(&view), Ok(repr));
    }

    #[test]
    fn other_mac_control_frames_and_short_ones_are_not_pfc() {
        let mut buf = [0u8; 60];
        PfcRepr::default().emit(&mut buf).expect("room");
        buf[14] = 0x00; // opcode 0x0001: 802.3x PAUSE
        assert!(matches!(
            PfcFrame::new_checked(&buf[..]),
            Err(Error::NotApplicable { .. })
        ));
        assert!(matches!(
            PfcFrame::new_checked(&buf[..20]),
            Err(Error::Truncated { .. })
        ));
        assert!(matches!(
            PfcRepr::default().emit(&mut [0; 59]),
            Err(Error::NoRoom { need: 60, .. })
        ));
    }

    #[test]
    fn a_quantum_is_512_bit_times() {
        assert_eq!(pause_ps(1, 10_000_000_000), 51_200, "51.2 ns at 10 Gb/s");
        assert_eq!(pause_ps(0xffff, 100_000_000_000), 0xffff * 5_120);
    }
}
