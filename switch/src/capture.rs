//! pcapng capture of one port: one interface block with name, description, speed and
//! nanosecond resolution; direction flags on every packet; dropped frames with their reason.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::time::Duration;

use pcap_file::DataLink;
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};

use crate::counters::DropReason;
use intlab_runtime::clock::Clock;

/// EPB flags: direction bits 0-1 (RFC draft pcapng section 4.3.1).
const INBOUND: u32 = 0b01;
const OUTBOUND: u32 = 0b10;

/// How long (lab time) a frame waits before it is written: a port records an arrival when it
/// reads the frame and a departure when it releases it, each late by up to the worker's
/// lateness, so written at once the two directions would interleave out of time order.
const REORDER_NS: u64 = 20_000_000;

/// A frame waiting to be written in time order.
struct Pending {
    t_ns: u64,
    seq: u64,
    frame: Vec<u8>,
    flags: u32,
    comment: Option<&'static str>,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.t_ns, self.seq) == (other.t_ns, other.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.t_ns, self.seq).cmp(&(other.t_ns, other.seq))
    }
}

/// A pcapng file for one port, written in timestamp order.
pub struct PortCapture {
    writer: PcapNgWriter<BufWriter<File>>,
    clock: &'static Clock,
    pending: BinaryHeap<Reverse<Pending>>,
    seq: u64,
    latest_ns: u64,
}

impl std::fmt::Debug for PortCapture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PortCapture")
    }
}

impl PortCapture {
    /// Creates `path` with one Ethernet interface named `name`.
    pub fn create(path: &Path, name: &str, description: &str, speed_bps: u64) -> std::io::Result<PortCapture> {
        // A capture folder that does not exist yet is made, as `tcpdump -w` users expect.
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
        let mut writer = PcapNgWriter::new(file).map_err(std::io::Error::other)?;
        writer
            .write_pcapng_block(InterfaceDescriptionBlock {
                linktype: DataLink::ETHERNET,
                snaplen: 0,
                options: vec![
                    InterfaceDescriptionOption::IfName(Cow::Owned(name.to_owned())),
                    InterfaceDescriptionOption::IfDescription(Cow::Owned(description.to_owned())),
                    InterfaceDescriptionOption::IfSpeed(speed_bps),
                    // pcap-file writes timestamps in ns whatever this says; say it so readers agree.
                    InterfaceDescriptionOption::IfTsResol(9),
                ],
            })
            .map_err(std::io::Error::other)?;
        Ok(PortCapture {
            writer,
            clock: Clock::get(),
            pending: BinaryHeap::new(),
            seq: 0,
            latest_ns: 0,
        })
    }

    /// Queues a frame and writes every queued one older than the reorder window.
    fn write(&mut self, t_ns: u64, frame: &[u8], flags: u32, comment: Option<&'static str>) {
        self.seq += 1;
        self.pending.push(Reverse(Pending {
            t_ns,
            seq: self.seq,
            frame: frame.to_vec(),
            flags,
            comment,
        }));
        self.latest_ns = self.latest_ns.max(t_ns);
        self.write_older_than(self.latest_ns.saturating_sub(REORDER_NS));
    }

    /// Writes the queued frames stamped before `t_ns`, oldest first.
    fn write_older_than(&mut self, t_ns: u64) {
        while self.pending.peek().is_some_and(|Reverse(p)| p.t_ns < t_ns) {
            if let Some(Reverse(p)) = self.pending.pop() {
                self.write_now(p.t_ns, &p.frame, p.flags, p.comment);
            }
        }
    }

    fn write_now(&mut self, t_ns: u64, frame: &[u8], flags: u32, comment: Option<&'static str>) {
        let ts = self.clock.epoch_ns(t_ns);
        let mut options = vec![EnhancedPacketOption::Flags(flags)];
        if let Some(c) = comment {
            options.push(EnhancedPacketOption::Comment(Cow::Borrowed(c)));
        }
        let block = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::new((ts / 1_000_000_000) as u64, (ts % 1_000_000_000) as u32),
            original_len: frame.len() as u32,
            data: Cow::Borrowed(frame),
            options,
        };
        if let Err(e) = self.writer.write_pcapng_block(block) {
            tracing::warn!("capture write failed: {e}");
        }
    }

    /// Records a frame received at `t_ns`.
    pub fn inbound(&mut self, t_ns: u64, frame: &[u8]) {
        self.write(t_ns, frame, INBOUND, None);
    }

    /// Records a frame whose transmission started at `t_ns`.
    pub fn outbound(&mut self, t_ns: u64, frame: &[u8]) {
        self.write(t_ns, frame, OUTBOUND, None);
    }

    /// Records a dropped frame with the reason as its comment.
    pub fn dropped(&mut self, t_ns: u64, frame: &[u8], why: DropReason, outbound: bool) {
        let comment = match why {
            DropReason::Runt => "dropped: runt",
            DropReason::Malformed => "dropped: malformed",
            DropReason::NonIpv4 => "dropped: non_ipv4",
            DropReason::NoRoute => "dropped: no_route",
            DropReason::Broadcast => "dropped: broadcast",
            DropReason::BufferFull => "dropped: buffer_full",
            DropReason::InjectedLoss => "dropped: injected_loss",
            DropReason::Oversize => "dropped: oversize",
            DropReason::HandoffFull => "dropped: handoff_full",
            DropReason::TxError => "dropped: tx_error",
            DropReason::TtlExpired => "dropped: ttl_expired",
            DropReason::P4Drop => "dropped: p4_drop",
            DropReason::P4NoPort => "dropped: p4_no_port",
            DropReason::PfcWatchdog => "dropped: pfc_watchdog",
            DropReason::LinkDown => "dropped: link_down",
            DropReason::RxOverflow => "dropped: rx_overflow",
        };
        self.write(t_ns, frame, if outbound { OUTBOUND } else { INBOUND }, Some(comment));
    }

    /// Flushes buffered packets to the file.
    pub fn flush(&mut self) {
        use std::io::Write;
        if let Err(e) = self.writer.get_mut().flush() {
            tracing::warn!("capture flush failed: {e}");
        }
    }
}

impl Drop for PortCapture {
    fn drop(&mut self) {
        self.write_older_than(u64::MAX);
        self.flush();
    }
}
