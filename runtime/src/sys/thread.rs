//! Per-thread settings.

use std::io;

/// Sets the calling thread's timer slack to 1 ns, so its sleeps end as precisely as the kernel
/// allows (the default slack is 50 us).
pub fn precise_timers() -> io::Result<()> {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes a plain integer.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Puts the calling thread (and what it executes or starts later) under the idle scheduling
/// policy: it runs only when no thread of a normal policy wants the CPU, and a normal thread
/// that wakes takes the CPU from it at once.
pub fn idle_policy() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: a valid sched_param for the calling thread (pid 0).
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The CPUs the calling thread may run on, in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data, zero is an empty set; the call fills the live set of the
    // size passed.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        set
    };
    // SAFETY: CPU_ISSET reads the live set at an index below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Binds the calling thread to CPU `cpu`: the scheduler no longer moves it.
pub fn pin_to(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data, zero is an empty set; CPU_SET writes one bit of it (the
    // libc macro bounds-checks), and the call reads the live set of the size passed.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
