//! Sittings: one whole run of a campaign on one machine. A campaign too long for one
//! session runs as several sittings of the same campaign file; `crossbench findings`
//! judges each finding in every sitting that holds all its arms (its arms never mix
//! sittings) and combines the verdicts: the sittings' verdict when they agree, **varies
//! between sittings** otherwise. Each sitting names its machine, its build (a dirty
//! build flagged), its resource budgets and its dates, read from its cells' records.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::campaign::CampaignView;
use crate::findings::{Finding, Judgement};

/// What a sitting's records say about where and when it ran.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SittingFacts {
    /// `CPU model, N cores`, one per distinct machine (more than one is worth a look).
    pub machines: Vec<String>,
    /// The builds that wrote its records, `(commit, dirty)`.
    pub builds: Vec<(String, bool)>,
    /// The resource budgets its cells ran under (`resources.label`; `no budget`).
    pub budgets: Vec<String>,
    /// The first and last cell's start, UTC.
    pub first: String,
    pub last: String,
    pub cells: usize,
}

impl SittingFacts {
    /// Read from the sitting's cell records.
    pub fn of(view: &CampaignView) -> SittingFacts {
        let cells: Vec<_> = view.arms.iter().flat_map(|a| &a.cells).collect();
        let machines: BTreeSet<String> = cells
            .iter()
            .map(|c| crate::comparability::machine(c))
            .collect();
        let builds: BTreeSet<(String, bool)> = cells
            .iter()
            .map(|c| build_of(&c.result.crossbench))
            .collect();
        let budgets: BTreeSet<String> = cells
            .iter()
            .map(|c| crate::comparability::budget(c))
            .collect();
        let mut starts: Vec<&str> = cells
            .iter()
            .map(|c| c.result.time.started_utc.as_str())
            .filter(|t| !t.is_empty())
            .collect();
        starts.sort_unstable();
        SittingFacts {
            machines: machines.into_iter().collect(),
            builds: builds.into_iter().collect(),
            budgets: budgets.into_iter().collect(),
            first: starts.first().map_or(String::new(), |t| t.to_string()),
            last: starts.last().map_or(String::new(), |t| t.to_string()),
            cells: cells.len(),
        }
    }

    /// The machine(s) in words.
    pub fn machine(&self) -> String {
        match self.machines.len() {
            0 => "unknown".into(),
            1 => self.machines[0].clone(),
            _ => format!("{} (more than one machine!)", self.machines.join("; ")),
        }
    }

    /// The build(s) in words; a dirty build is flagged, never passed over.
    pub fn build(&self) -> String {
        if self.builds.is_empty() {
            return "unknown".into();
        }
        self.builds
            .iter()
            .map(|(c, dirty)| build_words(c, *dirty))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The budget(s) in words: one per sitting is the rule (its arms on one footing).
    pub fn budget(&self) -> String {
        match self.budgets.len() {
            0 => "unknown".into(),
            1 => self.budgets[0].clone(),
            _ => format!("{} (more than one budget)", self.budgets.join("; ")),
        }
    }

    /// The dates, `2026-12-05 02:48 – 04:00 UTC`.
    pub fn dates(&self) -> String {
        let t = |x: &str| {
            x.replace('T', " ")
                .trim_end_matches('Z')
                .chars()
                .take(16)
                .collect::<String>()
        };
        match (self.first.is_empty(), self.first == self.last) {
            (true, _) => "unknown".into(),
            (false, true) => format!("{} UTC", t(&self.first)),
            (false, false) => format!("{} – {} UTC", t(&self.first), t(&self.last)),
        }
    }

    /// One line: machine, build, budget, dates.
    pub fn short(&self) -> String {
        format!(
            "{}; build {}; {}; {}",
            self.machine(),
            self.build(),
            self.budget(),
            self.dates()
        )
    }
}

/// The build that wrote a record: its commit (without `-dirty`) and whether it was
/// dirty.
pub(crate) fn build_of(b: &cell_record::result::Build) -> (String, bool) {
    (
        b.git_commit.trim_end_matches("-dirty").to_string(),
        b.is_dirty(),
    )
}

/// A build in words, `` `ad3dad4192cc` ``; a dirty build is flagged, never passed over.
pub(crate) fn build_words(commit: &str, dirty: bool) -> String {
    let short: String = commit.chars().take(12).collect();
    if dirty {
        format!("`{short}` **dirty** (uncommitted changes: no commit names what ran)")
    } else {
        format!("`{short}`")
    }
}

/// One sitting of a campaign.
#[derive(Debug, Clone)]
pub struct Sitting {
    /// `sitting 1`, `sitting 2`, …
    pub label: String,
    pub view: CampaignView,
    pub facts: SittingFacts,
    /// What the page must say about it (a condition that differed), if anything.
    pub note: String,
}

impl Sitting {
    pub fn new(label: impl Into<String>, view: CampaignView) -> Sitting {
        let facts = SittingFacts::of(&view);
        Sitting {
            label: label.into(),
            view,
            facts,
            note: String::new(),
        }
    }

