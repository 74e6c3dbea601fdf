//! The exit codes of `crossbench`, in one place: what sets them, what `--help` and
//! the README list; and [`BadInput`], the error that exits 2.

use crate::cell::Outcome;

/// Bad input: exit 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// How `crossbench` exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// PASS (or a command other than `run` succeeded).
    Pass,
    /// An internal error: the harness failed, not the system or the input.
    Internal,
    /// Bad input: the message names the field and the fix; nothing is written that
    /// claims success.
    BadInput,
    /// FAIL: a correctness failure (loss, reorder, duplicate).
    Fail,
    /// VOID: the loader, not the system, was the limit.
    Void,
    /// REFUSED: the system refused the cell's topology at setup.
    Refused,
    /// PASS, but the cell did not hold its load (served too little, publishes failed
    /// or shed, the drain cut short), and the scenario did not call its load
    /// exploratory.
    NotHeld,
    /// The gate found a regression beyond the noise, confirmed by fresh pairs.
    Regression,
    /// The gate could not judge (unstable metrics, too many VOID legs, too few pairs).
    Inconclusive,
    /// Stopped by Ctrl-C (SIGINT) before it ended; what ran is recorded.
    Interrupted,
    /// Stopped by SIGTERM before it ended; what ran is recorded.
    Terminated,
    /// A cell of several loaders was abandoned: a loader failed, fell silent or never
    /// arrived.
    Abandoned,
}

impl Exit {
    /// Every exit, in code order.
    pub const ALL: [Exit; 12] = [
        Exit::Pass,
        Exit::Internal,
        Exit::BadInput,
        Exit::Fail,
        Exit::Void,
        Exit::Refused,
        Exit::Regression,
        Exit::Inconclusive,
        Exit::NotHeld,
        Exit::Abandoned,
        Exit::Interrupted,
        Exit::Terminated,
    ];

    pub fn code(self) -> u8 {
        match self {
            Exit::Pass => 0,
            Exit::Internal => 1,
            Exit::BadInput => 2,
            Exit::Fail => 3,
            Exit::Void => 4,
            Exit::Refused => 5,
            Exit::Regression => 6,
            Exit::Inconclusive => 7,
            Exit::NotHeld => 8,
            Exit::Abandoned => 9,
            Exit::Interrupted => 130,
            Exit::Terminated => 143,
        }
    }

    /// The name the README and `--help` use.
    pub fn name(self) -> &'static str {
        match self {
            Exit::Pass => "PASS",
            Exit::Internal => "internal error",
            Exit::BadInput => "bad input",
            Exit::Fail => "FAIL",
            Exit::Void => "VOID",
            Exit::Refused => "REFUSED",
            Exit::Regression => "regression",
            Exit::Inconclusive => "inconclusive",
            Exit::NotHeld => "NOT-HELD",
            Exit::Abandoned => "ABANDONED",
            Exit::Interrupted => "interrupted",
            Exit::Terminated => "terminated",
        }
    }

    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Pass => "the cell passed (or the command succeeded)",
            Exit::Internal => "the harness failed",
            Exit::BadInput => "the message names the field and the fix; nothing is written",
            Exit::Fail => "correctness: something was lost, reordered or duplicated",
            Exit::Void => "the loader, not the system, was the limit (pacer skipped events, loader CPU above its cap, or schedule lag above its threshold)",
            Exit::Refused => "the system refused the cell's topology at setup; result.json records its answer",
            Exit::Regression => "`crossbench gate`: the candidate regressed beyond the noise, confirmed by fresh pairs",
            Exit::Inconclusive => "`crossbench gate`: cannot judge (a metric whose interval reaches beyond tau without the paired test being significant, a regression the fresh pairs could not confirm or contradict, too many VOID legs)",
            Exit::NotHeld => "PASS, but the cell did not hold its load (served too little, publishes failed or shed, the drain cut short) and the scenario did not call it exploratory",
            Exit::Abandoned => "several loaders: a loader failed, fell silent or never reached the rendezvous, and every loader gave the cell up; each record says which loader and why",
            Exit::Interrupted => "stopped by Ctrl-C (SIGINT): it drained briefly and its record is complete, outcome INTERRUPTED (a second Ctrl-C exits at once and marks the record incomplete; a campaign: `--resume` runs the rest)",
            Exit::Terminated => "stopped by SIGTERM, as by Ctrl-C",
        }
    }

    /// The exit of a cell: its outcome, and for a PASS whether it held its load.
    pub fn of_cell(r: &crate::cell::CellReport) -> Exit {
        match (&r.outcome, &r.load) {
            (Outcome::Pass, Some(l)) if !l.held && !l.exploratory => Exit::NotHeld,
            (o, _) => Exit::of(*o),
        }
    }

    /// The exit of a cell's outcome.
    pub fn of(outcome: Outcome) -> Exit {
        match outcome {
            Outcome::Pass => Exit::Pass,
            Outcome::Fail => Exit::Fail,
            Outcome::Void => Exit::Void,
            Outcome::Refused => Exit::Refused,
            Outcome::Interrupted => super::signals::exit(),
            // One loader's share ran to its end; the verdict is the merge's.
            Outcome::Share => Exit::Pass,
            Outcome::Abandoned => Exit::Abandoned,
        }
    }

    /// The exit an error maps to: bad input for every error that names a bad
    /// argument, field or file; internal otherwise. The errors known here are those
    /// of the runner and the layers below it; a command's own (a campaign file's) are
    /// added by `crate::cli::exit_of_error`, which `main` uses.
    pub fn of_error(e: &anyhow::Error) -> Exit {
        if e.downcast_ref::<super::signals::Interrupted>().is_some() {
            return super::signals::exit();
        }
        let bad = e.downcast_ref::<BadInput>().is_some()
            || e.downcast_ref::<crate::scenario::ScenarioError>().is_some()
            || e.downcast_ref::<adapters::BuildError>().is_some()
            || e.downcast_ref::<checker::CheckError>().is_some()
            || e.downcast_ref::<crate::fleet::FleetError>().is_some()
            || e.downcast_ref::<report::ReportError>()
                .is_some_and(report::ReportError::is_bad_input);
        if bad {
            Exit::BadInput
        } else {
            Exit::Internal
        }
    }

    /// The list `--help` ends with.
    pub fn help() -> String {
        let mut s = String::from("Exit codes:\n");
        for e in Exit::ALL {
            s.push_str(&format!("  {}  {}: {}\n", e.code(), e.name(), e.meaning()));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_distinct_and_in_order() {
        for (i, e) in Exit::ALL.iter().take(10).enumerate() {
            assert_eq!(e.code() as usize, i, "{e:?}");
        }
        assert_eq!(
            Exit::Interrupted.code(),
            130,
            "128 + SIGINT, as shells report it"
        );
        assert!(Exit::help().contains("5  REFUSED"));
    }

    #[test]
    fn the_readme_lists_every_exit_code() {
        let readme = include_str!("../../../../README.md");
        for e in Exit::ALL {
            let entry = format!("**{}** {}", e.code(), e.name());
            assert!(readme.contains(&entry), "README.md lacks `{entry}`");
        }
    }
}
