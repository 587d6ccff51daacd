//! Memory the program shares with its NIC: a memfd it makes and maps; the NIC maps the same
//! memfd (it takes the descriptor from the program while the command that names it runs).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use intlab_nic_channel::shared::SharedMapping;

/// A shared mapping and the memfd behind it.
pub(crate) struct Shared {
    fd: OwnedFd,
    mapping: SharedMapping,
}

impl Shared {
    /// `len` zero bytes in a new memfd named `name`, mapped read-write and shared.
    pub(crate) fn new(name: &std::ffi::CStr, len: usize) -> Result<Shared, i32> {
        // memfd_create copies the name; the descriptor is ours.
        let raw = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if raw < 0 {
            return Err(crate::errno());
        }
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        if unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) } != 0 {
            return Err(crate::errno());
        }
        let copy = fd.try_clone().map_err(|e| e.raw_os_error().unwrap_or(libc::EMFILE))?;
        let mapping = SharedMapping::map(copy, len).map_err(|e| e.raw_os_error().unwrap_or(libc::ENOMEM))?;
        Ok(Shared { fd, mapping })
    }

    /// The memfd, for the command that hands it to the NIC.
    pub(crate) fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsRef<[std::sync::atomic::AtomicU64]> for Shared {
    fn as_ref(&self) -> &[std::sync::atomic::AtomicU64] {
        self.mapping.as_ref()
    }
}
