//! What the device is, as both ends agree: its identity and limits (what `ibv_query_device`
//! reports), and the port facts the NIC gives when a program attaches.

/// Vendor id: none that perftest knows, so that it posts with the classic `ibv_post_send`
/// (it takes vendor-specific paths for the ids it knows).
pub const VENDOR_ID: u32 = 0;
/// Vendor part id.
pub const VENDOR_PART_ID: u32 = 0;
/// Hardware version.
pub const HW_VER: u32 = 1;
/// Firmware version, as `ibv_devinfo` prints it.
pub const FW_VER: &str = "intlab-1";
/// The provider's kernel ABI version (sysfs `abi_version` of the uverbs device).
pub const ABI_VERSION: u32 = 1;
/// The command protocol's version, checked when a program attaches.
pub const PROTOCOL_VERSION: u32 = 1;

/// The file in a device's sysfs folder that names its NIC's command file: the lab writes it,
/// and a device without it is not this provider's.
pub const COMMAND_FILE_ATTR: &str = "intlab_nic";

/// QPs a device holds at most.
pub const MAX_QP: u32 = 1 << 16;
/// Requests a work queue holds at most.
pub const MAX_QP_WR: u32 = 16_384;
/// Scatter/gather entries per request.
pub const MAX_SGE: u32 = 8;
/// Inline bytes per send request.
pub const MAX_INLINE: u32 = 256;
/// Completion queues.
pub const MAX_CQ: u32 = 1 << 16;
/// Entries per completion queue.
pub const MAX_CQE: u32 = 1 << 20;
/// Memory regions.
pub const MAX_MR: u32 = 1 << 18;
/// Protection domains.
pub const MAX_PD: u32 = 1 << 16;
/// Outstanding READs and atomics per QP, either way.
pub const MAX_QP_RD_ATOM: u32 = 16;
/// Shared receive queues.
pub const MAX_SRQ: u32 = 1 << 16;
/// Entries per shared receive queue.
pub const MAX_SRQ_WR: u32 = 16_384;
/// Largest message (2 GiB, as RoCE NICs give).
pub const MAX_MSG_SZ: u32 = 1 << 31;
/// `IBV_ATOMIC_HCA`: atomics are atomic among this NIC's own operations.
pub const ATOMIC_HCA: u32 = 1;
/// Device capability flags: RNR NAKs generated (`IBV_DEVICE_RC_RNR_NAK_GEN`), the system
/// image GUID reported, the port's active event, SRQ limits, QP state checked on modify.
pub const DEVICE_CAP_FLAGS: u32 = (1 << 12) | (1 << 11) | (1 << 10) | (1 << 7);

/// The port of a host's NIC, as the NIC tells a program that attaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortInfo {
    /// Active and largest MTU (bytes of payload, 256 to 4096).
    pub mtu: u32,
    /// The link's rate (b/s) as the scenario gives it.
    pub rate_bps: u64,
    /// The host's GID 0: its IPv4 address, IPv4-mapped (RoCE v2).
    pub gid: [u8; 16],
}

impl PortInfo {
    /// The InfiniBand width and speed codes `ibv_port_attr` has for the nearest rate at or
    /// above `rate_bps` (1X SDR 2.5 Gb/s up to 4X NDR 400 Gb/s).
    pub fn width_speed(&self) -> (u8, u8) {
        const TABLE: [(u64, u8, u8); 9] = [
            (2_500_000_000, 1, 1),
            (5_000_000_000, 1, 2),
            (10_000_000_000, 1, 4),
            (25_000_000_000, 1, 32),
            (50_000_000_000, 1, 64),
            (100_000_000_000, 2, 32),
            (200_000_000_000, 2, 64),
            (400_000_000_000, 2, 128),
            (u64::MAX, 2, 128),
        ];
        let (_, w, s) = TABLE
            .iter()
            .find(|(r, _, _)| self.rate_bps <= *r)
            .copied()
            .unwrap_or((0, 2, 128));
        (w, s)
    }

    /// The verbs' enum of the MTU (1: 256 ... 5: 4096).
    pub fn mtu_code(&self) -> u32 {
        match self.mtu {
            ..=256 => 1,
            257..=512 => 2,
            513..=1024 => 3,
            1025..=2048 => 4,
            _ => 5,
        }
    }
}

/// The GID of IPv4 address `a`: `::ffff:a.b.c.d`.
pub fn gid_of(a: [u8; 4]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[10] = 0xff;
    g[11] = 0xff;
    g[12..].copy_from_slice(&a);
    g
}

/// The node GUID of the NIC of the host at IPv4 address `a`: locally administered (the
/// universal/local bit of its EUI-64 set), unique within a lab as the addresses are.
pub fn node_guid(a: [u8; 4]) -> u64 {
    0x0200_0000_0000_0000 | u64::from(u32::from_be_bytes(a))
}

/// The IPv4 address of a GID, when it is IPv4-mapped.
pub fn ipv4_of(gid: &[u8; 16]) -> Option<[u8; 4]> {
    (gid[..10].iter().all(|&b| b == 0) && gid[10] == 0xff && gid[11] == 0xff)
        .then(|| [gid[12], gid[13], gid[14], gid[15]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids_map_ipv4_both_ways() {
        let g = gid_of([198, 18, 0, 1]);
        assert_eq!(ipv4_of(&g), Some([198, 18, 0, 1]));
        let mut v6 = g;
        v6[0] = 0xfe;
        assert_eq!(ipv4_of(&v6), None);
    }

    #[test]
    fn a_slow_link_is_reported_at_the_slowest_ib_rate() {
        let p = |rate_bps| PortInfo {
            mtu: 1024,
            rate_bps,
            gid: [0; 16],
        };
        assert_eq!(p(100_000_000).width_speed(), (1, 1));
        assert_eq!(p(10_000_000_000).width_speed(), (1, 4));
        assert_eq!(p(100_000_000_000).width_speed(), (2, 32));
        assert_eq!(p(1_000_000_000_000).width_speed(), (2, 128));
        assert_eq!(p(0).mtu_code(), 3);
        assert_eq!(p(0).width_speed(), (1, 1));
        assert_eq!(PortInfo { mtu: 4096, ..p(0) }.mtu_code(), 5);
    }
}
