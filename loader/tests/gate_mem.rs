//! The CI regression gate on the control broker, in the runtime's paused virtual
//! time, where every leg of an arm gives the same figures: the legs of each arm tie
//! exactly, the case the old unpaired median test was blind to. A 50 % regression
//! with tied legs is caught at 5 pairs (one-sided) and confirmed; a two-sided gate
//! at 5 pairs is refused before the first leg; an A/A with ties passes; a 3 % change
//! under τ = 5 % passes; a 20 % change buried in noise too large for 5 pairs is
//! inconclusive, never a pass. Bad input is exit 2 with nothing run; the CI recipes
//! are valid YAML that run the gate.

mod support;

use std::path::{Path, PathBuf};

use loader::campaign::gate::{execute, GateRequest};
use loader::cli::exit::Exit;
use loader::pacing::pacer::Timing;
use report::gate::{MetricResult, MetricVerdict, TestPlan, Verdict};

/// Short legs of the smoke cell in virtual time, with the VOID rule relaxed: the
/// gate's judgement is under test, not this machine's load.
fn request(tmp: &Path, baseline: &[&str], candidate: &[&str], pairs: usize) -> GateRequest {
    let mut r = GateRequest::new(support::scenario("smoke.yaml"));
    r.sets = [
        "duration=2s",
        "warmup=500ms",
        "void.loader_cpu_max=1",
        "void.schedule_lag_p99_max=1h",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    r.baseline_sets = baseline.iter().map(|s| s.to_string()).collect();
    r.candidate_sets = candidate.iter().map(|s| s.to_string()).collect();
    r.pairs = pairs;
    r.timing = Timing::Virtual;
    r.out = Some(tmp.join("gate"));
    // No calibration of this host: the floors alone.
    r.calibration = Some(tmp.join("no-calibration.json"));
    r.markdown = Some(tmp.join("summary.md"));
    r
}

fn metric<'a>(rec: &'a report::gate::GateRecord, name: &str) -> &'a MetricResult {
    rec.metrics
        .iter()
        .find(|m| m.metric == name)
        .unwrap_or_else(|| panic!("{name} gated"))
}

/// The case, in virtual time: every leg of each arm ties, the candidate's
/// publishes 11 ms slower (flow A's e2e 45 → about 67 ms, +50 %), 5 pairs, the
/// default one-sided test. Each pair shows the regression, p = 1/32, and the fresh
/// pairs confirm it: exit 6. The unpaired median test said "pass" (p ≈ 0.5).
#[test]
fn tied_legs_with_a_50_percent_regression_at_5_pairs_one_sided_exit_6() {
    let tmp = tempfile::tempdir().unwrap();
    let req = request(
        tmp.path(),
        &["mem.publish_delay=0s"],
        &["mem.publish_delay=11ms"],
        5,
    );
    let (exit, dir, rec) = execute(&req).expect("the gate runs");
    let md = rec.markdown();
    assert_eq!(exit, Exit::Regression, "{md}");
    assert_eq!(rec.verdict, Verdict::Regression, "{md}");
    for name in ["e2e_p50_a", "e2e_p50_b"] {
        let m = metric(&rec, name);
        assert!(
            m.baseline_tied.is_some() && m.candidate_tied.is_some(),
            "the legs of each arm tie in virtual time: {m:?}"
        );
        assert_eq!(m.verdict, MetricVerdict::Regression, "{md}");
        assert_eq!(m.confirmed, Some(true), "{md}");
        let ci = m.ratio.unwrap();
        assert!(ci.low > 1.4 && ci.high < 1.6, "{name}: {ci:?}");
        assert!((m.p.unwrap() - 1.0 / 32.0).abs() < 1e-9, "{name}: {m:?}");
    }
    assert!(
        rec.legs.iter().filter(|l| l.stage == 2).count() == 10,
        "confirmed by 5 fresh pairs"
    );
    assert!(md.contains("Tied legs"), "{md}");
    let junit = std::fs::read_to_string(dir.join("junit.xml")).unwrap();
    assert!(
        junit.contains("name=\"e2e_p50_a\">\n      <failure"),
        "{junit}"
    );
    assert!(
        rec.reasons.iter().any(|r| r.contains("e2e_p50_a")),
        "{:?}",
        rec.reasons
    );
    // The picture beside summary.md: a row per metric with a ratio, its legend beside
    // the rows, never over them; the regressions drawn in the regression colour.
    let svg = std::fs::read_to_string(dir.join("gate.svg")).unwrap();
    assert!(dir.join("gate.png").is_file());
    assert_eq!(report::plot::geometry::legends(&svg).len(), 1, "one legend");
    assert_eq!(report::plot::geometry::faults(&svg), Vec::<String>::new());
    let rows = rec.forest_rows();
    assert!(rows.iter().any(|r| r.label.starts_with("e2e_p50_a")
        && r.verdict == report::plot::forest::Verdict::DoesNotHold));
    assert!(svg.contains("e2e_p50_a"), "the metric's row is labelled");
}

