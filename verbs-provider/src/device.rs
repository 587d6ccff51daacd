//! The device: which sysfs devices are this provider's, where each one's command file is, and
//! its node GUID.

use std::ffi::{CStr, CString};

use intlab_nic_channel::device as dev;

use crate::abi::{VerbsDevice, VerbsSysfsDev};

/// A device of this provider: libibverbs' part, and where its NIC's command file is.
#[repr(C)]
pub(crate) struct Device {
    pub(crate) vdev: VerbsDevice,
    pub(crate) command_file: CString,
    pub(crate) node_guid: u64,
}

/// The path of the file that names the command file of the sysfs device `sysfs_dev`.
fn attr_path(sysfs_dev: &VerbsSysfsDev) -> Option<String> {
    // libibverbs wrote a NUL-terminated path there.
    let path = unsafe { CStr::from_ptr(sysfs_dev.ibdev_path.as_ptr()) };
    Some(format!("{}/{}", path.to_str().ok()?, dev::COMMAND_FILE_ATTR))
}

/// Reads the command file's path for `sysfs_dev`.
fn command_file(sysfs_dev: &VerbsSysfsDev) -> Option<CString> {
    let text = std::fs::read_to_string(attr_path(sysfs_dev)?).ok()?;
    CString::new(text.trim()).ok()
}

/// True for the devices whose sysfs folder names an intlab NIC.
pub(crate) unsafe extern "C" fn match_device(sysfs_dev: *mut VerbsSysfsDev) -> bool {
    // libibverbs passes a device it found; null only by mistake.
    let Some(d) = (unsafe { sysfs_dev.as_ref() }) else {
        return false;
    };
    attr_path(d).is_some_and(|p| std::path::Path::new(&p).exists())
}

/// Allocates a device for `sysfs_dev`, once libibverbs matched it.
pub(crate) unsafe extern "C" fn alloc_device(sysfs_dev: *mut VerbsSysfsDev) -> *mut VerbsDevice {
    let Some(d) = (unsafe { sysfs_dev.as_ref() }) else {
        return std::ptr::null_mut();
    };
    let Some(command_file) = command_file(d) else {
        return std::ptr::null_mut();
    };
    // A GUID from the device's GID: its address, so each host's is its own.
    let node_guid = dev::node_guid(gid_tail(d));
    // libibverbs fills the device's public part after this returns; it must start zeroed.
    let vdev: VerbsDevice = unsafe { std::mem::zeroed() };
    let device = Box::new(Device {
        vdev,
        command_file,
        node_guid,
    });
    Box::into_raw(device) as *mut VerbsDevice
}

/// The last four bytes of the device's GID 0 (its IPv4 address), read from sysfs.
fn gid_tail(d: &VerbsSysfsDev) -> [u8; 4] {
    let path = unsafe { CStr::from_ptr(d.ibdev_path.as_ptr()) };
    let read = || -> Option<[u8; 4]> {
        let text = std::fs::read_to_string(format!("{}/ports/1/gids/0", path.to_str().ok()?)).ok()?;
        let hex: String = text.trim().chars().filter(|c| *c != ':').collect();
        let v = u128::from_str_radix(&hex, 16).ok()?;
        Some((v as u32).to_be_bytes())
    };
    read().unwrap_or_default()
}

/// Frees a device libibverbs no longer needs.
pub(crate) unsafe extern "C" fn uninit_device(vdev: *mut VerbsDevice) {
    if !vdev.is_null() {
        // Made by `alloc_device` from a `Box<Device>` whose first field is the VerbsDevice.
        drop(unsafe { Box::from_raw(vdev as *mut Device) });
    }
}
