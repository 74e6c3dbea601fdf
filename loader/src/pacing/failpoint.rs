//! A test's failpoint in the pacer: `CROSSBENCH_PACER_FAILPOINT=stall:<at>:<for>` makes
//! every pacer of the cell release nothing from `<at>` after paced traffic starts until
//! `<at> + <for>`, as a loader whose pacer thread was descheduled that long would. On
//! its next step the pacer owes `<for> × rate` slots at once, and past
//! [`CATCH_UP_CAP`](crate::pacing::pacer::CATCH_UP_CAP) it skips the excess.
//!
//! Tests use it to make "the loader could not hold its schedule" happen on any machine,
//! however fast its cores: asking for a rate beyond the machine's reach falls behind on
//! a slow machine and not on a fast one (`loader/tests/pipeline_mem.rs`,
//! `loader/tests/drain_and_void.rs`). Unset, nothing changes; a cell run with it says so
//! on stderr, and the stall it causes is counted like any other (pacer shed, schedule
//! lag), so the cell is VOID by the same rule.

use std::time::Duration;

/// The environment variable the failpoint is read from.
pub const VAR: &str = "CROSSBENCH_PACER_FAILPOINT";

/// One stall of the pacer: no slot is released in `[at, at + len)` after the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall {
    pub at: Duration,
    pub len: Duration,
}

impl Stall {
    /// Parse `stall:<at>:<for>` (durations as in a scenario: `1s`, `250ms`).
    pub fn parse(s: &str) -> Result<Stall, String> {
        let bad = || format!("{VAR}={s:?}: expected stall:<at>:<for>, e.g. stall:1s:1s");
        let mut parts = s.split(':');
        if parts.next() != Some("stall") {
            return Err(bad());
        }
        let (Some(at), Some(len), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad());
        };
        let dur = |x: &str| humantime::parse_duration(x).map_err(|_| bad());
        Ok(Stall {
            at: dur(at)?,
            len: dur(len)?,
        })
    }

    /// The failpoint of this process, if set. A value that does not parse is a test's
    /// mistake: it is said on stderr and ignored.
    pub fn from_env() -> Option<Stall> {
        let v = std::env::var(VAR).ok()?;
        match Stall::parse(&v) {
            Ok(s) => {
                eprintln!(
                    "warning: {VAR}: every pacer stalls for {:?} at {:?} after the start, on purpose (a test's failpoint)",
                    s.len, s.at
                );
                Some(s)
            }
            Err(e) => {
                eprintln!("warning: {e}; ignored");
                None
            }
        }
    }

    /// Whether the pacer is stalled at `elapsed`, and if so when it may step again.
    pub fn holds(&self, elapsed: Duration) -> Option<Duration> {
        let end = self.at + self.len;
        (elapsed >= self.at && elapsed < end).then_some(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let s = Stall::parse("stall:1s:250ms").unwrap();
        assert_eq!(s.at, Duration::from_secs(1));
        assert_eq!(s.len, Duration::from_millis(250));
        for bad in [
            "",
            "stall",
            "stall:1s",
            "stall:1s:2s:3s",
            "sleep:1s:1s",
            "stall:x:1s",
        ] {
            assert!(Stall::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn holds_only_inside_its_window() {
        let s = Stall::parse("stall:1s:1s").unwrap();
        assert_eq!(s.holds(Duration::from_millis(999)), None);
        assert_eq!(
            s.holds(Duration::from_secs(1)),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            s.holds(Duration::from_millis(1999)),
            Some(Duration::from_secs(2))
        );
        assert_eq!(s.holds(Duration::from_secs(2)), None);
    }
}