/// The same gate asked for a two-sided test at 5 pairs: the exact test's smallest p
/// is 2/32 = 0.0625 > 0.05, so it could never find the regression. Refused before
/// the first leg (exit 2, naming the 6 pairs needed), never "no regression".
#[test]
fn two_sided_at_5_pairs_is_refused_before_the_first_leg() {
    let tmp = tempfile::tempdir().unwrap();
    let mut req = request(
        tmp.path(),
        &["mem.publish_delay=0s"],
        &["mem.publish_delay=11ms"],
        5,
    );
    req.test = TestPlan {
        two_sided: true,
        ..TestPlan::default()
    };
    let err = execute(&req).expect_err("refused");
    assert_eq!(Exit::of_error(&err), Exit::BadInput, "{err:#}");
    let text = format!("{err:#}");
    assert!(text.contains("--pairs 6"), "{text}");
    assert!(
        !tmp.path().join("gate").exists(),
        "nothing is run or written"
    );
    // The command line says the same, exit 2.
    let out = tmp.path().join("out");
    let o = support::binary()
        .args([
            "gate",
            &support::scenario("smoke.yaml").display().to_string(),
            "--baseline-set",
            "mem.publish_delay=0s",
            "--candidate-set",
            "mem.publish_delay=11ms",
            "--pairs",
            "5",
            "--two-sided",
            "--out",
            &out.display().to_string(),
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--pairs 6") && stderr.contains("0.0625"),
        "{stderr}"
    );
    assert!(!out.exists());
    // At 6 pairs the two-sided gate runs and finds it.
    req.pairs = 6;
    let (exit, _, rec) = execute(&req).expect("the gate runs");
    assert_eq!(exit, Exit::Regression, "{}", rec.markdown());
}

/// The metrics virtual time decides. The cost metrics (`system_cores`, mCPU) are
/// the process's real CPU over a virtual window: a few ticks a leg, too coarse for 5
/// pairs to bound within 5 % (an A/A of all metrics ends inconclusive on them, which
/// is the right answer for such figures, and not what is under test here).
const VIRTUAL_METRICS: &str = "  metrics: [served_fraction, deliveries_per_sec, e2e_p50_a, e2e_p99_a, e2e_p999_a, e2e_p50_b, e2e_p99_b, e2e_p999_b]\n";

/// A/A with ties: every pair's log-ratio is 0, every interval is [1, 1]: exit 0.
#[test]
fn an_aa_gate_with_tied_legs_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut req = request(
        tmp.path(),
        &["mem.publish_delay=0s"],
        &["mem.publish_delay=0s"],
        5,
    );
    req.scenario = Some(smoke_with_gate(tmp.path(), VIRTUAL_METRICS));
    let (exit, dir, rec) = execute(&req).expect("the gate runs");
    assert_eq!(exit, Exit::Pass, "{}", rec.markdown());
    assert_eq!(rec.verdict, Verdict::Pass);
    assert_eq!(rec.legs.len(), 10, "5 ABBA pairs, no confirmation");
    // ABBA: pair 1 runs the baseline first, pair 2 the candidate first.
    assert_eq!(rec.legs[0].arm, "baseline");
    assert_eq!(rec.legs[2].arm, "candidate");
    let m = metric(&rec, "e2e_p50_a");
    assert_eq!(m.verdict, MetricVerdict::Pass);
    let ci = m.ratio.unwrap();
    assert_eq!((ci.low, ci.high), (1.0, 1.0), "{m:?}");
    for f in ["gate.json", "junit.xml", "summary.md", "metrics.txt"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    assert!(std::fs::read_to_string(tmp.path().join("summary.md"))
        .unwrap()
        .contains("no regression"));
}

/// A scenario: the smoke cell with a `gate:` section.
fn smoke_with_gate(tmp: &Path, gate: &str) -> PathBuf {
    let p = tmp.join("smoke-gate.yaml");
    std::fs::write(
        &p,
        format!(
            "{}gate:\n{gate}",
            std::fs::read_to_string(support::scenario("smoke.yaml")).unwrap()
        ),
    )
    .unwrap();
    p
}

/// A 3 % change under τ = 5 %: flow A's e2e about 67 ms (11 ms a publish) against
/// 69 ms (12 ms; virtual time sleeps in whole milliseconds). Every pair shows it
/// (p = 1/32), but its bound lies within τ: pass, exit 0.
#[test]
fn a_3_percent_change_with_tau_5_percent_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let mut req = request(
        tmp.path(),
        &["mem.publish_delay=11ms"],
        &["mem.publish_delay=12ms"],
        5,
    );
    req.scenario = Some(smoke_with_gate(
        tmp.path(),
        "  metrics: [e2e_p50_a]\n  thresholds: {e2e_p50_a: 0.05}\n",
    ));
    let (exit, _, rec) = execute(&req).expect("the gate runs");
    let m = metric(&rec, "e2e_p50_a");
    let ci = m.ratio.unwrap();
    assert!(
        ci.estimate > 1.02 && ci.estimate < 1.04 && ci.high < 1.05,
        "{m:?}"
    );
    assert_eq!(m.verdict, MetricVerdict::Pass, "{}", rec.markdown());
    assert_eq!(exit, Exit::Pass, "{}", rec.markdown());
}

