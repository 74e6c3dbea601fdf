//! The runtime a cell runs in: a multi-thread tokio runtime with a worker per core
//! (or the scenario's `threads`), or, under virtual time (tests), a current-thread
//! runtime whose clock is paused and auto-advanced.

use anyhow::Context;

use crate::pacing::pacer::Timing;

/// The runtime a cell runs in: `threads` workers (0 = one per core), or virtual time.
pub fn runtime(threads: u64, timing: Timing) -> anyhow::Result<tokio::runtime::Runtime> {
    let rt = match timing {
        Timing::Real => {
            let threads = match threads {
                0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
                n => n as usize,
            };
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .enable_all()
                .build()
        }
        Timing::Virtual => virtual_runtime(),
    };
    rt.context("starting the runtime")
}

/// A current-thread runtime whose time is paused and auto-advanced (tests).
#[cfg(any(test, feature = "virtual-time"))]
pub fn virtual_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
}

/// Virtual time is not in this build.
#[cfg(not(any(test, feature = "virtual-time")))]
pub fn virtual_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    Err(std::io::Error::other(
        "virtual time needs the `virtual-time` feature (tests only)",
    ))
}
