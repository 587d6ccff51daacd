//! libibverbs' ABI as the project's own `#[repr(C)]` types: the public structures of
//! `infiniband/verbs.h` (rdma-core 44, Debian 12) a provider fills or reads, and the private
//! provider interface of rdma-core's `libibverbs/driver.h` (`IBVERBS_PRIVATE_34`), which no
//! Debian package installs. Every size is asserted here; the public structures' field offsets
//! are checked against Debian's `verbs.h` by `tests/abi.rs` where libibverbs-dev is installed.
//! Nothing of rdma-core's source is copied: these are the layouts, written down.

#![allow(missing_docs)]

use std::ffi::{c_char, c_int, c_void};

/// `pthread_mutex_t` on x86_64 glibc.
pub type PthreadMutex = [u64; 5];
/// `pthread_cond_t` on x86_64 glibc.
pub type PthreadCond = [u64; 6];

/// An untyped entry of an operations table this provider leaves to libibverbs' defaults.
pub type Unused = Option<unsafe extern "C" fn()>;

/// `struct ibv_device`.
#[repr(C)]
pub struct IbvDevice {
    pub _ops: [Unused; 2],
    pub node_type: u32,
    pub transport_type: u32,
    pub name: [c_char; 64],
    pub dev_name: [c_char; 64],
    pub dev_path: [c_char; 256],
    pub ibdev_path: [c_char; 256],
}

/// `struct ibv_context`.
#[repr(C)]
pub struct IbvContext {
    pub device: *mut IbvDevice,
    pub ops: [Unused; 32],
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: PthreadMutex,
    pub abi_compat: *mut c_void,
}

/// `struct verbs_context`: forty entries libibverbs manages, then the `ibv_context`.
#[repr(C)]
pub struct VerbsContext {
    pub _managed: [usize; 40],
    pub context: IbvContext,
}

