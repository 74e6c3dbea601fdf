//! The CI regression gate on the control broker: an A/A gate passes; a regression
//! injected as a publish delay is caught, named and confirmed; bad input is exit 2
//! with nothing run; the CI recipes are valid YAML that run the gate.

mod support;

use std::path::Path;

use loader::campaign::gate::{execute, GateRequest};
use loader::cli::exit::Exit;
use report::gate::{MetricVerdict, Verdict};

/// Short legs of the smoke cell, with the VOID rule relaxed: the gate's judgement is
/// under test, not this machine's load.
fn request(tmp: &Path, baseline: &[&str], candidate: &[&str]) -> GateRequest {
    let mut r = GateRequest::new(support::scenario("smoke.yaml"));
    r.sets = [
        "duration=1500ms",
        "warmup=300ms",
        "void.loader_cpu_max=1",
        "void.schedule_lag_p99_max=1h",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    r.baseline_sets = baseline.iter().map(|s| s.to_string()).collect();
    r.candidate_sets = candidate.iter().map(|s| s.to_string()).collect();
    r.pairs = 10;
    r.out = Some(tmp.join("gate"));
    // No calibration of this host: the floors alone.
    r.calibration = Some(tmp.join("no-calibration.json"));
    r.markdown = Some(tmp.join("summary.md"));
    r
}

#[test]
fn an_aa_gate_on_the_control_broker_passes() {
    let tmp = tempfile::tempdir().unwrap();
    let req = request(
        tmp.path(),
        &["mem.publish_delay=0s"],
        &["mem.publish_delay=0s"],
    );
    let (exit, dir, rec) = execute(&req).expect("the gate runs");
    assert_eq!(exit, Exit::Pass, "{}", rec.markdown());
    assert_eq!(rec.verdict, Verdict::Pass);
    // 10 ABBA pairs; a noisy machine (the real-fault tests run beside this suite)
    // may make one metric look worse, and the confirmation stage (10 fresh pairs in
    // reverse order) must then clear it: the verdict above is PASS either way.
    assert!(
        rec.legs.len() == 20 || rec.legs.len() == 40,
        "10 ABBA pairs, and 10 more only for a confirmation: {} legs\n{}",
        rec.legs.len(),
        rec.markdown()
    );
    // ABBA: pair 1 runs the baseline first, pair 2 the candidate first.
    assert_eq!(rec.legs[0].arm, "baseline");
    assert_eq!(rec.legs[2].arm, "candidate");
    for f in ["gate.json", "junit.xml", "summary.md", "metrics.txt"] {
        assert!(dir.join(f).is_file(), "{f}");
    }
    assert!(std::fs::read_to_string(tmp.path().join("summary.md"))
        .unwrap()
        .contains("no regression"));
}

#[test]
fn an_injected_regression_is_caught_named_and_confirmed() {
    let tmp = tempfile::tempdir().unwrap();
    // Each event is published twice on its way (ingress, then the derived publish):
    // 4 ms per publish adds about 8 ms to flow A's 45 ms of work, about 20 %.
    let req = request(
        tmp.path(),
        &["mem.publish_delay=0s"],
        &["mem.publish_delay=4ms"],
    );
    let (exit, dir, rec) = execute(&req).expect("the gate runs");
    assert_eq!(exit, Exit::Regression, "{}", rec.markdown());
    let p50 = rec
        .metrics
        .iter()
        .find(|m| m.metric == "e2e_p50_a")
        .expect("e2e_p50_a gated");
    assert_eq!(p50.verdict, MetricVerdict::Regression, "{p50:?}");
    assert_eq!(p50.confirmed, Some(true), "{p50:?}");
    let ci = p50.ratio.unwrap();
    assert!(ci.low > 1.0, "the ratio's interval excludes 1: {ci:?}");
    assert!(
        rec.legs.iter().any(|l| l.stage == 2),
        "confirmed by fresh pairs"
    );
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
