//! The only place that calls into libc. Both values are constant for the
//! life of the process, so they are read once and cached.
#![allow(unsafe_code)]

use std::sync::OnceLock;

/// Clock ticks per second used by `/proc/<pid>/stat` and `/proc/stat` (USER_HZ).
pub(crate) fn clk_tck() -> f64 {
    static V: OnceLock<f64> = OnceLock::new();
    *V.get_or_init(|| {
        // SAFETY: sysconf only reads a configuration constant; it takes no
        // pointers and has no preconditions.
        let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if v > 0 {
            v as f64
        } else {
            100.0
        }
    })
}

/// Page size in bytes (for `/proc/<pid>/statm`).
pub(crate) fn page_size() -> u64 {
    static V: OnceLock<u64> = OnceLock::new();
    *V.get_or_init(|| {
        // SAFETY: as above, a side-effect-free query of a constant.
        let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if v > 0 {
            v as u64
        } else {
            4096
        }
    })
}