/// One virtual-time cell of the smoke scenario with `delay` per publish.
fn cell(out: &Path, delay: &str) {
    let mut req = loader::cli::run::RunRequest::new(support::scenario("smoke.yaml"));
    req.sets = [
        "duration=2s".to_string(),
        "warmup=500ms".to_string(),
        format!("mem.publish_delay={delay}"),
    ]
    .to_vec();
    req.out = Some(out.to_path_buf());
    req.timing = Timing::Virtual;
    req.quiet = true;
    loader::cli::run::execute(&req).expect("the cell runs");
}

/// 20 % buried in noise too large for 5 pairs: the candidate's legs are about 20 %
/// slower on average, but the pairs' ratios range from 0.75 to 1.9 (the legs'
/// delays differ, as a noisy machine's would). The interval reaches far beyond τ and
/// the test is not significant: inconclusive (exit 7), never "no regression". The
/// legs are records made ahead, compared by `--baseline DIR --candidate DIR`, in
/// ABBA order.
#[test]
fn a_20_percent_change_in_noise_too_large_for_5_pairs_is_inconclusive() {
    let tmp = tempfile::tempdir().unwrap();
    // Flow A's e2e is about 45 ms + 2 × the publish delay: these give the pairs'
    // ratios about 1.9, 0.8, 1.5, 0.75 and 1.35 (geometric mean about 1.18).
    let base = ["0ms", "15ms", "0ms", "18ms", "0ms"];
    let cand = ["20250us", "7500us", "11250us", "7875us", "7875us"];
    // In ABBA order, as the gate runs its legs: this process's memory grows from
    // cell to cell, and one order would make the later arm look bigger.
    for (i, (b, c)) in base.iter().zip(cand).enumerate() {
        let (base_dir, cand_dir) = (
            tmp.path().join(format!("base/p{i}")),
            tmp.path().join(format!("cand/p{i}")),
        );
        if i % 2 == 0 {
            cell(&base_dir, b);
            cell(&cand_dir, c);
        } else {
            cell(&cand_dir, c);
            cell(&base_dir, b);
        }
    }
    // The scenario beside the records only picks the metrics (its `gate:`).
    let mut req = GateRequest::new(smoke_with_gate(tmp.path(), VIRTUAL_METRICS));
    req.baseline_dir = Some(tmp.path().join("base"));
    req.candidate_dir = Some(tmp.path().join("cand"));
    req.out = Some(tmp.path().join("gate"));
    req.calibration = Some(tmp.path().join("no-calibration.json"));
    req.pairs = 5;
    let (exit, _, rec) = execute(&req).expect("the gate runs");
    let md = rec.markdown();
    let m = metric(&rec, "e2e_p50_a");
    let ci = m.ratio.unwrap();
    assert!(ci.estimate > 1.1 && ci.estimate < 1.3, "{m:?}");
    assert!(ci.high > 1.05, "{m:?}");
    assert_eq!(m.verdict, MetricVerdict::Inconclusive, "{md}");
    assert_eq!(exit, Exit::Inconclusive, "{md}");
    assert_eq!(rec.verdict, Verdict::Inconclusive);
    assert!(
        rec.reasons
            .iter()
            .any(|r| r.contains("inconclusive, not a pass") && r.contains("e2e_p50_a")),
        "the inconclusive metrics are named: {:?}",
        rec.reasons
    );
    assert!(!md.contains("no regression"), "{md}");
}

