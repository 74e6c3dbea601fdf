//! The VOID rule (SPEC §6), the same in both workloads: a cell in which the loader,
//! not the system, was the limit is never reported as a result of the system.

use crate::cell::Outcome;
use crate::scenario::VoidRule;

/// What the loader did over the rated window, as the rule reads it.
#[derive(Debug, Clone, Copy)]
pub struct LoaderLoad {
    /// Units the pacer skipped because it fell too far behind its schedule.
    pub shed_pacer: u64,
    /// What those units are, for the reason's wording ("events", "messages").
    pub unit: &'static str,
    /// Mean loader cores over the window, and the cores it may use.
    pub cores: f64,
    pub cores_available: f64,
    /// p99 of the schedule lag (hand-over − scheduled instant), ms.
    pub schedule_lag_p99_ms: f64,
    /// Mean share of the host's CPU time the hypervisor stole in the window, if
    /// sampled: a descheduled vCPU runs no pacer, so a lag beside it may be the
    /// host's, not the loader's.
    pub host_steal_frac: Option<f64>,
}

/// Mean CPU steal in the rated window from which a cell's record says so (1 %): a
/// warning, and a clause of the schedule-lag reason. It does not change the outcome.
pub const STEAL_NOTE: f64 = 0.01;

/// The steal worth naming: at least [`STEAL_NOTE`].
pub fn notable_steal(host_steal_frac: Option<f64>) -> Option<f64> {
    host_steal_frac.filter(|f| *f >= STEAL_NOTE)
}

/// Every reason the cell is VOID, one sentence each; empty when it is not.
pub fn reasons(rule: &VoidRule, load: &LoaderLoad) -> Vec<String> {
    let mut r = Vec::new();
    if load.shed_pacer > 0 {
        r.push(format!(
            "the pacer fell more than {} scheduled sends behind and skipped {} {} (loader could not hold the schedule)",
            crate::pacing::pacer::CATCH_UP_CAP,
            load.shed_pacer,
            load.unit
        ));
    }
    let fraction = load.cores / load.cores_available;
    if fraction > rule.loader_cpu_max {
        // Whole cores as such ("of 2 cores"); a CPU quota with its decimals.
        let avail = if load.cores_available.fract() == 0.0 {
            format!("{:.0}", load.cores_available)
        } else {
            format!("{:.2}", load.cores_available)
        };
        r.push(format!(
            "loader used {:.2} of {avail} cores ({:.0}% > {:.0}% allowed)",
            load.cores,
            100.0 * fraction,
            100.0 * rule.loader_cpu_max
        ));
    }
    let lag_max_ms = rule.schedule_lag_p99_max.secs_f64() * 1000.0;
    if load.schedule_lag_p99_ms > lag_max_ms {
        let steal = match notable_steal(load.host_steal_frac) {
            Some(f) => format!(
                "; the hypervisor stole {:.1} % of the host's CPU time meanwhile",
                100.0 * f
            ),
            None => String::new(),
        };
        r.push(format!(
            "schedule lag p99 {:.2} ms > {:.2} ms allowed (void.schedule_lag_p99_max){steal}",
            load.schedule_lag_p99_ms, lag_max_ms
        ));
    }
    r
}

/// The outcome: a correctness failure (or a broken accounting identity) is FAIL
/// whatever else happened; otherwise any VOID reason makes it VOID.
pub fn outcome(verdict_pass: bool, identity_holds: bool, void_reasons: &[String]) -> Outcome {
    if !verdict_pass || !identity_holds {
        Outcome::Fail
    } else if !void_reasons.is_empty() {
        Outcome::Void
    } else {
        Outcome::Pass
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Dur;
    use std::time::Duration;

    fn load() -> LoaderLoad {
        LoaderLoad {
            shed_pacer: 0,
            unit: "events",
            cores: 0.5,
            cores_available: 2.0,
            schedule_lag_p99_ms: 1.0,
            host_steal_frac: None,
        }
    }

    #[test]
    fn each_limit_gives_its_reason() {
        let rule = VoidRule {
            loader_cpu_max: 0.7,
            schedule_lag_p99_max: Dur(Duration::from_millis(5)),
        };
        assert!(reasons(&rule, &load()).is_empty());
        let r = reasons(
            &rule,
            &LoaderLoad {
                shed_pacer: 3,
                cores: 1.6,
                schedule_lag_p99_ms: 9.0,
                ..load()
            },
        );
        assert_eq!(r.len(), 3, "{r:?}");
        assert!(r[0].contains("skipped 3 events"), "{r:?}");
        assert!(r[1].contains("80% > 70%"), "{r:?}");
        assert!(r[2].contains("9.00 ms > 5.00 ms"), "{r:?}");
    }

    #[test]
    fn a_schedule_lag_names_the_steal_from_one_percent() {
        let rule = VoidRule {
            loader_cpu_max: 0.7,
            schedule_lag_p99_max: Dur(Duration::from_millis(5)),
        };
        let lagging = |steal| LoaderLoad {
            schedule_lag_p99_ms: 9.0,
            host_steal_frac: steal,
            ..load()
        };
        let r = reasons(&rule, &lagging(Some(0.034)));
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(
            r[0].ends_with("stole 3.4 % of the host's CPU time meanwhile"),
            "{r:?}"
        );
        for quiet in [None, Some(0.009)] {
            let r = reasons(&rule, &lagging(quiet));
            assert!(!r[0].contains("stole"), "{r:?}");
        }
        // Steal alone makes nothing VOID.
        let r = reasons(
            &rule,
            &LoaderLoad {
                host_steal_frac: Some(0.5),
                ..load()
            },
        );
        assert!(r.is_empty(), "{r:?}");
    }

    #[test]
    fn failure_outranks_void() {
        let v = vec!["x".to_string()];
        assert_eq!(outcome(false, true, &v), Outcome::Fail);
        assert_eq!(outcome(true, false, &[]), Outcome::Fail);
        assert_eq!(outcome(true, true, &v), Outcome::Void);
        assert_eq!(outcome(true, true, &[]), Outcome::Pass);
    }
}
