//! What `ibv_query_device` and `ibv_query_port` answer: the device's constants and its one
//! port, as the NIC tells them.

use std::ffi::{c_char, c_int, c_void};

use intlab_nic_channel::device as dev;

use crate::abi::{DEVICE_ATTR_EX_LEN, IbvContext, IbvDeviceAttr, IbvPortAttr};
use crate::context::Context;

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
    use std::ffi::CStr;

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