    /// Whether the sitting holds every arm finding `f` reads (a sitting may hold only
    /// the new or redesigned arms; a finding is judged only where all its arms are).
    pub fn holds_arms(&self, f: &Finding) -> bool {
        f.arms().iter().all(|a| self.view.arm(a).is_some())
    }
}

/// The combined verdict of the sittings that judged a finding (`None`: not in that
/// sitting): their verdict when they agree, [`Judgement::Varies`] when they do not.
/// Sittings where an arm did not run, or whose preconditions failed (not testable:
/// the question could not be asked there), say nothing about the claim; a finding no
/// sitting could test is not testable, and one no sitting ran is not run.
pub fn combine(per: &[Option<Judgement>]) -> Judgement {
    let judged: Vec<Judgement> = per
        .iter()
        .flatten()
        .copied()
        .filter(|j| !matches!(j, Judgement::NotRun | Judgement::NotTestable))
        .collect();
    match judged.split_first() {
        None if per.contains(&Some(Judgement::NotTestable)) => Judgement::NotTestable,
        None => Judgement::NotRun,
        Some((first, rest)) if rest.iter().all(|j| j == first) => *first,
        Some(_) => Judgement::Varies,
    }
}

/// How many sittings answered the claim, when some that ran its arms could not test
/// it: "in 1 of 3 sittings; 2 could not test it" (`None` when every sitting that ran
/// the arms answered).
pub fn answered(per: &[Option<Judgement>]) -> Option<String> {
    let ran = per
        .iter()
        .flatten()
        .filter(|j| **j != Judgement::NotRun)
        .count();
    let untestable = per
        .iter()
        .filter(|j| **j == Some(Judgement::NotTestable))
        .count();
    (untestable > 0 && untestable < ran).then(|| {
        format!(
            "answered in {} of {ran} sittings; {untestable} could not test it (its preconditions failed there)",
            ran - untestable
        )
    })
}

/// The sittings' table: where, with what, and when each ran.
pub fn table(sittings: &[Sitting]) -> String {
    let mut s = String::from(
        "| sitting | records | machine | build | budget | dates | cells | note |\n|---|---|---|---|---|---|---|---|\n",
    );
    for st in sittings {
        let _ = writeln!(
            s,
            "| {} | `{}` | {} | {} | {} | {} | {} | {} |",
            st.label,
            st.view.dir.display(),
            st.facts.machine(),
            st.facts.build(),
            st.facts.budget().replace('|', "\\|"),
            st.facts.dates(),
            st.facts.cells,
            if st.note.is_empty() {
                "—"
            } else {
                st.note.as_str()
            }
        );
    }
    let machines: BTreeSet<&String> = sittings.iter().flat_map(|s| &s.facts.machines).collect();
    if machines.len() > 1 {
        s.push_str("\nThe sittings ran on different machines: a verdict is judged within one sitting, and figures of two sittings are never set side by side as one comparison.\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use Judgement::*;

    #[test]
    fn sittings_that_disagree_vary() {
        assert_eq!(combine(&[Some(Holds), Some(Holds)]), Holds);
        assert_eq!(combine(&[Some(Holds), Some(DoesNotHold)]), Varies);
        assert_eq!(
            combine(&[Some(Holds), Some(NotTestable)]),
            Holds,
            "a sitting that could not ask the question gives no answer to disagree with"
        );
        assert_eq!(
            combine(&[Some(NotTestable), Some(NotTestable)]),
            NotTestable
        );
        assert_eq!(combine(&[Some(NotTestable), None]), NotTestable);
        assert_eq!(
            combine(&[Some(Holds), Some(NotTestable), Some(DoesNotHold)]),
            Varies
        );
        assert_eq!(
            answered(&[Some(Holds), Some(NotTestable), Some(NotTestable)]).as_deref(),
            Some(
                "answered in 1 of 3 sittings; 2 could not test it (its preconditions failed there)"
            )
        );
        assert_eq!(answered(&[Some(Holds), Some(Holds)]), None);
        assert_eq!(answered(&[Some(NotTestable), Some(NotTestable)]), None);
        assert_eq!(
            combine(&[Some(Holds), None]),
            Holds,
            "a sitting without the arms says nothing"
        );
        assert_eq!(combine(&[Some(Holds), Some(NotRun)]), Holds);
        assert_eq!(combine(&[None, None]), NotRun);
        assert_eq!(combine(&[Some(Inconclusive)]), Inconclusive);
    }
}