#[test]
fn bad_input_is_exit_2_with_nothing_run() {
    let tmp = tempfile::tempdir().unwrap();
    let smoke = support::scenario("smoke.yaml");
    let gate = |args: &[&str]| {
        let o = support::binary().arg("gate").args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).to_string(),
        )
    };
    let out = tmp.path().join("out");
    let smoke_s = smoke.display().to_string();
    let out_s = out.display().to_string();
    // Mismatched arms: the two arms set different fields.
    let (code, err) = gate(&[
        &smoke_s,
        "--baseline-set",
        "mem.publish_delay=0s",
        "--candidate-set",
        "rate=300",
        "--out",
        &out_s,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("mismatched arms"), "{err}");
    // Fewer than 5 pairs.
    let (code, err) = gate(&[
        &smoke_s,
        "--baseline-set",
        "rate=200",
        "--candidate-set",
        "rate=300",
        "--pairs",
        "4",
        "--out",
        &out_s,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--pairs 4"), "{err}");
    // 5 pairs cannot reach α = 0.01 (1/32 = 0.031): 7 are needed.
    let (code, err) = gate(&[
        &smoke_s,
        "--baseline-set",
        "rate=200",
        "--candidate-set",
        "rate=300",
        "--pairs",
        "5",
        "--alpha",
        "0.01",
        "--out",
        &out_s,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--pairs 7"), "{err}");
    // An α that is no level.
    let (code, err) = gate(&[
        &smoke_s,
        "--baseline-set",
        "rate=200",
        "--candidate-set",
        "rate=300",
        "--alpha",
        "1.5",
        "--out",
        &out_s,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--alpha 1.5"), "{err}");
    // An unknown metric in the scenario's gate: section.
    let scn = tmp.path().join("s.yaml");
    std::fs::write(
        &scn,
        format!(
            "{}gate:\n  metrics: [e2e_p50_a, latency]\n",
            std::fs::read_to_string(&smoke).unwrap()
        ),
    )
    .unwrap();
    let (code, err) = gate(&[
        &scn.display().to_string(),
        "--baseline-set",
        "rate=200",
        "--candidate-set",
        "rate=300",
        "--out",
        &out_s,
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("gate") && err.contains("`latency`"), "{err}");
    assert!(!out.exists(), "nothing is written for bad input");
}

#[test]
fn the_ci_recipes_are_valid_yaml_that_run_the_gate() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let gh: serde_json::Value = serde_yaml::from_str(
        &std::fs::read_to_string(root.join("ci/github-actions/crossbench-gate.yml")).unwrap(),
    )
    .expect("the GitHub workflow parses");
    let steps = gh["jobs"]["gate"]["steps"]
        .as_array()
        .expect("jobs.gate.steps");
    let runs: Vec<&str> = steps.iter().filter_map(|s| s["run"].as_str()).collect();
    let runs_the_gate = |r: &str| r.contains(" gate ") && r.contains("--candidate-set");
    assert!(runs.iter().any(|r| runs_the_gate(r)), "{runs:?}");
    assert!(
        steps.iter().any(|s| s["uses"]
            .as_str()
            .is_some_and(|u| u.starts_with("actions/upload-artifact"))),
        "the records are uploaded"
    );
    assert!(
        gh["jobs"]["gate"]["services"].is_object(),
        "the broker runs as a service"
    );
    let gl: serde_json::Value = serde_yaml::from_str(
        &std::fs::read_to_string(root.join("ci/gitlab/crossbench-gate.yml")).unwrap(),
    )
    .expect("the GitLab recipe parses");
    let script = gl["crossbench-gate"]["script"]
        .as_array()
        .expect("crossbench-gate.script");
    assert!(script.iter().any(|l| l.as_str().is_some_and(runs_the_gate)));
    assert!(gl["crossbench-gate"]["artifacts"]["reports"]["junit"].is_string());
    assert!(gl["crossbench-gate"]["artifacts"]["reports"]["metrics"].is_string());
}

/// Records made on two machines are not one comparison: a gate of a candidate whose
/// records name another CPU than the baseline's, with a plain 50 % regression, ends
/// inconclusive (exit 7) saying NOT COMPARABLE, never a verdict on the change.
#[test]
fn records_from_two_machines_are_not_comparable() {
    let tmp = tempfile::tempdir().unwrap();
    for i in 0..5 {
        let (b, c) = (
            tmp.path().join(format!("base/p{i}")),
            tmp.path().join(format!("cand/p{i}")),
        );
        cell(&b, "0ms");
        cell(&c, "11ms");
        // The candidate's records say they ran elsewhere.
        let p = c.join("result.json");
        let text = std::fs::read_to_string(&p).unwrap();
        let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["host"]["cpu_model"] = serde_json::json!("another CPU");
        std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
    }
    let mut req = GateRequest::new(smoke_with_gate(tmp.path(), VIRTUAL_METRICS));
    req.baseline_dir = Some(tmp.path().join("base"));
    req.candidate_dir = Some(tmp.path().join("cand"));
    req.out = Some(tmp.path().join("gate"));
    req.calibration = Some(tmp.path().join("no-calibration.json"));
    req.pairs = 5;
    let (exit, _, rec) = execute(&req).expect("the gate runs");
    let md = rec.markdown();
    assert_eq!(exit, Exit::Inconclusive, "{md}");
    assert!(
        rec.reasons
            .iter()
            .any(|r| r.starts_with("NOT COMPARABLE") && r.contains("another CPU")),
        "{:?}",
        rec.reasons
    );
}
