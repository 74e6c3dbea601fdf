//! Pacer threads ask for a higher scheduling priority, so the stages they feed (and,
//! on a shared machine, the system under test) cannot delay the schedule itself.
//! Needs root or CAP_SYS_NICE; without it the pacer runs at normal priority and the
//! result says so.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};

static RAISED: AtomicBool = AtomicBool::new(false);

/// Nice value the pacer threads ask for.
pub const PACER_NICE: i32 = -10;

/// Lower the calling thread's nice value (Linux: per thread). Returns success.
pub fn raise_current_thread() -> bool {
    // SAFETY: gettid has no preconditions; setpriority(PRIO_PROCESS, tid, n) only changes
    // the scheduling priority of the calling thread and reports failure through its
    // return value. No memory is shared with the kernel.
    let ok = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, PACER_NICE) == 0
    };
    if ok {
        RAISED.store(true, Ordering::Relaxed);
    }
    ok
}

/// Did any pacer thread get its higher priority?
pub fn pacer_priority_raised() -> bool {
    RAISED.load(Ordering::Relaxed)
}
