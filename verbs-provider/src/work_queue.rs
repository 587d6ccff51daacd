//! Writing work requests into a queue the NIC reads (a QP's send or receive queue, an SRQ): an
//! entry is written at the producer's counter, then published by moving it on.

use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use intlab_nic_channel::entry::{self, MAX_SGE, RECV_WQE_LEN, RecvEntry};
use intlab_nic_channel::queue::Queue;

use crate::abi::{IbvRecvWr, IbvSge};
use crate::memory::Shared;

/// The scatter/gather entries of a work request, checked.
pub(crate) unsafe fn sges(list: *const IbvSge, n: c_int) -> Result<([entry::Sge; MAX_SGE], u8), i32> {
    if n < 0 || n as usize > MAX_SGE || (n > 0 && list.is_null()) {
        return Err(libc::EINVAL);
    }
    let mut out = [entry::Sge::default(); MAX_SGE];
    for (i, o) in out.iter_mut().enumerate().take(n as usize) {
        // The caller gave `n` entries there.
        let s = unsafe { list.add(i).read() };
        *o = entry::Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        };
    }
    Ok((out, n as u8))
}

/// Free entries of a queue: what the NIC has not yet taken is still in use.
pub(crate) fn room(q: &Queue<Arc<Shared>>) -> u64 {
    let used = q
        .producer()
        .load(Ordering::Relaxed)
        .wrapping_sub(q.consumer().load(Ordering::Acquire));
    u64::from(q.entries()).saturating_sub(used)
}

/// Writes one entry at the producer's counter and publishes it.
pub(crate) fn publish(q: &Queue<Arc<Shared>>, buf: &[u8]) {
    let p = q.producer().load(Ordering::Relaxed);
    q.write(p, buf);
    q.producer().store(p.wrapping_add(1), Ordering::Release);
}

/// Writes receive requests into `queue` (a QP's or an SRQ's); the errno of the first refused.
pub(crate) unsafe fn post_receives(
    queue: &Queue<Arc<Shared>>,
    wr: *mut IbvRecvWr,
    bad: *mut *mut IbvRecvWr,
) -> (c_int, usize) {
    let mut buf = Vec::with_capacity(RECV_WQE_LEN);
    let mut cur = wr;
    let mut posted = 0;
    let mut err = 0;
    while let Some(w) = unsafe { cur.as_ref() } {
        if room(queue) == 0 {
            err = libc::ENOMEM;
            break;
        }
        match unsafe { sges(w.sg_list, w.num_sge) } {
            Ok((sges, num_sge)) => {
                RecvEntry {
                    wr_id: w.wr_id,
                    sges,
                    num_sge,
                }
                .encode(&mut buf);
                publish(queue, &buf);
                posted += 1;
            }
            Err(e) => {
                err = e;
                break;
            }
        }
        cur = w.next;
    }
    if err != 0 && !bad.is_null() {
        unsafe { *bad = cur };
    }
    (err, posted)
}
