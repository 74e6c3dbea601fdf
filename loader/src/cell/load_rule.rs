//! Whether a cell held its load: the second verdict of every cell, beside
//! correctness. A cell that served a fifth of its demand, failed most of its
//! publishes or ran out of drain time did not hold its load, whatever its checker
//! says about what it did deliver.

use crate::cell::drain::DrainEnd;
pub use crate::record::result::LoadVerdict;
use crate::scenario::HeldRule;

/// What the rule reads.
#[derive(Debug, Clone, Copy)]
pub struct LoadFacts {
    /// Share of the demand served while the rated window ran.
    pub served_in_window: f64,
    /// Units (events, messages) whose publish was given up, and shed at the
    /// publishers' queues.
    pub failed: u64,
    pub shed: u64,
    pub unit: &'static str,
    /// How the drain ended: cut short at its deadline, unreachable (the system failing
    /// every answer) and stalled (nothing moving while the system still held messages)
    /// are each a reason.
    pub drain: DrainEnd,
}

/// Judge the load.
pub fn verdict(rule: &HeldRule, f: &LoadFacts) -> LoadVerdict {
    let mut reasons = Vec::new();
    if f.served_in_window < rule.served {
        reasons.push(format!(
            "served {:.1} % of the demand in the rated window (held.served: {:.1} %)",
            100.0 * f.served_in_window,
            100.0 * rule.served
        ));
    }
    if f.failed > 0 {
        reasons.push(format!(
            "{} {} failed: the system did not accept them before their publish_deadline or the drain's deadline",
            f.failed, f.unit
        ));
    }
    if f.shed > 0 {
        reasons.push(format!(
            "{} {} shed: the publishers' queues were full",
            f.shed, f.unit
        ));
    }
    match f.drain {
        DrainEnd::Unreachable => reasons.push(
            "the drain ended with the system unreachable (nothing delivered, errors only): what it still held could not be delivered nor judged".into(),
        ),
        DrainEnd::Stalled => reasons.push(
            "the drain ended with the consumers stalled (nothing delivered for its grace while the system still held messages for them)".into(),
        ),
        DrainEnd::CutShort => {
            reasons.push("the drain was cut short at its deadline with messages still moving".into())
        }
        DrainEnd::CaughtUp | DrainEnd::Grace => {}
    }
    let held = reasons.is_empty();
    LoadVerdict {
        verdict: if held { "HELD" } else { "NOT-HELD" },
        held,
        reasons,
        served_in_window: f.served_in_window,
        served_min: rule.served,
        exploratory: rule.exploratory,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> LoadFacts {
        LoadFacts {
            served_in_window: 1.0,
            failed: 0,
            shed: 0,
            unit: "events",
            drain: DrainEnd::CaughtUp,
        }
    }

    #[test]
    fn each_shortfall_gives_its_reason() {
        let rule = HeldRule::default();
        let v = verdict(&rule, &facts());
        assert!(v.held && v.reasons.is_empty());
        assert_eq!(v.verdict, "HELD");
        let v = verdict(
            &rule,
            &LoadFacts {
                served_in_window: 0.226,
                failed: 12366,
                shed: 3,
                drain: DrainEnd::CutShort,
                ..facts()
            },
        );
        assert_eq!(v.verdict, "NOT-HELD");
        assert_eq!(v.reasons.len(), 4, "{:?}", v.reasons);
        assert!(v.reasons[0].contains("22.6 %"), "{:?}", v.reasons);
        assert!(
            v.reasons[1].contains("12366 events failed"),
            "{:?}",
            v.reasons
        );
        let v = verdict(
            &rule,
            &LoadFacts {
                drain: DrainEnd::Stalled,
                ..facts()
            },
        );
        assert!(!v.held);
        assert_eq!(v.reasons.len(), 1, "{:?}", v.reasons);
        assert!(v.reasons[0].contains("stalled"), "{:?}", v.reasons);
    }

    /// A drain that did not finish its work (cut short, unreachable, stalled) is a
    /// reason of its own; caught up or ended by its grace is none.
    #[test]
    fn every_unfinished_drain_end_is_a_reason() {
        let rule = HeldRule::default();
        for (drain, held) in [
            (DrainEnd::CaughtUp, true),
            (DrainEnd::Grace, true),
            (DrainEnd::CutShort, false),
            (DrainEnd::Unreachable, false),
            (DrainEnd::Stalled, false),
        ] {
            let v = verdict(&rule, &LoadFacts { drain, ..facts() });
            assert_eq!(v.held, held, "{drain:?}: {:?}", v.reasons);
            assert_eq!(v.reasons.len(), usize::from(!held), "{drain:?}");
        }
    }
}
