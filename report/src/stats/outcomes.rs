//! Counts of outcomes over the repeats of one arm.

use cell_record::Outcome;
use serde::Serialize;

/// How the repeats of an arm ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Outcomes {
    pub pass: u32,
    pub fail: u32,
    pub void: u32,
    pub refused: u32,
    /// Ended otherwise (errored, interrupted).
    pub other: u32,
    /// Not run yet: the campaign stopped before them (`--resume` runs them). Not in
    /// [`Outcomes::total`]: no run was made.
    pub pending: u32,
}

impl Outcomes {
    /// Count one repeat that ran to its end.
    pub fn add(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Pass => self.pass += 1,
            Outcome::Fail => self.fail += 1,
            Outcome::Void => self.void += 1,
            Outcome::Refused => self.refused += 1,
            Outcome::Interrupted | Outcome::Share | Outcome::Abandoned => self.other += 1,
        }
    }

    /// Count one repeat that did not run to its end (it errored).
    pub fn add_unfinished(&mut self) {
        self.other += 1;
    }

    pub fn total(&self) -> u32 {
        self.pass + self.fail + self.void + self.refused + self.other
    }

    /// `5 PASS`, `4 PASS / 1 VOID`, …
    pub fn label(&self) -> String {
        let parts: Vec<String> = [
            (self.pass, "PASS"),
            (self.fail, "FAIL"),
            (self.void, "VOID"),
            (self.refused, "REFUSED"),
            (self.other, "other"),
            (self.pending, "not yet run"),
        ]
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, s)| format!("{n} {s}"))
        .collect();
        if parts.is_empty() {
            "none".into()
        } else {
            parts.join(" / ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_labels() {
        let mut o = Outcomes::default();
        for s in [Outcome::Pass, Outcome::Pass, Outcome::Void, Outcome::Fail] {
            o.add(s);
        }
        o.add_unfinished();
        assert_eq!(
            (o.pass, o.void, o.fail, o.other, o.total()),
            (2, 1, 1, 1, 5)
        );
        assert_eq!(o.label(), "2 PASS / 1 FAIL / 1 VOID / 1 other");
        o.pending = 3;
        assert_eq!(o.total(), 5, "cells not run yet are no runs");
        assert_eq!(
            o.label(),
            "2 PASS / 1 FAIL / 1 VOID / 1 other / 3 not yet run"
        );
    }
}
