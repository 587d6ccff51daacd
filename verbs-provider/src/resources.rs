//! Protection domains, memory regions and address handles. A PD and an MR are the NIC's
//! objects (it checks every key against them); an address handle is the program's: it only
//! says where UD sends go, and a send request carries it to the NIC.

use std::ffi::{c_int, c_void};

use intlab_nic_channel::command::{Answer, Command};
use intlab_nic_channel::device::ipv4_of;

use crate::abi::{IbvAh, IbvAhAttr, IbvContext, IbvMr, IbvPd, VerbsMr};
use crate::context::Context;

/// An address handle: libibverbs' part, and the destination's address.
#[repr(C)]
pub(crate) struct Ah {
    pub(crate) ibv: IbvAh,
    pub(crate) addr: [u8; 4],
}

/// The context of a PD this provider made.
pub(crate) unsafe fn context_of<'a>(pd: *mut IbvPd) -> Option<&'a Context> {
    let pd = unsafe { pd.as_ref() }?;
    unsafe { Context::from_ibv(pd.context) }
}

fn null_with<T>(e: i32) -> *mut T {
    crate::set_errno(e);
    std::ptr::null_mut()
}

/// `ibv_alloc_pd`.
pub(crate) unsafe extern "C" fn alloc_pd(context: *mut IbvContext) -> *mut IbvPd {
    let Some(ctx) = (unsafe { Context::from_ibv(context) }) else {
        return null_with(libc::EINVAL);
    };
    match ctx.command(&Command::AllocPd) {
        Ok(Answer::Handle(handle)) => Box::into_raw(Box::new(IbvPd { context, handle })),
        Ok(_) => null_with(libc::EIO),
        Err(e) => null_with(e),
    }
}

/// `ibv_dealloc_pd`.
pub(crate) unsafe extern "C" fn dealloc_pd(pd: *mut IbvPd) -> c_int {
    let Some(ctx) = (unsafe { context_of(pd) }) else {
        return libc::EINVAL;
    };
    // Checked non-null by context_of.
    let handle = unsafe { (*pd).handle };
    match ctx.command(&Command::DeallocPd { pd: handle }) {
        Ok(_) => {
            // Made by alloc_pd.
            drop(unsafe { Box::from_raw(pd) });
            0
        }
        Err(e) => e,
    }
}

/// `ibv_reg_mr`: the NIC registers the range of this process's memory; its pages stay where
/// they are (the NIC reaches them through the process, not by pinning).
pub(crate) unsafe extern "C" fn reg_mr(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut IbvMr {
    let Some(ctx) = (unsafe { context_of(pd) }) else {
        return null_with(libc::EINVAL);
    };
    if hca_va != addr as u64 {
        // An I/O virtual address other than the buffer's (ibv_reg_mr_iova) is not supported.
        return null_with(libc::EOPNOTSUPP);
    }
    let handle = unsafe { (*pd).handle };
    let c = Command::RegMr {
        pd: handle,
        addr: addr as u64,
        len: length as u64,
        access: access as u32,
    };
    match ctx.command(&c) {
        Ok(Answer::Key(key)) => {
            let mr = VerbsMr {
                ibv_mr: IbvMr {
                    context: std::ptr::null_mut(),
                    pd,
                    addr,
                    length,
                    handle: key,
                    lkey: key,
                    rkey: key,
                },
                mr_type: 0, // IBV_MR_TYPE_MR
                access,
            };
            Box::into_raw(Box::new(mr)) as *mut IbvMr
        }
        Ok(_) => null_with(libc::EIO),
        Err(e) => null_with(e),
    }
}

/// `ibv_dereg_mr`.
pub(crate) unsafe extern "C" fn dereg_mr(mr: *mut VerbsMr) -> c_int {
    let Some(m) = (unsafe { mr.as_ref() }) else {
        return libc::EINVAL;
    };
    let Some(ctx) = (unsafe { context_of(m.ibv_mr.pd) }) else {
        return libc::EINVAL;
    };
    match ctx.command(&Command::DeregMr { key: m.ibv_mr.lkey }) {
        Ok(_) => {
            // Made by reg_mr.
            drop(unsafe { Box::from_raw(mr) });
            0
        }
        Err(e) => e,
    }
}

/// `ibv_create_ah`: a destination by its GID, which must be an IPv4-mapped address (RoCE v2
/// over IPv4); whether it is one of the lab's hosts the NIC checks when a send uses it.
pub(crate) unsafe extern "C" fn create_ah(pd: *mut IbvPd, attr: *mut IbvAhAttr) -> *mut IbvAh {
    let (Some(_ctx), Some(a)) = (unsafe { context_of(pd) }, unsafe { attr.as_ref() }) else {
        return null_with(libc::EINVAL);
    };
    if a.is_global == 0 {
        // RoCE has no LIDs: an address handle without a GRH cannot be routed.
        return null_with(libc::EINVAL);
    }
    let Some(addr) = ipv4_of(&a.grh.dgid.raw) else {
        return null_with(libc::EINVAL);
    };
    let ah = Ah {
        ibv: IbvAh {
            context: std::ptr::null_mut(),
            pd,
            handle: 0,
        },
        addr,
    };
    Box::into_raw(Box::new(ah)) as *mut IbvAh
}

/// `ibv_destroy_ah`.
pub(crate) unsafe extern "C" fn destroy_ah(ah: *mut IbvAh) -> c_int {
    if ah.is_null() {
        return libc::EINVAL;
    }
    // Made by create_ah.
    drop(unsafe { Box::from_raw(ah as *mut Ah) });
    0
}
