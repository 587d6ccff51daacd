//! The device: which sysfs devices are this provider's, and what `ibv_query_device` and
//! `ibv_query_port` answer (the device's constants and the port the NIC described when the
//! context attached).

use std::ffi::{CStr, CString, c_char, c_int, c_void};

use intlab_nic_channel::device as dev;

use crate::abi::{DEVICE_ATTR_EX_LEN, IbvContext, IbvDeviceAttr, IbvPortAttr, VerbsDevice, VerbsSysfsDev};
use crate::context::Context;

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

fn fill_attr(a: &mut IbvDeviceAttr, node_guid: u64) {
    for (d, s) in a.fw_ver.iter_mut().zip(dev::FW_VER.bytes()) {
        *d = s as c_char;
    }
    a.node_guid = node_guid.to_be();
    a.sys_image_guid = node_guid.to_be();
    a.max_mr_size = u64::MAX;
    a.page_size_cap = 0xffff_f000;
    a.vendor_id = dev::VENDOR_ID;
    a.vendor_part_id = dev::VENDOR_PART_ID;
    a.hw_ver = dev::HW_VER;
    a.max_qp = dev::MAX_QP as c_int;
    a.max_qp_wr = dev::MAX_QP_WR as c_int;
    a.device_cap_flags = dev::DEVICE_CAP_FLAGS;
    a.max_sge = dev::MAX_SGE as c_int;
    a.max_sge_rd = dev::MAX_SGE as c_int;
    a.max_cq = dev::MAX_CQ as c_int;
    a.max_cqe = dev::MAX_CQE as c_int;
    a.max_mr = dev::MAX_MR as c_int;
    a.max_pd = dev::MAX_PD as c_int;
    a.max_qp_rd_atom = dev::MAX_QP_RD_ATOM as c_int;
    a.max_res_rd_atom = (dev::MAX_QP_RD_ATOM * dev::MAX_QP) as c_int;
    a.max_qp_init_rd_atom = dev::MAX_QP_RD_ATOM as c_int;
    a.atomic_cap = dev::ATOMIC_HCA;
    a.max_ah = dev::MAX_QP as c_int;
    a.max_srq = dev::MAX_SRQ as c_int;
    a.max_srq_wr = dev::MAX_SRQ_WR as c_int;
    a.max_srq_sge = dev::MAX_SGE as c_int;
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 15;
    a.phys_port_cnt = 1;
}

/// `ibv_query_device` and `ibv_query_device_ex`: the device's constants; the extended
/// attributes are all zero (none of those features).
pub(crate) unsafe extern "C" fn query_device_ex(
    context: *mut IbvContext,
    _input: *const c_void,
    attr: *mut IbvDeviceAttr,
    attr_size: usize,
) -> c_int {
    let Some(ctx) = (unsafe { Context::from_ibv(context) }) else {
        return libc::EINVAL;
    };
    if attr.is_null() || attr_size < std::mem::size_of::<IbvDeviceAttr>() {
        return libc::EINVAL;
    }
    // The caller gave `attr_size` bytes there; what this provider does not fill is zero.
    unsafe { std::ptr::write_bytes(attr as *mut u8, 0, attr_size.min(DEVICE_ATTR_EX_LEN)) };
    let a = unsafe { &mut *attr };
    fill_attr(a, ctx.node_guid());
    0
}

/// `ibv_query_port`: port 1, active, Ethernet, the lab's MTU and rate.
pub(crate) unsafe extern "C" fn query_port(context: *mut IbvContext, port: u8, attr: *mut IbvPortAttr) -> c_int {
    let Some(ctx) = (unsafe { Context::from_ibv(context) }) else {
        return libc::EINVAL;
    };
    if port != 1 || attr.is_null() {
        return libc::EINVAL;
    }
    let p = ctx.port();
    let (width, speed) = p.width_speed();
    // libibverbs zeroed it (`__lib_query_port`).
    let a = unsafe { &mut *attr };
    a.state = 4; // IBV_PORT_ACTIVE
    a.max_mtu = p.mtu_code();
    a.active_mtu = p.mtu_code();
    a.gid_tbl_len = 1;
    // IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS
    a.port_cap_flags = (1 << 16) | (1 << 26);
    a.max_msg_sz = dev::MAX_MSG_SZ;
    a.pkey_tbl_len = 1;
    a.max_vl_num = 1;
    a.active_width = width;
    a.active_speed = speed;
    a.phys_state = 5; // LinkUp
    a.link_layer = 2; // IBV_LINK_LAYER_ETHERNET
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attributes_are_the_devices_constants() {
        let mut a: IbvDeviceAttr = unsafe { std::mem::zeroed() };
        fill_attr(&mut a, 0x0200_0000_c612_0001);
        assert_eq!(a.vendor_id, 0, "no vendor perftest knows");
        assert_eq!(a.max_sge as u32, dev::MAX_SGE);
        assert_eq!(a.atomic_cap, 1);
        assert_eq!(u64::from_be(a.node_guid), 0x0200_0000_c612_0001);
        let fw = unsafe { CStr::from_ptr(a.fw_ver.as_ptr()) };
        assert_eq!(fw.to_str(), Ok(dev::FW_VER));
    }
}