/// `struct ibv_pd`.
#[repr(C)]
pub struct IbvPd {
    pub context: *mut IbvContext,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
pub struct IbvMr {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct verbs_mr` (driver.h): libibverbs reads `mr_type` and `access` in `ibv_dereg_mr`.
#[repr(C)]
pub struct VerbsMr {
    pub ibv_mr: IbvMr,
    pub mr_type: u32,
    pub access: c_int,
}

/// `struct ibv_comp_channel`.
#[repr(C)]
pub struct IbvCompChannel {
    pub context: *mut IbvContext,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct IbvCq {
    pub context: *mut IbvContext,
    pub channel: *mut IbvCompChannel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_srq`.
#[repr(C)]
pub struct IbvSrq {
    pub context: *mut IbvContext,
    pub srq_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub handle: u32,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}

/// `struct verbs_srq` (driver.h).
#[repr(C)]
pub struct VerbsSrq {
    pub srq: IbvSrq,
    pub srq_type: u32,
    pub xrcd: *mut c_void,
    pub cq: *mut IbvCq,
    pub srq_num: u32,
}

/// `struct ibv_qp`.
#[repr(C)]
pub struct IbvQp {
    pub context: *mut IbvContext,
    pub qp_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut IbvSrq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: u32,
    pub qp_type: u32,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}

/// `struct verbs_qp` (driver.h): the QP, room for `struct ibv_qp_ex` (352 bytes), then a mask
/// that says whether that extension is there (it is not: `ibv_qp_to_qp_ex` gives NULL).
#[repr(C)]
pub struct VerbsQp {
    pub qp: IbvQp,
    pub _qp_ex_rest: [u8; 352 - 160],
    pub comp_mask: u32,
    pub xrcd: *mut c_void,
}

/// `struct ibv_ah`.
#[repr(C)]
pub struct IbvAh {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub handle: u32,
}

/// `union ibv_gid`: 16 bytes, aligned as its `global` member's two 64-bit halves.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub struct IbvGid {
    pub raw: [u8; 16],
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvGlobalRoute {
    pub dgid: IbvGid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvAhAttr {
    pub grh: IbvGlobalRoute,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvQpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvQpAttr {
    pub qp_state: u32,
    pub cur_qp_state: u32,
    pub path_mtu: u32,
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_int,
    pub cap: IbvQpCap,
    pub ah_attr: IbvAhAttr,
    pub alt_ah_attr: IbvAhAttr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
pub struct IbvQpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut IbvSrq,
    pub cap: IbvQpCap,
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct IbvSrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
pub struct IbvSrqInitAttr {
    pub srq_context: *mut c_void,
    pub attr: IbvSrqAttr,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// The `wr` union of `struct ibv_send_wr`, as its widest member (`atomic`) lays it out; the
/// `rdma` and `ud` members share its first fields.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSendWrWr {
    /// `rdma.remote_addr`, `atomic.remote_addr`, or `ud.ah` (a pointer).
    pub remote_addr: u64,
    /// `atomic.compare_add`; for `rdma`, `rkey` in its low half; for `ud`, `remote_qpn` and
    /// `remote_qkey`.
    pub compare_add: u64,
    /// `atomic.swap`.
    pub swap: u64,
    /// `atomic.rkey`.
    pub rkey: u32,
}

/// `struct ibv_send_wr`.
#[repr(C)]
pub struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut IbvSendWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
    pub opcode: u32,
    pub send_flags: u32,
    pub imm_data: u32,
    pub wr: IbvSendWrWr,
    pub qp_type: u32,
    pub _bind_mw_or_tso: [u64; 6],
}

/// `struct ibv_recv_wr`.
#[repr(C)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvWc {
    pub wr_id: u64,
    pub status: u32,
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_port_attr`.
#[repr(C)]
pub struct IbvPortAttr {
    pub state: u32,
    pub max_mtu: u32,
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// `struct ibv_device_attr`.
#[repr(C)]
pub struct IbvDeviceAttr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: u32,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: u32,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// Bytes of `struct ibv_device_attr_ex`: the attributes above and their extensions, which this
/// provider leaves zero.
pub const DEVICE_ATTR_EX_LEN: usize = 400;

/// `struct list_node` of ccan.
#[repr(C)]
pub struct ListNode {
    pub next: *mut ListNode,
    pub prev: *mut ListNode,
}

/// `struct verbs_device` (driver.h).
#[repr(C)]
pub struct VerbsDevice {
    pub device: IbvDevice,
    pub ops: *const VerbsDeviceOps,
    pub refcount: c_int,
    pub entry: ListNode,
    pub sysfs: *mut VerbsSysfsDev,
    pub core_support: u64,
}

/// `struct verbs_sysfs_dev` (driver.h): a device libibverbs found in sysfs.
#[repr(C)]
pub struct VerbsSysfsDev {
    pub entry: ListNode,
    pub provider_data: *mut c_void,
    pub match_: *const c_void,
    pub flags: u32,
    pub sysfs_name: [c_char; 64],
    pub sysfs_cdev: u64,
    pub ibdev_name: [c_char; 64],
    pub ibdev_path: [c_char; 256],
    pub modalias: [c_char; 512],
    pub node_guid: u64,
    pub driver_id: u32,
    pub node_type: u32,
    pub ibdev_idx: c_int,
    pub num_ports: u32,
    pub abi_ver: u32,
    pub time_created: [i64; 2],
}

/// `struct verbs_device_ops` (driver.h): what a provider registers.
#[repr(C)]
pub struct VerbsDeviceOps {
    pub name: *const c_char,
    pub match_min_abi_version: u32,
    pub match_max_abi_version: u32,
    pub match_table: *const c_void,
    pub static_providers: *const c_void,
    pub match_device: Option<unsafe extern "C" fn(*mut VerbsSysfsDev) -> bool>,
    pub alloc_context: Option<unsafe extern "C" fn(*mut IbvDevice, c_int, *mut c_void) -> *mut VerbsContext>,
    pub import_context: Unused,
    pub alloc_device: Option<unsafe extern "C" fn(*mut VerbsSysfsDev) -> *mut VerbsDevice>,
    pub uninit_device: Option<unsafe extern "C" fn(*mut VerbsDevice)>,
}

/// `struct verbs_context_ops` (driver.h): every operation a provider may implement, in the
/// header's (alphabetical) order; the ones left `None` keep libibverbs' defaults, which fail
/// with EOPNOTSUPP or ENOSYS.
#[repr(C)]
#[derive(Default)]
pub struct VerbsContextOps {
    pub advise_mr: Unused,
    pub alloc_dm: Unused,
    pub alloc_mw: Unused,
    pub alloc_null_mr: Unused,
    pub alloc_parent_domain: Unused,
    pub alloc_pd: Option<unsafe extern "C" fn(*mut IbvContext) -> *mut IbvPd>,
    pub alloc_td: Unused,
    pub async_event: Option<unsafe extern "C" fn(*mut IbvContext, *mut c_void)>,
    pub attach_counters_point_flow: Unused,
    pub attach_mcast: Unused,
    pub bind_mw: Unused,
    pub close_xrcd: Unused,
    pub cq_event: Option<unsafe extern "C" fn(*mut IbvCq)>,
    pub create_ah: Option<unsafe extern "C" fn(*mut IbvPd, *mut IbvAhAttr) -> *mut IbvAh>,
    pub create_counters: Unused,
    pub create_cq: Option<unsafe extern "C" fn(*mut IbvContext, c_int, *mut IbvCompChannel, c_int) -> *mut IbvCq>,
    pub create_cq_ex: Unused,
    pub create_flow: Unused,
    pub create_flow_action_esp: Unused,
    pub create_qp: Option<unsafe extern "C" fn(*mut IbvPd, *mut IbvQpInitAttr) -> *mut IbvQp>,
    pub create_qp_ex: Unused,
    pub create_rwq_ind_table: Unused,
    pub create_srq: Option<unsafe extern "C" fn(*mut IbvPd, *mut IbvSrqInitAttr) -> *mut IbvSrq>,
    pub create_srq_ex: Unused,
    pub create_wq: Unused,
    pub dealloc_mw: Unused,
    pub dealloc_pd: Option<unsafe extern "C" fn(*mut IbvPd) -> c_int>,
    pub dealloc_td: Unused,
    pub dereg_mr: Option<unsafe extern "C" fn(*mut VerbsMr) -> c_int>,
    pub destroy_ah: Option<unsafe extern "C" fn(*mut IbvAh) -> c_int>,
    pub destroy_counters: Unused,
    pub destroy_cq: Option<unsafe extern "C" fn(*mut IbvCq) -> c_int>,
    pub destroy_flow: Unused,
    pub destroy_flow_action: Unused,
    pub destroy_qp: Option<unsafe extern "C" fn(*mut IbvQp) -> c_int>,
    pub destroy_rwq_ind_table: Unused,
    pub destroy_srq: Option<unsafe extern "C" fn(*mut IbvSrq) -> c_int>,
    pub destroy_wq: Unused,
    pub detach_mcast: Unused,
    pub free_context: Option<unsafe extern "C" fn(*mut IbvContext)>,
    pub free_dm: Unused,
    pub get_srq_num: Unused,
    pub import_dm: Unused,
    pub import_mr: Unused,
    pub import_pd: Unused,
    pub modify_cq: Unused,
    pub modify_flow_action_esp: Unused,
    pub modify_qp: Option<unsafe extern "C" fn(*mut IbvQp, *mut IbvQpAttr, c_int) -> c_int>,
    pub modify_qp_rate_limit: Unused,
    pub modify_srq: Option<unsafe extern "C" fn(*mut IbvSrq, *mut IbvSrqAttr, c_int) -> c_int>,
    pub modify_wq: Unused,
    pub open_qp: Unused,
    pub open_xrcd: Unused,
    pub poll_cq: Option<unsafe extern "C" fn(*mut IbvCq, c_int, *mut IbvWc) -> c_int>,
    pub post_recv: Option<unsafe extern "C" fn(*mut IbvQp, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int>,
    pub post_send: Option<unsafe extern "C" fn(*mut IbvQp, *mut IbvSendWr, *mut *mut IbvSendWr) -> c_int>,
    pub post_srq_ops: Unused,
    pub post_srq_recv: Option<unsafe extern "C" fn(*mut IbvSrq, *mut IbvRecvWr, *mut *mut IbvRecvWr) -> c_int>,
    pub query_device_ex:
        Option<unsafe extern "C" fn(*mut IbvContext, *const c_void, *mut IbvDeviceAttr, usize) -> c_int>,
    pub query_ece: Unused,
    pub query_port: Option<unsafe extern "C" fn(*mut IbvContext, u8, *mut IbvPortAttr) -> c_int>,
    pub query_qp: Option<unsafe extern "C" fn(*mut IbvQp, *mut IbvQpAttr, c_int, *mut IbvQpInitAttr) -> c_int>,
    pub query_qp_data_in_order: Unused,
    pub query_rt_values: Unused,
    pub query_srq: Option<unsafe extern "C" fn(*mut IbvSrq, *mut IbvSrqAttr) -> c_int>,
    pub read_counters: Unused,
    pub reg_dm_mr: Unused,
    pub reg_dmabuf_mr: Unused,
    pub reg_mr: Option<unsafe extern "C" fn(*mut IbvPd, *mut c_void, usize, u64, c_int) -> *mut IbvMr>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut IbvCq, c_int) -> c_int>,
    pub rereg_mr: Unused,
    pub resize_cq: Unused,
    pub set_ece: Unused,
    pub unimport_dm: Unused,
    pub unimport_mr: Unused,
    pub unimport_pd: Unused,
}

// The layouts, as measured from Debian's headers (public structures) and derived from
// rdma-core 44's driver.h (the provider interface), on x86_64.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<IbvDevice>() == 664);
    assert!(size_of::<IbvContext>() == 328);
    assert!(offset_of!(IbvContext, cmd_fd) == 264);
    assert!(offset_of!(IbvContext, mutex) == 280);
    assert!(size_of::<VerbsContext>() == 648);
    assert!(offset_of!(VerbsContext, context) == 320);
    assert!(size_of::<IbvPd>() == 16);
    assert!(size_of::<IbvMr>() == 48);
    assert!(size_of::<VerbsMr>() == 56);
    assert!(size_of::<IbvCompChannel>() == 16);
    assert!(size_of::<IbvCq>() == 128);
    assert!(offset_of!(IbvCq, comp_events_completed) == 120);
    assert!(size_of::<IbvSrq>() == 128);
    assert!(size_of::<VerbsSrq>() == 160);
    assert!(size_of::<IbvQp>() == 160);
    assert!(offset_of!(IbvQp, events_completed) == 152);
    assert!(size_of::<VerbsQp>() == 368);
    assert!(size_of::<IbvAh>() == 24);
    assert!(size_of::<IbvGlobalRoute>() == 24);
    assert!(size_of::<IbvAhAttr>() == 32);
    assert!(size_of::<IbvQpCap>() == 20);
    assert!(size_of::<IbvQpAttr>() == 144);
    assert!(offset_of!(IbvQpAttr, ah_attr) == 56);
    assert!(offset_of!(IbvQpAttr, rate_limit) == 136);
    assert!(size_of::<IbvQpInitAttr>() == 64);
    assert!(size_of::<IbvSrqAttr>() == 12);
    assert!(size_of::<IbvSrqInitAttr>() == 24);
    assert!(size_of::<IbvSge>() == 16);
    assert!(size_of::<IbvSendWr>() == 128);
    assert!(offset_of!(IbvSendWr, wr) == 40);
    assert!(offset_of!(IbvSendWr, qp_type) == 72);
    assert!(size_of::<IbvRecvWr>() == 32);
    assert!(size_of::<IbvWc>() == 48);
    assert!(size_of::<IbvPortAttr>() == 52);
    assert!(size_of::<IbvDeviceAttr>() == 232);
    assert!(offset_of!(IbvDeviceAttr, atomic_cap) == 164);
    assert!(offset_of!(IbvDeviceAttr, phys_port_cnt) == 227);
    assert!(size_of::<VerbsDevice>() == 712);
    assert!(size_of::<VerbsSysfsDev>() == 992);
    assert!(offset_of!(VerbsSysfsDev, ibdev_path) == 176);
    assert!(size_of::<VerbsDeviceOps>() == 72);
    assert!(size_of::<VerbsContextOps>() == 76 * 8);
};

/// The functions of libibverbs a provider calls (its `IBVERBS_PRIVATE_34` interface), found
/// at run time in the libibverbs that loaded the provider rather than bound by the dynamic
/// linker: a program that loads libibverbs privately (`RTLD_LOCAL`, as UCX's `libuct_ib` does)
/// leaves its symbols out of the global scope, where a link-time import would look for them.
pub struct Libibverbs {
    /// Registers a provider (`PROVIDER_DRIVER`'s constructor calls it).
    pub register_driver: RegisterDriver,
    /// Allocates `alloc_size` zeroed bytes (freed with `free`) and initialises the libibverbs
    /// context `context_offset` bytes into them; takes `cmd_fd` (closed on failure). Null on
    /// failure, with errno set.
    pub init_and_alloc_context: InitAndAllocContext,
    /// Undoes the context's initialisation (closes `cmd_fd` and `async_fd`); the memory is the
    /// provider's to free.
    pub uninit_context: UninitContext,
    /// Installs a provider's operations in a context.
    pub set_ops: SetOps,
}

/// `verbs_register_driver_34`.
pub type RegisterDriver = unsafe extern "C" fn(ops: *const VerbsDeviceOps);
/// `_verbs_init_and_alloc_context`: device, cmd_fd, alloc_size, context_offset, driver_id.
pub type InitAndAllocContext = unsafe extern "C" fn(*mut IbvDevice, c_int, usize, usize, u32) -> *mut std::ffi::c_void;
/// `verbs_uninit_context`.
pub type UninitContext = unsafe extern "C" fn(ctx: *mut VerbsContext);
/// `verbs_set_ops`.
pub type SetOps = unsafe extern "C" fn(ctx: *mut VerbsContext, ops: *const VerbsContextOps);

/// libibverbs' functions, when a libibverbs of this ABI is loaded in the process (None when
/// this library was loaded some other way, as by a test).
pub fn libibverbs() -> Option<&'static Libibverbs> {
    static FOUND: std::sync::OnceLock<Option<Libibverbs>> = std::sync::OnceLock::new();
    FOUND.get_or_init(find_libibverbs).as_ref()
}

fn find_libibverbs() -> Option<Libibverbs> {
    // SAFETY: RTLD_NOLOAD only looks up a library already loaded; the name is a C string.
    let handle = unsafe { libc::dlopen(c"libibverbs.so.1".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    let find = |name: &std::ffi::CStr| {
        // SAFETY: a live handle and C strings.
        let f = unsafe { libc::dlvsym(handle, name.as_ptr(), c"IBVERBS_PRIVATE_34".as_ptr()) };
        (!f.is_null()).then_some(f)
    };
    let (register, init, uninit, set_ops) = (
        find(c"verbs_register_driver_34")?,
        find(c"_verbs_init_and_alloc_context")?,
        find(c"verbs_uninit_context")?,
        find(c"verbs_set_ops")?,
    );
    // SAFETY: each symbol of this version has the signature written above (rdma-core's
    // driver.h); the library stays loaded (the NOLOAD handle is never closed).
    unsafe {
        Some(Libibverbs {
            register_driver: std::mem::transmute::<*mut std::ffi::c_void, RegisterDriver>(register),
            init_and_alloc_context: std::mem::transmute::<*mut std::ffi::c_void, InitAndAllocContext>(init),
            uninit_context: std::mem::transmute::<*mut std::ffi::c_void, UninitContext>(uninit),
            set_ops: std::mem::transmute::<*mut std::ffi::c_void, SetOps>(set_ops),
        })
    }
}
