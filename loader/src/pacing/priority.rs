//! Pacer threads ask for a higher scheduling priority, so the stages they feed (and,
//! on a shared machine, the system under test) cannot delay the schedule itself.
//!
//! First choice: SCHED_FIFO at a low real-time priority. A pacer always sleeps at
//! least 250 µs between wake-ups and does bounded work per wake-up, so it can never
//! monopolise a core. Fallback: nice −10. Both need root or CAP_SYS_NICE; without it
//! the pacer runs at normal priority, and the cell's result says which one it got.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

static GOT: AtomicU8 = AtomicU8::new(0);
/// Set when a pacer ran as a task on the runtime's timer (no thread to raise).
static AS_TASK: AtomicBool = AtomicBool::new(false);

/// Real-time priority asked for (1 = lowest, 99 = highest).
pub const PACER_FIFO_PRIORITY: i32 = 10;
/// Nice value asked for when real-time scheduling is refused.
pub const PACER_NICE: i32 = -10;

/// Raise the calling thread's scheduling priority. Returns what it got.
pub fn raise_current_thread() -> &'static str {
    // SAFETY: gettid has no preconditions. sched_setscheduler and setpriority with the
    // calling thread's id only change that thread's scheduling and report failure
    // through their return value; `param` lives across the call.
    let got = unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::pid_t;
        let param = libc::sched_param {
            sched_priority: PACER_FIFO_PRIORITY,
        };
        if libc::sched_setscheduler(tid, libc::SCHED_FIFO, &param) == 0 {
            2
        } else if libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, PACER_NICE) == 0 {
            1
        } else {
            0
        }
    };
    GOT.fetch_max(got, Ordering::Relaxed);
    name(got)
}

fn name(level: u8) -> &'static str {
    match level {
        2 => "fifo",
        1 => "nice",
        _ => "normal",
    }
}

/// Forget what earlier cells' pacers got: called as each cell starts, so the cells of
/// a campaign, run one after another in one process, each report their own pacers.
/// (The record is process-wide: cells run at once in one process, as the in-process
/// tests run them, share it.)
pub fn forget() {
    GOT.store(0, Ordering::Relaxed);
    AS_TASK.store(false, Ordering::Relaxed);
}

/// Note that a pacer runs as a task of the runtime (`stream.push.pacer: runtime`).
pub fn note_task_pacer() {
    AS_TASK.store(true, Ordering::Relaxed);
}

/// The best priority any pacer thread got: `fifo`, `nice` or `normal`; `task` when
/// no pacer had a thread of its own because they ran on the runtime's timer.
pub fn pacer_priority() -> &'static str {
    let got = GOT.load(Ordering::Relaxed);
    if got == 0 && AS_TASK.load(Ordering::Relaxed) {
        return "task";
    }
    name(got)
}
