//! Does this machine stall a busy guest? A few seconds with every core kept busy and
//! one more thread timing 1 ms sleeps: how late each wakeup came, how often it was
//! late by a stall (a whole-machine pause, as a hypervisor's CPU quota or a
//! neighbour's burst makes), and the steal `/proc/stat` counted meanwhile.
//!
//! Why a campaign asks first: a cell that keeps both cores busy is VOID when its
//! pacer's schedule lag p99 passes `void.schedule_lag_p99_max` (5 ms), and on a
//! host that freezes the guest for up to 100 ms every few seconds most such cells
//! are (measured on 2026-12-05: 11 of the first 17 cells of the findings campaign
//! VOID, schedule lag max 93–101 ms, where the same campaign on a quiet host had 1 in
//! 100). The probe takes seconds and says so before the hours start; it never
//! refuses: the user decides, and the record keeps what it saw.
//!
//! The judgement ([`StallProbe::from_lateness`], [`StallProbe::warning`]) is pure
//! and tested on made-up series; [`probe`] only measures.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use crate::record::invocation::utc;

/// A wakeup later than this is a stall: twice the VOID rule's default lag limit,
/// well above what a loaded but unthrottled guest shows (a quiet 2-core guest's
/// worst wakeup over 14 s with both cores busy: 4.2 ms).
pub const STALL_MS: f64 = 10.0;

/// Share of the probe's time spent in stalls above which a campaign is warned. A
/// cell's schedule-lag p99 passes the 5 ms limit once about 1 % of its sends fall
/// inside stalls; half of that is the warning.
pub const WARN_STALLED_FRACTION: f64 = 0.005;

/// What one probe saw (`campaign.json`'s `host_probes`, `crossbench selftest stalls`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StallProbe {
    /// When it ended (UTC).
    pub utc: String,
    /// How long it ran.
    pub seconds: f64,
    /// Threads kept busy beside the timing thread (one per core).
    pub busy_threads: usize,
    /// 1 ms sleeps timed.
    pub wakeups: u64,
    pub late_p50_ms: f64,
    pub late_p99_ms: f64,
    pub late_max_ms: f64,
    /// Wakeups late by more than [`STALL_MS`].
    pub stalls: u64,
    /// Their lateness summed, over the probe's time.
    pub stalled_fraction: f64,
    /// Steal over the probe, from `/proc/stat` (None where it cannot be read).
    pub steal_fraction: Option<f64>,
}

impl StallProbe {
    /// The summary of a probe's wakeup lateness (ms, any order) over `seconds`, the
    /// probe having ended at `utc`.
    pub fn from_lateness(
        utc: String,
        mut late_ms: Vec<f64>,
        seconds: f64,
        busy_threads: usize,
        steal_fraction: Option<f64>,
    ) -> StallProbe {
        late_ms.retain(|v| v.is_finite());
        late_ms.sort_by(f64::total_cmp);
        let q = |p: f64| -> f64 {
            if late_ms.is_empty() {
                return 0.0;
            }
            let i = ((late_ms.len() as f64 * p).ceil() as usize).clamp(1, late_ms.len()) - 1;
            late_ms[i]
        };
        let stalled: Vec<f64> = late_ms.iter().copied().filter(|&v| v > STALL_MS).collect();
        // A fold from +0.0: `sum` of nothing is -0.0, printed "-0.00 %".
        let stalled_ms = stalled.iter().fold(0.0, |acc, v| acc + v);
        StallProbe {
            utc,
            seconds,
            busy_threads,
            wakeups: late_ms.len() as u64,
            late_p50_ms: q(0.50),
            late_p99_ms: q(0.99),
            late_max_ms: late_ms.last().copied().unwrap_or(0.0),
            stalls: stalled.len() as u64,
            stalled_fraction: if seconds > 0.0 {
                stalled_ms / (seconds * 1000.0)
            } else {
                0.0
            },
            steal_fraction,
        }
    }

    /// One line of what the probe saw.
    pub fn describe(&self) -> String {
        let steal = match self.steal_fraction {
            Some(s) => format!("; steal {:.1} %", s * 100.0),
            None => String::new(),
        };
        format!(
            "host probe, {:.0} s with {} core(s) busy: 1 ms sleeps woke late by p50 {:.2} ms, p99 {:.2} ms, max {:.1} ms; {} stall(s) over {STALL_MS:.0} ms, {:.2} % of the time{steal}",
            self.seconds,
            self.busy_threads,
            self.late_p50_ms,
            self.late_p99_ms,
            self.late_max_ms,
            self.stalls,
            self.stalled_fraction * 100.0,
        )
    }

