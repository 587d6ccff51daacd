//! The headers between the BTH and the payload, as one set: which of them an opcode carries, in
//! wire order (DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, and a CNP's reserved body).

use super::{
    ATOMIC_ACK_ETH_LEN, Aeth, AethRepr, AtomicAckEth, AtomicEth, AtomicEthRepr, CNP_BODY_LEN, CnpBody, Deth, DethRepr,
    IMMDT_LEN, ImmDt, Opcode, Reth, RethRepr,
};
use crate::{Error, Layer, Result};

/// The extension headers of one packet (each present exactly when its opcode has it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Extensions {
    /// DETH (UD).
    pub deth: Option<DethRepr>,
    /// RETH (WRITE FIRST/ONLY, READ REQUEST).
    pub reth: Option<RethRepr>,
    /// AtomicETH (atomic requests).
    pub atomic: Option<AtomicEthRepr>,
    /// AETH (ACK/NAK, READ RESPONSE FIRST/LAST/ONLY, ATOMIC ACKNOWLEDGE).
    pub aeth: Option<AethRepr>,
    /// AtomicAckETH (ATOMIC ACKNOWLEDGE).
    pub atomic_ack: Option<AtomicAckEth>,
    /// ImmDt (the *_IMM opcodes).
    pub immdt: Option<ImmDt>,
}

impl Extensions {
    /// None at all.
    pub const NONE: Extensions = Extensions {
        deth: None,
        reth: None,
        atomic: None,
        aeth: None,
        atomic_ack: None,
        immdt: None,
    };

    /// A RETH alone.
    pub fn reth(r: RethRepr) -> Extensions {
        Extensions {
            reth: Some(r),
            ..Extensions::NONE
        }
    }

    /// An AETH alone.
    pub fn aeth(a: AethRepr) -> Extensions {
        Extensions {
            aeth: Some(a),
            ..Extensions::NONE
        }
    }

    /// Checks these are the headers `opcode` carries.
    pub fn check(&self, opcode: Opcode) -> Result<()> {
        if opcode.has_deth() != self.deth.is_some()
            || opcode.has_reth() != self.reth.is_some()
            || opcode.has_atomic_eth() != self.atomic.is_some()
            || opcode.has_aeth() != self.aeth.is_some()
            || opcode.has_atomic_ack_eth() != self.atomic_ack.is_some()
            || opcode.has_immdt() != self.immdt.is_some()
        {
            return Err(Error::Malformed {
                layer: Layer::Bth,
                what: "extension headers do not match the opcode",
            });
        }
        Ok(())
    }

    /// Writes them for `opcode`, in wire order, into the front of `b` (which has room for
    /// `opcode.extension_len()` bytes); returns how many bytes.
    pub fn emit(&self, opcode: Opcode, b: &mut [u8]) -> usize {
        let mut at = 0;
        if let Some(d) = &self.deth {
            d.emit(&mut Deth::new_unchecked(&mut b[at..]));
            at += Deth::<&[u8]>::LEN;
        }
        if let Some(r) = &self.reth {
            r.emit(&mut Reth::new_unchecked(&mut b[at..]));
            at += Reth::<&[u8]>::LEN;
        }
        if let Some(a) = &self.atomic {
            a.emit(&mut AtomicEth::new_unchecked(&mut b[at..]));
            at += AtomicEth::<&[u8]>::LEN;
        }
        if let Some(a) = &self.aeth {
            a.emit(&mut Aeth::new_unchecked(&mut b[at..]));
            at += Aeth::<&[u8]>::LEN;
        }
        if let Some(a) = &self.atomic_ack {
            a.emit(&mut b[at..]);
            at += ATOMIC_ACK_ETH_LEN;
        }
        if let Some(i) = &self.immdt {
            i.emit(&mut b[at..]);
            at += IMMDT_LEN;
        }
        if opcode == Opcode::Cnp {
            CnpBody.emit(&mut b[at..]);
            at += CNP_BODY_LEN;
        }
        at
    }

    /// Reads the headers `opcode` carries from the front of `b`: them, and how many bytes
    /// they took.
    pub fn parse(opcode: Opcode, b: &[u8]) -> Result<(Extensions, usize)> {
        let mut at = 0;
        let mut e = Extensions::NONE;
        if opcode.has_deth() {
            e.deth = Some(DethRepr::parse(&Deth::new_checked(b)?)?);
            at += Deth::<&[u8]>::LEN;
        }
        if opcode.has_reth() {
            e.reth = Some(RethRepr::parse(&Reth::new_checked(b.get(at..).unwrap_or_default())?)?);
            at += Reth::<&[u8]>::LEN;
        }
        if opcode.has_atomic_eth() {
            e.atomic = Some(AtomicEthRepr::parse(&AtomicEth::new_checked(
                b.get(at..).unwrap_or_default(),
            )?)?);
            at += AtomicEth::<&[u8]>::LEN;
        }
        if opcode.has_aeth() {
            e.aeth = Some(AethRepr::parse(&Aeth::new_checked(b.get(at..).unwrap_or_default())?)?);
            at += Aeth::<&[u8]>::LEN;
        }
        if opcode.has_atomic_ack_eth() {
            e.atomic_ack = Some(AtomicAckEth::parse(b.get(at..).unwrap_or_default())?);
            at += ATOMIC_ACK_ETH_LEN;
        }
        if opcode.has_immdt() {
            e.immdt = Some(ImmDt::parse(b.get(at..).unwrap_or_default())?);
            at += IMMDT_LEN;
        }
        if opcode == Opcode::Cnp {
            CnpBody::parse(b.get(at..).unwrap_or_default())?;
            at += CNP_BODY_LEN;
        }
        Ok((e, at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_opcode_reads_back_what_it_wrote_and_refuses_a_short_buffer() {
        let full = Extensions {
            deth: Some(DethRepr { qkey: 7, src_qp: 9 }),
            reth: Some(RethRepr {
                virtual_addr: 0x1000,
                rkey: 3,
                dma_len: 4096,
            }),
            atomic: Some(AtomicEthRepr {
                virtual_addr: 0x2000,
                rkey: 4,
                swap_add: 5,
                compare: 6,
            }),
            aeth: Some(AethRepr {
                syndrome: super::super::Syndrome::Ack { credits: 31 },
                msn: 8,
            }),
            atomic_ack: Some(AtomicAckEth(0xfeed)),
            immdt: Some(ImmDt(0xbeef)),
        };
        for v in 0..=255u8 {
            let op = Opcode::from_u8(v);
            let e = Extensions {
                deth: full.deth.filter(|_| op.has_deth()),
                reth: full.reth.filter(|_| op.has_reth()),
                atomic: full.atomic.filter(|_| op.has_atomic_eth()),
                aeth: full.aeth.filter(|_| op.has_aeth()),
                atomic_ack: full.atomic_ack.filter(|_| op.has_atomic_ack_eth()),
                immdt: full.immdt.filter(|_| op.has_immdt()),
            };
            assert!(e.check(op).is_ok());
            let mut buf = [0u8; 64];
            let n = e.emit(op, &mut buf);
            assert_eq!(n, op.extension_len(), "{op:?}");
            assert_eq!(Extensions::parse(op, &buf[..n]).ok(), Some((e, n)), "{op:?}");
            if n > 0 {
                assert!(Extensions::parse(op, &buf[..n - 1]).is_err(), "{op:?} short");
            }
        }
        assert!(
            Extensions::NONE.check(Opcode::WriteFirst).is_err(),
            "a WRITE FIRST needs its RETH"
        );
    }
}
