//! The libibverbs provider of intlab's emulated NICs: Debian's own libibverbs loads it
//! (`RDMAV_DRIVERS=.../libintlab`, which `intlab exec` sets) and it makes each lab host's NIC an
//! RDMA device unchanged verbs programs use. It finds the device in the host's sysfs tree
//! (`/sys/class/infiniband/intlab0`, which the lab builds), writes its slow-path commands to the
//! NIC's command file (`nic-channel`'s commands) and posts work requests into queues the NIC
//! maps, ringing its doorbell; completions come back the same way.
//!
//! Nothing here trusts libibverbs' callers more than a provider must: a request the device
//! cannot do fails with an errno, never a panic (a panic in an `extern "C"` function aborts).

#![deny(unsafe_op_in_unsafe_fn)]
// A test build does not register with libibverbs (its symbols are not there to bind to), and
// the entry points are then reached from nothing.
#![cfg_attr(test, allow(dead_code))]

pub mod abi;
mod context;
mod cq;
mod device;
mod memory;
mod qp;
mod query;
mod resources;
mod srq;
mod work_queue;

use std::ffi::{CStr, c_char};

use abi::{VerbsContextOps, VerbsDeviceOps};

/// The provider's name, as libibverbs logs it.
const NAME: &CStr = c"intlab";

/// What libibverbs is given: the provider's entry points.
struct DeviceOps(VerbsDeviceOps);

// Pointers to static, immutable data only.
unsafe impl Sync for DeviceOps {}

static DEVICE_OPS: DeviceOps = DeviceOps(VerbsDeviceOps {
    name: NAME.as_ptr() as *const c_char,
    match_min_abi_version: intlab_nic_channel::device::ABI_VERSION,
    match_max_abi_version: intlab_nic_channel::device::ABI_VERSION,
    match_table: std::ptr::null(),
    static_providers: std::ptr::null(),
    match_device: Some(device::match_device),
    alloc_context: Some(context::alloc_context),
    import_context: None,
    alloc_device: Some(device::alloc_device),
    uninit_device: Some(device::uninit_device),
});

/// The operations a context of this provider has.
pub(crate) fn context_ops() -> VerbsContextOps {
    VerbsContextOps {
        alloc_pd: Some(resources::alloc_pd),
        async_event: Some(context::async_event),
        cq_event: Some(cq::cq_event),
        create_ah: Some(resources::create_ah),
        create_cq: Some(cq::create_cq),
        create_qp: Some(qp::create_qp),
        create_srq: Some(srq::create_srq),
        dealloc_pd: Some(resources::dealloc_pd),
        dereg_mr: Some(resources::dereg_mr),
        destroy_ah: Some(resources::destroy_ah),
        destroy_cq: Some(cq::destroy_cq),
        destroy_qp: Some(qp::destroy_qp),
        destroy_srq: Some(srq::destroy_srq),
        free_context: Some(context::free_context),
        modify_qp: Some(qp::modify_qp),
        modify_srq: Some(srq::modify_srq),
        poll_cq: Some(cq::poll_cq),
        post_recv: Some(qp::post_recv),
        post_send: Some(qp::post_send),
        post_srq_recv: Some(srq::post_srq_recv),
        query_device_ex: Some(query::query_device_ex),
        query_port: Some(query::query_port),
        query_qp: Some(qp::query_qp),
        query_srq: Some(srq::query_srq),
        reg_mr: Some(resources::reg_mr),
        req_notify_cq: Some(cq::req_notify_cq),
        ..VerbsContextOps::default()
    }
}

/// Registers the provider when libibverbs loads it, as rdma-core's `PROVIDER_DRIVER` does.
extern "C" fn register() {
    // Only where libibverbs loaded this library.
    if let Some(lib) = abi::libibverbs() {
        // SAFETY: the operations live as long as the library.
        unsafe { (lib.register_driver)(&DEVICE_OPS.0) }
    }
}

#[cfg(not(test))]
#[used]
#[unsafe(link_section = ".init_array")]
static REGISTER: extern "C" fn() = register;

/// Sets errno to `e`.
pub(crate) fn set_errno(e: i32) {
    // errno is this thread's: nothing else writes it meanwhile.
    unsafe { *libc::__errno_location() = e };
}

/// The calling thread's errno.
pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}
