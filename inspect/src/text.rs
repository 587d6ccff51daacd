//! The one-line text form of a decoded frame.

use std::fmt::{self, Display, Write};

use super::record::{FrameRecord, HopJson};

impl Display for FrameRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.timestamp_ns / 1_000_000_000;
        let nanos = self.timestamp_ns % 1_000_000_000;
        write!(f, "{} {secs}.{nanos:09}", self.frame)?;
        match &self.interface_name {
            Some(n) => write!(f, " {n}")?,
            None => write!(f, " if{}", self.interface)?,
        }
        write!(f, " {}B", self.len)?;
        if let (Some(ip), Some(udp)) = (&self.ipv4, &self.udp) {
            write!(
                f,
                " {}:{} > {}:{} {}",
                ip.src, udp.src_port, ip.dst, udp.dst_port, ip.ecn
            )?;
        } else if let Some(ip) = &self.ipv4 {
            write!(f, " {} > {} proto {} {}", ip.src, ip.dst, ip.protocol, ip.ecn)?;
        } else if let Some(eth) = &self.eth {
            write!(f, " {} > {} type {:#06x}", eth.src, eth.dst, eth.ethertype)?;
        }
        if let Some(int) = &self.int {
            write!(
                f,
                " INT[hops={} rhc={} ml={} bitmap={:#06x}{}{}",
                int.hops.len(),
                int.remaining_hops,
                int.hop_ml,
                int.instruction_bitmap,
                if int.hop_limit_exceeded { " E" } else { "" },
                if int.mtu_exceeded { " M" } else { "" }
            )?;
            for h in &int.hops {
                write!(f, " | {}", hop_text(h))?;
            }
            f.write_str("]")?;
        }
        if let Some(r) = &self.roce {
            write!(f, " RoCE {} qp={:#08x} psn={}", r.opcode_name, r.bth.dest_qp, r.bth.psn)?;
            if r.bth.ack_req {
                f.write_str(" A")?;
            }
            if r.bth.becn {
                f.write_str(" BECN")?;
            }
            if let Some(reth) = &r.reth {
                write!(
                    f,
                    " RETH(va={:#x} rkey={:#x} len={})",
                    reth.virtual_addr, reth.rkey, reth.dma_len
                )?;
            }
            if let Some(a) = &r.aeth {
                write!(
                    f,
                    " AETH({}{} msn={})",
                    a.kind,
                    a.nak.map(|n| format!(" {n}")).unwrap_or_default(),
                    a.msn
                )?;
            }
            if let Some(i) = r.immdt {
                write!(f, " imm={i:#x}")?;
            }
            write!(f, " payload={}", r.payload_len)?;
            match &r.icrc {
                Some(c) if c.ok => f.write_str(" ICRC ok")?,
                Some(c) => write!(
                    f,
                    " ICRC BAD (stored {:#010x}, computed {:#010x})",
                    c.stored, c.computed
                )?,
                None => f.write_str(" ICRC missing")?,
            }
        }
        if let Some(c) = &self.comment {
            write!(f, " # {c}")?;
        }
        if let Some(e) = &self.error {
            write!(f, " ERROR {e}")?;
        }
        Ok(())
    }
}

fn hop_text(h: &HopJson) -> String {
    let mut s = String::new();
    let mut put = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            let _ = write!(s, "{}{k}={v}", if s.is_empty() { "" } else { " " });
        }
    };
    put("node", h.node_id.map(|v| v.to_string()));
    put("in", h.ingress_port.map(|v| v.to_string()));
    put("out", h.egress_port.map(|v| v.to_string()));
    put("lat", h.hop_latency.map(|v| format!("{v}ns")));
    put("qid", h.queue_id.map(|v| v.to_string()));
    put("qlen", h.qlen.map(|v| format!("{v}B")));
    put("its", h.ingress_ts.map(|v| format!("{v}ns")));
    put("ts", h.ts.map(|v| format!("{v}ns")));
    put("txBytes", h.tx_bytes.map(|v| format!("{v}B")));
    put("B", h.rate.map(|v| format!("{v}kb/s")));
    s
}
