//! The gate's old flaw (issue 44: an unpaired relabelling of the legs with the
//! difference of medians as its statistic, blind to a regression whose legs tie)
//! does not apply to the other commands that summarise repeats: none of them
//! decides a verdict by a median-difference relabelling, and each stays exact when
//! every repeat of an arm ties, as the control broker's and HdrHistogram-bucketed
//! figures do.
//!
//! - **findings** judges a ratio check by the bootstrap interval of the ratio of the
//!   arms' medians (`report::stats::ratio_ci`, `findings::judge_ratio`): with tied
//!   arms every resample gives the same ratio, so the interval is that ratio, and a
//!   50 % difference holds (or does not) as it should.
//! - **campaigns** show each arm's median with its bootstrap interval
//!   (`median_ci`); tied repeats give the value itself. No verdict hangs on it.
//! - **the ceiling search** holds a rate by rules on each cell (served fraction,
//!   p99), no statistic across repeats.
//! - **`selftest tax`** is the ratio of the two sides' medians, no test.
//!
//! And the relabelling itself is gone from the sources, so nothing can call it.

use std::path::Path;

use loader::cli::selftest::tax::figures::Spread;
use report::findings::{judge_ratio, Direction, Judgement};
use report::stats::{median_ci, ratio_ci};

#[test]
fn a_findings_ratio_check_of_tied_arms_is_exact() {
    let slow = [67.5; 5];
    let fast = [45.0; 5];
    let i = ratio_ci(&slow, &fast, 0.95, 10_000, 7).unwrap();
    assert_eq!((i.low, i.estimate, i.high), (1.5, 1.5, 1.5), "{i:?}");
    assert_eq!(judge_ratio(&i, Direction::Above, 0.0), Judgement::Holds);
    assert_eq!(
        judge_ratio(&i, Direction::Below, 0.0),
        Judgement::DoesNotHold
    );
    assert_eq!(
        judge_ratio(&i, Direction::Near, 0.1),
        Judgement::DoesNotHold
    );
    // Tied and equal: near 1 holds, neither direction does.
    let same = ratio_ci(&fast, &fast, 0.95, 10_000, 7).unwrap();
    assert_eq!(judge_ratio(&same, Direction::Near, 0.05), Judgement::Holds);
    assert_eq!(
        judge_ratio(&same, Direction::Above, 0.0),
        Judgement::Inconclusive
    );
}

#[test]
fn a_campaign_median_of_tied_repeats_is_the_value() {
    let i = median_ci(&[71.231; 5], 0.95, 10_000, 7).unwrap();
    assert_eq!((i.low, i.estimate, i.high), (71.231, 71.231, 71.231));
}

#[test]
fn the_harness_tax_of_tied_runs_is_the_ratio_of_the_values() {
    let bare = Spread::of(&[2.0; 5]).unwrap();
    let crossbench = Spread::of(&[3.0; 5]).unwrap();
    assert_eq!(crossbench.median / bare.median, 1.5);
}

/// No source under report/ or loader/ calls a median-difference relabelling.
#[test]
fn no_median_difference_relabelling_is_left() {
    fn scan(dir: &Path, hits: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                scan(&p, hits);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).unwrap();
                if text.contains("permutation_p") || text.contains("stats::permutation") {
                    hits.push(p.display().to_string());
                }
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut hits = Vec::new();
    for d in ["report/src", "loader/src"] {
        scan(&root.join(d), &mut hits);
    }
    assert!(hits.is_empty(), "{hits:?}");
}
