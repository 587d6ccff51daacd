//! Interface offloads through the kernel's own interface, the SIOCETHTOOL ioctl (the legacy
//! per-feature commands every kernel since 2.6 answers), so the lab needs no `ethtool` program.
//!
//! The lab turns them off: with transmit checksum offload on, a host's UDP datagrams leave its
//! veth with the checksum still to be filled in, the switch forwards the raw frame, and the
//! receiving kernel drops it as corrupt; segmentation and receive offloads would hand the switch
//! frames larger than the MTU, which no INT hop or line-rate schedule can account for.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// One offload the lab controls, with its ethtool get and set commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    /// Transmit checksum offload (`ethtool -K DEV tx`).
    TxChecksum,
    /// TCP segmentation offload (`tso`).
    Tso,
    /// Generic segmentation offload (`gso`).
    Gso,
    /// Generic receive offload (`gro`).
    Gro,
}

impl Offload {
    /// Every offload the lab turns off, in the order it does so (checksum first: TSO depends on
    /// it).
    pub const ALL: [Offload; 4] = [Offload::TxChecksum, Offload::Tso, Offload::Gso, Offload::Gro];

    /// ethtool's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Offload::TxChecksum => "tx-checksumming",
            Offload::Tso => "tcp-segmentation-offload",
            Offload::Gso => "generic-segmentation-offload",
            Offload::Gro => "generic-receive-offload",
        }
    }

    /// ETHTOOL_G* and ETHTOOL_S* (include/uapi/linux/ethtool.h).
    fn commands(self) -> (u32, u32) {
        match self {
            Offload::TxChecksum => (0x16, 0x17),
            Offload::Tso => (0x1e, 0x1f),
            Offload::Gso => (0x23, 0x24),
            Offload::Gro => (0x2b, 0x2c),
        }
    }
}

/// Why an offload could not be set.
#[derive(Debug, thiserror::Error)]
pub enum OffloadError {
    /// The ioctl failed.
    #[error("interface {device}: {offload}: {cause}")]
    Ioctl {
        /// Interface.
        device: String,
        /// ethtool's name of the offload.
        offload: &'static str,
        /// What the kernel said.
        cause: io::Error,
    },
    /// The kernel accepted the change, but the offload reads back unchanged (a fixed feature).
    #[error("interface {device}: {offload} is still {}", if *.on { "on" } else { "off" })]
    Unchanged {
        /// Interface.
        device: String,
        /// ethtool's name of the offload.
        offload: &'static str,
        /// What it reads back.
        on: bool,
    },
}

/// struct ethtool_value.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// struct ifreq with `ifr_data`, padded to the kernel's 40 bytes.
#[repr(C)]
struct IfreqData {
    name: [u8; libc::IFNAMSIZ],
    data: *mut EthtoolValue,
    _pad: [u8; 16],
}

const _: () = assert!(size_of::<IfreqData>() == 40);

/// A socket of the calling thread's namespace to send ethtool requests through.
struct Control(OwnedFd);

impl Control {
    fn open() -> io::Result<Control> {
        // SAFETY: plain socket(2); the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Control(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    fn request(&self, device: &str, cmd: u32, data: u32) -> io::Result<u32> {
        let bytes = device.as_bytes();
        if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{device}` is not an interface name (1 to 15 bytes)"),
            ));
        }
        let mut value = EthtoolValue { cmd, data };
        let mut req = IfreqData {
            name: [0; libc::IFNAMSIZ],
            data: &mut value,
            _pad: [0; 16],
        };
        req.name[..bytes.len()].copy_from_slice(bytes);
        // SAFETY: req is a valid ifreq whose data points at a live ethtool_value for the call.
        if unsafe { libc::ioctl(self.0.as_raw_fd(), SIOCETHTOOL as _, &mut req as *mut IfreqData) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(value.data)
    }
}

/// Whether `offload` is on for `device` (in the calling thread's namespace).
pub fn get(device: &str, offload: Offload) -> Result<bool, OffloadError> {
    let err = |cause| OffloadError::Ioctl {
        device: device.to_owned(),
        offload: offload.name(),
        cause,
    };
    let ctl = Control::open().map_err(err)?;
    ctl.request(device, offload.commands().0, 0)
        .map(|v| v != 0)
        .map_err(err)
}

/// Turns every offload in [`Offload::ALL`] off on `device` (in the calling thread's namespace)
/// and checks that each reads back off.
pub fn disable_all(device: &str) -> Result<(), OffloadError> {
    Offload::ALL.iter().try_for_each(|&o| set(device, o, false))
}

/// Turns `offload` on or off on `device` (in the calling thread's namespace) and checks that it
/// reads back so. An offload the driver cannot change counts as done when it already is as
/// asked.
pub fn set(device: &str, offload: Offload, on: bool) -> Result<(), OffloadError> {
    let err = |cause| OffloadError::Ioctl {
        device: device.to_owned(),
        offload: offload.name(),
        cause,
    };
    let ctl = Control::open().map_err(err)?;
    let (get, set) = offload.commands();
    let set_result = ctl.request(device, set, u32::from(on));
    let now = ctl.request(device, get, 0).map_err(err)? != 0;
    match set_result {
        _ if now == on => Ok(()),
        Err(e) => Err(err(e)),
        Ok(_) => Err(OffloadError::Unchanged {
            device: device.to_owned(),
            offload: offload.name(),
            on: now,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_interface_name_is_refused_before_the_kernel_sees_it() {
        let e = get("a-name-longer-than-15", Offload::Gro).unwrap_err();
        assert!(e.to_string().contains("not an interface name"), "{e}");
    }

    #[test]
    fn a_missing_interface_is_an_error_naming_it() {
        let e = disable_all("nosuchdev0").unwrap_err();
        assert!(
            e.to_string().starts_with("interface nosuchdev0: tx-checksumming"),
            "{e}"
        );
    }
}