    /// A warning when the host stalled long enough to make busy cells VOID.
    pub fn warning(&self) -> Option<String> {
        if self.stalled_fraction < WARN_STALLED_FRACTION {
            return None;
        }
        Some(format!(
            "this host stalled the whole machine for {:.2} % of the probe (up to {:.0} ms at once): cells that keep every core busy will likely be VOID by schedule lag (void.schedule_lag_p99_max); the outcomes will say so. A quieter machine, or a later hour, gives valid cells",
            self.stalled_fraction * 100.0,
            self.late_max_ms
        ))
    }
}

/// Keep every core busy for `dur` while a thread times 1 ms sleeps; summarise.
pub fn probe(dur: Duration) -> StallProbe {
    let busy_threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stop = Arc::new(AtomicBool::new(false));
    let burners: Vec<_> = (0..busy_threads)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x: u64 = 1;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    }
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    let before = sampler::host_cpu_ticks();
    let start = Instant::now();
    let tick = Duration::from_millis(1);
    let mut late = Vec::with_capacity(dur.as_millis() as usize + 1);
    while start.elapsed() < dur {
        let t = Instant::now();
        std::thread::sleep(tick);
        let took = t.elapsed().saturating_sub(tick);
        late.push(took.as_secs_f64() * 1000.0);
    }
    let seconds = start.elapsed().as_secs_f64();
    let after = sampler::host_cpu_ticks();
    stop.store(true, Ordering::Relaxed);
    for b in burners {
        let _ = b.join();
    }
    let steal = match (before, after) {
        (Some((s0, t0)), Some((s1, t1))) if t1 > t0 && s1 >= s0 => {
            Some((s1 - s0) as f64 / (t1 - t0) as f64)
        }
        _ => None,
    };
    StallProbe::from_lateness(utc(SystemTime::now()), late, seconds, busy_threads, steal)
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "2026-12-05T00:49:00Z";

    /// 10 s of 1 ms sleeps that woke 0.1 ms late, except where the machine froze:
    /// a freeze of `freeze_ms` every `every_s` seconds makes one wakeup that late.
    fn series(freeze_ms: f64, every_s: f64) -> Vec<f64> {
        let mut v = Vec::new();
        let mut t = 0.0;
        let mut next = every_s * 1000.0;
        while t < 10_000.0 {
            if t >= next {
                v.push(freeze_ms);
                t += freeze_ms + 1.0;
                next += every_s * 1000.0;
            } else {
                v.push(0.1);
                t += 1.1;
            }
        }
        v
    }

    #[test]
    fn a_throttled_host_is_warned_of() {
        // What this session's host did: 100 ms freezes every few seconds.
        let p = StallProbe::from_lateness(T.into(), series(100.0, 7.0), 10.0, 2, Some(0.035));
        assert_eq!(p.stalls, 1);
        assert!((p.late_max_ms - 100.0).abs() < 1e-9);
        assert!((p.stalled_fraction - 0.01).abs() < 1e-9, "{p:?}");
        let w = p.warning().expect("1 % of the time frozen is warned of");
        assert!(w.contains("1.00 %") && w.contains("100 ms"), "{w}");
    }

    #[test]
    fn a_quiet_host_is_not() {
        let p = StallProbe::from_lateness(T.into(), series(4.0, 1.0), 10.0, 2, Some(0.0));
        assert_eq!(p.stalls, 0, "4 ms is no stall");
        assert_eq!(p.stalled_fraction, 0.0);
        assert!(
            p.describe().contains(" 0.00 % of the time"),
            "{}",
            p.describe()
        );
        assert!(p.warning().is_none(), "{p:?}");
        assert!((p.late_p50_ms - 0.1).abs() < 1e-9);
    }

    #[test]
    fn one_short_stall_stays_under_the_warning() {
        // One 20 ms stall in 10 s is 0.2 % of the time: counted, not warned of.
        let p = StallProbe::from_lateness(T.into(), series(20.0, 9.0), 10.0, 2, None);
        assert_eq!(p.stalls, 1);
        assert!(p.warning().is_none(), "{p:?}");
        assert!(
            p.describe().contains("1 stall(s) over 10 ms"),
            "{}",
            p.describe()
        );
    }

    #[test]
    fn nothing_timed_is_no_stall_and_no_panic() {
        let p = StallProbe::from_lateness(T.into(), vec![f64::NAN], 0.0, 1, None);
        assert_eq!(p.wakeups, 0);
        assert_eq!(p.late_max_ms, 0.0);
        assert!(p.warning().is_none());
    }
}
