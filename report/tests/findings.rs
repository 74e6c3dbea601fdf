//! `crossbench findings` on small campaigns written here: a finding whose
//! precondition fails is **not testable here** (never "does not hold"), two sittings
//! that disagree give **varies between sittings**, a verdict rests only on repeats that
//! held their load, an interval from 3 repeats is never labelled 95 %, and served never
//! exceeds 100 % in the tables.

mod common;

use std::path::Path;

use common::{write, Spec};
use report::campaign::{ArmView, CampaignView};
use report::cell::{CellRecord, Outcome};
use report::findings::sittings::Sitting;
use report::findings::{judge, render, Finding, Judgement};
use report::stats::Outcomes;

/// An arm of `n` PASS repeats with e2e p50 `p50` ms each (a little spread), served
/// `served` in the rated window, whose records say `held`.
fn arm(root: &Path, id: &str, n: usize, p50: f64, served: f64, held: bool) -> ArmView {
    let mut cells = Vec::new();
    let mut outcomes = Outcomes::default();
    for r in 0..n {
        let name: &'static str = Box::leak(format!("{id}-r{r}").into_boxed_str());
        let dir = write(
            root,
            &Spec {
                name,
                p50: p50 * (1.0 + 0.01 * r as f64),
                served,
                ..Spec::default()
            },
        );
        // The load verdict, as records since 2026-12 carry it.
        let p = dir.join("result.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["load"] = serde_json::json!({
            "verdict": if held { "HELD" } else { "NOT-HELD" },
            "held": held, "reasons": [], "served_in_window": served,
            "served_min": 0.97, "exploratory": false
        });
        v["throughput"]["window_served_fraction"] = serde_json::json!(served);
        std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
        cells.push(CellRecord::load(&dir).unwrap());
        outcomes.add(Outcome::Pass);
    }
    ArmView {
        id: id.into(),
        system: "pgmq".into(),
        point: Default::default(),
        not_run: None,
        outcomes,
        cells,
    }
}

fn campaign(root: &Path, arms: Vec<ArmView>) -> CampaignView {
    CampaignView {
        dir: root.into(),
        name: "findings".into(),
        description: String::new(),
        status: "complete".into(),
        repeats: 5,
        seed: 1,
        arms,
    }
}

/// F: `a`'s p50 is below `b`'s, asked only when `b` is overloaded.
fn finding() -> Finding {
    serde_yaml::from_str(
        "id: F\ntitle: a is ahead of b\nchecks:\n  - {kind: ratio, metric: e2e_p50_ms, a: a, b: b, expect: below}\nrequires:\n  - {arm: b, held: false, why: b past its knee}\nnot_held: b is overloaded by design\n",
    )
    .unwrap()
}

/// G: `a`'s p50 below `b`'s, with no precondition and no word on overloaded repeats.
fn plain_finding() -> Finding {
    serde_yaml::from_str(
        "id: G\ntitle: a ahead of b\nchecks:\n  - {kind: ratio, metric: e2e_p50_ms, a: a, b: b, expect: below}\n",
    )
    .unwrap()
}

#[test]
fn a_finding_whose_precondition_fails_is_not_testable_here() {
    let tmp = tempfile::tempdir().unwrap();
    // b held its load: the question (a ahead of an overloaded b) cannot be asked. The
    // ratio itself says "does not hold" (a is slower), which must not be the verdict.
    let c = campaign(
        tmp.path(),
        vec![
            arm(tmp.path(), "a", 5, 200.0, 1.0, true),
            arm(tmp.path(), "b", 5, 100.0, 1.0, true),
        ],
    );
    let r = judge(&c, &finding()).unwrap();
    assert_eq!(r.judgement, Judgement::NotTestable, "{r:?}");
    assert_eq!(
        r.checks[0].judgement,
        Judgement::DoesNotHold,
        "what the ratio alone reads"
    );
    assert!(!r.preconditions[0].met);
    assert!(
        r.preconditions[0].text.contains("held in 5 of 5 repeats"),
        "{}",
        r.preconditions[0].text
    );
    let page = render(
        &[Sitting::new("sitting 1", c)],
        &[finding()],
        "crossbench findings x",
        &Default::default(),
    )
    .unwrap();
    assert!(
        page.contains("| F | a is ahead of b | not testable here | **not testable here** |"),
        "{page}"
    );
    assert!(page.contains("precondition **failed**"), "{page}");
    assert!(!page.contains("Here: **does not hold**"), "{page}");

    // b overloaded: the precondition holds and the ratio decides.
    let tmp2 = tempfile::tempdir().unwrap();
    let c = campaign(
        tmp2.path(),
        vec![
            arm(tmp2.path(), "a", 5, 200.0, 1.0, true),
            arm(tmp2.path(), "b", 5, 100.0, 0.5, false),
        ],
    );
    assert_eq!(
        judge(&c, &finding()).unwrap().judgement,
        Judgement::DoesNotHold
    );
}

