//! How far a loader's clock may be from true time, and which host it is on.
//!
//! Cross-host end-to-end latency is one host's reading minus another's, so it is only
//! as good as the two clocks. Each loader records a bound on its clock's offset at the
//! start and at the end of the cell: from chrony (`chronyc -c tracking`: |system time
//! offset| + root delay / 2 + root dispersion) when chrony answers, else from the
//! kernel's NTP state (`ntp_adjtime`: the maximum error, when a time daemon keeps the
//! kernel synchronised), else "unknown". Loaders on one host (one boot of one kernel)
//! share its clock, so their readings compare exactly whatever the bound.

#![allow(unsafe_code)]

use serde::{Deserialize, Serialize};

/// A bound on `|this host's clock − true time|`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockBound {
    /// `chrony`, `kernel` or `unknown`.
    pub source: String,
    /// The bound in µs; `None` when unknown (no time daemon, or not synchronised).
    pub offset_bound_us: Option<u64>,
    /// What the source said, in a few words.
    pub detail: String,
}

impl ClockBound {
    pub fn unknown(detail: impl Into<String>) -> ClockBound {
        ClockBound {
            source: "unknown".into(),
            offset_bound_us: None,
            detail: detail.into(),
        }
    }

    /// Read the bound now (chrony, then the kernel). Blocking: from async code use
    /// [`ClockBound::read_off_runtime`].
    pub fn read() -> ClockBound {
        if let Some(b) = chrony() {
            return b;
        }
        kernel()
    }

    /// [`ClockBound::read`] on the runtime's blocking pool, so a slow `chronyc` never
    /// holds a worker.
    pub async fn read_off_runtime() -> ClockBound {
        tokio::task::spawn_blocking(ClockBound::read)
            .await
            .unwrap_or_else(|e| ClockBound::unknown(format!("reading the clock failed: {e}")))
    }
}

/// How long chrony has to answer before its bound is taken as unknown.
pub const CHRONYC_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// The bound from `chronyc -c tracking`, when chrony is there and answers within
/// [`CHRONYC_TIMEOUT`] (a hung chronyd must not hold a loader's start).
fn chrony() -> Option<ClockBound> {
    use std::io::Read as _;
    let mut child = std::process::Command::new("chronyc")
        .args(["-c", "tracking"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + CHRONYC_TIMEOUT;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    };
    if !status.success() {
        return None;
    }
    let mut text = String::new();
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    parse_chrony(&text)
}

/// `chronyc -c tracking`: ref id, name, stratum, ref time, system time offset (s),
/// last offset, RMS offset, frequency, residual frequency, skew, root delay (s), root
/// dispersion (s), update interval, leap status.
pub fn parse_chrony(csv: &str) -> Option<ClockBound> {
    let f: Vec<&str> = csv.trim().split(',').collect();
    if f.len() < 14 {
        return None;
    }
    let num = |i: usize| f[i].trim().parse::<f64>().ok();
    let leap = f[13].trim();
    if leap.eq_ignore_ascii_case("Not synchronised") {
        return Some(ClockBound {
            source: "chrony".into(),
            offset_bound_us: None,
            detail: "chrony: not synchronised".into(),
        });
    }
    let (offset, delay, dispersion) = (num(4)?, num(10)?, num(11)?);
    let bound = offset.abs() + delay / 2.0 + dispersion;
    Some(ClockBound {
        source: "chrony".into(),
        offset_bound_us: Some((bound * 1e6).ceil() as u64),
        detail: format!(
            "chrony: offset {:.1} µs, root delay {:.1} µs, root dispersion {:.1} µs, source {}",
            offset * 1e6,
            delay * 1e6,
            dispersion * 1e6,
            f[1].trim()
        ),
    })
}

/// The kernel's NTP state: synchronised or not, and its maximum error.
fn kernel() -> ClockBound {
    // SAFETY: `ntp_adjtime` with `modes = 0` only reads the kernel's state into the
    // zeroed struct we own.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    tx.modes = 0;
    let state = unsafe { libc::ntp_adjtime(&mut tx) };
    kernel_bound(state, tx.status, tx.maxerror as i64)
}

/// What `ntp_adjtime`'s answer means for the bound.
pub fn kernel_bound(state: i32, status: i32, maxerror_us: i64) -> ClockBound {
    if state < 0 {
        return ClockBound::unknown("no time daemon answered (ntp_adjtime failed)");
    }
    if state == libc::TIME_ERROR || status & libc::STA_UNSYNC != 0 {
        return ClockBound::unknown(
            "the kernel's clock is not synchronised by a time daemon (STA_UNSYNC)",
        );
    }
    ClockBound {
        source: "kernel".into(),
        offset_bound_us: Some(maxerror_us.max(0) as u64),
        detail: format!("kernel NTP state: synchronised, maximum error {maxerror_us} µs"),
    }
}

/// Which host a loader is on: two loaders with the same boot id read the same clock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderHost {
    pub hostname: String,
    /// `/proc/sys/kernel/random/boot_id` (one per boot of a kernel).
    pub boot_id: String,
    pub pid: u32,
}

impl LoaderHost {
    pub fn this() -> LoaderHost {
        LoaderHost {
            hostname: crate::record::host::hostname(),
            boot_id: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .map(|s| s.trim().to_string())
                .unwrap_or_default(),
            pid: std::process::id(),
        }
    }

    /// Whether `other` reads the same clock as this host.
    pub fn same_clock(&self, other: &LoaderHost) -> bool {
        if self.boot_id.is_empty() || other.boot_id.is_empty() {
            return self.hostname == other.hostname;
        }
        self.boot_id == other.boot_id
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chrony_bounds() {
        let synced = "A29FC87B,time.example,3,1764720000.1,0.000012,0.000001,0.000030,1.2,0.0,0.01,0.004,0.0005,64.0,Normal\n";
        let b = parse_chrony(synced).unwrap();
        assert_eq!(b.source, "chrony");
        // 12 + 4000 / 2 + 500 = 2512 µs.
        assert_eq!(b.offset_bound_us, Some(2512));
        let lost = "7F7F0101,,0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,0.0,Not synchronised\n";
        assert_eq!(parse_chrony(lost).unwrap().offset_bound_us, None);
        assert!(parse_chrony("garbage").is_none());
    }

    #[test]
    fn kernel_bounds() {
        assert_eq!(
            kernel_bound(libc::TIME_OK, 0, 1500).offset_bound_us,
            Some(1500)
        );
        assert_eq!(
            kernel_bound(libc::TIME_OK, libc::STA_UNSYNC, 1500).offset_bound_us,
            None
        );
        assert_eq!(
            kernel_bound(libc::TIME_ERROR, 0, 1500).offset_bound_us,
            None
        );
        assert_eq!(kernel_bound(-1, 0, 0).source, "unknown");
        // Whatever this machine says, reading it does not fail.
        let _ = ClockBound::read();
    }

    #[test]
    fn hosts_compare_by_boot() {
        let a = LoaderHost::this();
        let mut b = a.clone();
        b.pid += 1;
        assert!(a.same_clock(&b));
        b.boot_id = "another".into();
        assert!(!a.same_clock(&b));
    }
}
