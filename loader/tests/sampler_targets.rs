//! A sampler target that is absent (a process pattern that matches nothing) is said in
//! the record: `cost.missing_system_targets` names it and a warning says its cost is
//! left out, instead of a silent zero.

mod support;

use support::{run_raw, scenario};

#[test]
fn an_absent_sample_target_is_named_in_the_record() {
    let (code, text, tmp) = run_raw(
        &scenario("smoke.yaml"),
        &[
            "duration=2s",
            "warmup=0s",
            "void.loader_cpu_max=1",
            "void.schedule_lag_p99_max=10s",
            "held.exploratory=true",
            r#"sample.targets=["ghost=proc:crossbench-no-such-process-zz9"]"#,
        ],
    );
    assert_eq!(code, 0, "{text}");
    let r = support::result(&tmp.path().join("cell"));
    assert_eq!(
        r["cost"]["missing_system_targets"],
        serde_json::json!(["ghost"]),
        "{}",
        r["cost"]
    );
    let warnings = r["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w
            .as_str()
            .unwrap()
            .contains("sample target ghost was absent")),
        "{warnings:?}"
    );
    // The rows are there, with empty values: absent, not unsampled.
    let samples = std::fs::read_to_string(tmp.path().join("cell/samples.csv")).unwrap();
    assert!(
        samples.lines().any(|l| l.contains(",ghost,")),
        "no ghost rows"
    );
}