#[test]
fn two_sittings_that_disagree_vary_between_sittings() {
    let (t1, t2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let one = campaign(
        t1.path(),
        vec![
            arm(t1.path(), "a", 5, 50.0, 1.0, true),
            arm(t1.path(), "b", 5, 100.0, 0.5, false),
        ],
    );
    let two = campaign(
        t2.path(),
        vec![
            arm(t2.path(), "a", 5, 200.0, 1.0, true),
            arm(t2.path(), "b", 5, 100.0, 0.5, false),
        ],
    );
    let f = finding();
    assert_eq!(judge(&one, &f).unwrap().judgement, Judgement::Holds);
    assert_eq!(judge(&two, &f).unwrap().judgement, Judgement::DoesNotHold);
    let page = render(
        &[
            Sitting::new("sitting 1", one),
            Sitting::new("sitting 2", two),
        ],
        &[f],
        "crossbench findings x y",
        &Default::default(),
    )
    .unwrap();
    assert!(
        page.contains(
            "| F | a is ahead of b | holds | does not hold | **varies between sittings** |"
        ),
        "{page}"
    );
    // Each sitting names its machine and build.
    assert!(
        page.contains("| sitting 2 |") && page.contains("test cpu, 2 cores"),
        "{page}"
    );
}

#[test]
fn a_verdict_rests_only_on_repeats_that_held() {
    let tmp = tempfile::tempdir().unwrap();
    let f = plain_finding();
    // Every repeat of b overloaded, and no `not_held`: no ratio to judge.
    let c = campaign(
        tmp.path(),
        vec![
            arm(tmp.path(), "a", 3, 50.0, 1.0, true),
            arm(tmp.path(), "b", 3, 100.0, 0.4, false),
        ],
    );
    let r = judge(&c, &f).unwrap();
    assert_eq!(r.judgement, Judgement::Inconclusive, "{r:?}");
    assert!(
        r.checks[0]
            .measured
            .contains("left out, not having held their load: 0 PASS repeats of `a`, 3 of `b`"),
        "{}",
        r.checks[0].measured
    );
}

#[test]
fn an_interval_of_three_repeats_is_not_labelled_95_percent() {
    let tmp = tempfile::tempdir().unwrap();
    let f = plain_finding();
    let c = campaign(
        tmp.path(),
        vec![
            arm(tmp.path(), "a", 3, 50.0, 1.0, true),
            arm(tmp.path(), "b", 3, 100.0, 1.0, true),
        ],
    );
    let r = judge(&c, &f).unwrap();
    let m = &r.checks[0].measured;
    assert!(m.contains("interval: at most 75 % (3 repeats)"), "{m}");
    assert!(!m.contains("95 %"), "{m}");
    // The campaign table marks it too.
    let table = report::campaign::table(&c).to_markdown();
    assert!(table.contains("(≤ 75 %)"), "{table}");
}

#[test]
fn served_never_exceeds_100_percent_in_a_table() {
    let tmp = tempfile::tempdir().unwrap();
    // Warm-up deliveries landing in the window lift the raw figure above 1.
    let a = arm(tmp.path(), "a", 3, 50.0, 1.0027, true);
    assert!(a.cells.iter().all(|c| c.served_in_window() <= 1.0));
    let c = campaign(tmp.path(), vec![a]);
    let table = report::campaign::table(&c).to_markdown();
    assert_served_at_most_100(&table);
}

/// Every figure in a column whose header says "served", and in the measured column of
/// a row whose label starts with "served", is at most 100 (%).
fn assert_served_at_most_100(md: &str) {
    let lines: Vec<&str> = md.lines().collect();
    let cells = |l: &str| -> Vec<String> {
        l.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let numbers = |cell: &str| -> Vec<f64> {
        cell.split(|ch: char| !(ch.is_ascii_digit() || ch == '.'))
            .filter_map(|x| x.parse::<f64>().ok())
            .collect()
    };
    let mut header: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if !line.trim_start().starts_with('|') {
            header.clear();
            continue;
        }
        if lines
            .get(i + 1)
            .is_some_and(|n| n.trim_start().starts_with("|---"))
        {
            header = cells(line);
            continue;
        }
        if line.trim_start().starts_with("|---") {
            continue;
        }
        let row = cells(line);
        for (j, h) in header.iter().enumerate() {
            let by_column = h.contains("served");
            let by_row =
                row.first().is_some_and(|c| c.starts_with("served")) && h.contains("measured");
            if by_column || by_row {
                for n in row.get(j).map(|c| numbers(c)).unwrap_or_default() {
                    assert!(n <= 100.0, "served {n} in `{line}`");
                }
            }
        }
    }
}

/// The generated pages that carry "served" columns (docs/reproducing.md, and the
/// findings page's figures) never show more than 100 %.
#[test]
fn served_never_exceeds_100_percent_in_the_generated_pages() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
    for page in ["reproducing.md", "findings.md"] {
        let text = std::fs::read_to_string(docs.join(page)).unwrap();
        assert_served_at_most_100(&text);
        for (i, _) in text.match_indices("served ") {
            let rest = &text[i + 7..];
            let num: String = rest
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            if let (Ok(n), true) = (num.parse::<f64>(), rest[num.len()..].starts_with(" %")) {
                assert!(n <= 100.0, "{page}: served {n} %");
            }
        }
    }
}

/// The campaign table reads a stream arm's deliveries per second and served share
/// from a stream cell's own figures (consumed per group × groups; consumed ÷
/// offered), never 0 from a pipeline field a stream cell does not have.
#[test]
fn the_campaign_table_reads_stream_arms_figures() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = arm(tmp.path(), "stream", 3, 50.0, 0.98, true);
    for c in &mut a.cells {
        let p = c.dir.join("result.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        v["workload"] =
            serde_json::json!({"kind": "stream", "rate_msgs_per_sec": 2000, "groups": 2});
        v["throughput"] = serde_json::json!({"offered_per_sec": 2000.0, "popped_per_sec": 1962.0, "served_fraction": 0.981});
        std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
        *c = CellRecord::load(&c.dir).unwrap();
    }
    let c = campaign(tmp.path(), vec![a]);
    let md = report::campaign::table(&c).to_markdown();
    let row = md.lines().find(|l| l.starts_with("| stream |")).unwrap();
    assert!(row.contains("| 3924 [3924, 3924]"), "{row}");
    assert!(row.contains("98 %"), "{row}");
}
