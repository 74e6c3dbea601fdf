//! `crossbench selftest tax` (docs/performance.md, "The harness tax per adapter"),
//! run briefly against every system the test command provisions (pgmq, RabbitMQ, a
//! Kafka-protocol broker, NATS, Redis), and against Queen where a server is given: its
//! JSON is well-formed, one run of each side ran, and each side delivered everything
//! it published.
//!
//! And a floor per adapter, as the raw-ratio tests have (issue 49): the tax of this
//! debug build must stay under [`COLLAPSE`]. The target is 1.10× on a release build;
//! the floor sits far above what debug builds measure here (docs/performance.md, "The
//! tax's CI floor"), so it catches a collapse (a per-message round trip, a busy loop,
//! a lost batch), never noise.
//!
//! SKIPs when a server is not reachable and `CI` is not set (then it fails).

mod support;

use serde_json::Value;
use support::binary;

/// A tax above this, in a debug build with 2 s windows, is a collapse.
const COLLAPSE: f64 = 3.0;

#[cfg(feature = "redis")]
#[test]
fn the_redis_tax_runs_both_sides_and_has_not_collapsed() {
    if !support::redis() {
        return;
    }
    has_not_collapsed(tax_runs_both_sides("redis", &[]));
}

#[cfg(feature = "nats")]
#[test]
fn the_nats_tax_runs_both_sides_and_has_not_collapsed() {
    if !support::nats() {
        return;
    }
    has_not_collapsed(tax_runs_both_sides("nats", &[]));
}

#[cfg(feature = "rabbitmq")]
#[test]
fn the_rabbitmq_tax_runs_both_sides_and_has_not_collapsed() {
    if !support::rabbitmq() {
        return;
    }
    has_not_collapsed(tax_runs_both_sides("rabbitmq", &[]));
}

#[cfg(feature = "pgmq")]
#[test]
fn the_pgmq_tax_runs_both_sides_and_has_not_collapsed() {
    if !support::pgmq_ready() {
        return;
    }
    has_not_collapsed(tax_runs_both_sides("pgmq", &[]));
}

#[cfg(feature = "kafka")]
#[test]
fn the_kafka_tax_runs_both_sides_and_has_not_collapsed() {
    if !support::kafka() {
        return;
    }
    // Topics of their own: tansu's storage has panicked on topics deleted and made
    // again under the same names (compose/kafka).
    has_not_collapsed(tax_runs_both_sides("kafka", &["prefix=cbtax-".into()]));
}

/// Queen's bare loop (adapters/src/queen/bare.rs) through the same checks. Runs where a
/// Queen server is given (`CROSSBENCH_QUEEN_URL`); CI cannot provision one, so without
/// the variable it skips with a message, also under `CI`.
#[cfg(feature = "queen")]
#[test]
fn the_queen_tax_runs_both_sides_and_has_not_collapsed() {
    let Some(url) = support::queen_url("selftest_tax_queen") else {
        return;
    };
    has_not_collapsed(tax_runs_both_sides("queen", &[format!("queen.url={url}")]));
}

/// The tax printed and written is under the collapse floor.
fn has_not_collapsed((system, tax, t): (String, f64, Value)) {
    eprintln!(
        "{system}: tax {tax:.2} (bare {} µs, crossbench {} µs per delivery; debug build)",
        t["bare"]["median"], t["crossbench"]["median"]
    );
    assert!(
        tax <= COLLAPSE,
        "{system}: the harness tax is {tax:.2}, above the collapse floor {COLLAPSE} \
         (bare {} µs, crossbench {} µs per delivery)",
        t["bare"]["median"],
        t["crossbench"]["median"]
    );
}

/// One run of each side at 500 msg/s for 2 s: the JSON is well-formed, and each side
/// delivered and acked everything it published. Gives the system, the tax and the JSON.
fn tax_runs_both_sides(system: &str, sets: &[String]) -> (String, f64, Value) {
    let _one = support::serial();
    let tmp = tempfile::tempdir().unwrap();
    let json = tmp.path().join("tax.json");
    // A bare Kafka run whose consumer group rebalanced re-reads from the committed
    // offsets; the command leaves it out (`outcome: re-read`), as it must. That is the
    // broker's group protocol, not the harness: such a sitting is run again, at most
    // twice (CI of 24ec1338: 20 re-read of 1 510 on tansu, 1.3 %).
    let mut attempt = 0;
    let (stdout, t) = loop {
        attempt += 1;
        let mut cmd = binary();
        cmd.args([
            "selftest", "tax", "--system", system, "--rate", "500", "--secs", "2", "--runs", "1",
        ])
        // A debug build on a loaded machine may not hold its rate or its schedule:
        // that is a speed, and the test is about correctness.
        .args(["--set", "warmup=1s", "--set", "void.loader_cpu_max=1"])
        .args(["--set", "void.schedule_lag_p99_max=10s"]);
        for s in sets {
            cmd.args(["--set", s]);
        }
        let out = cmd.arg("--json").arg(&json).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let code = out.status.code();
        // 0 PASS, or 8 when a side did not keep the rate; never 3 (something lost).
        assert!(
            matches!(code, Some(0) | Some(8)),
            "{system}: exit {code:?}\n{stdout}\n{stderr}"
        );
        let t: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let reread_only = t["left_out"].as_u64().is_some_and(|n| n > 0)
            && t["runs"].as_array().is_some_and(|runs| {
                runs.iter()
                    .filter(|r| r["comparable"] == false)
                    .all(|r| r["side"] == "bare" && r["outcome"] == "re-read")
            });
        if reread_only && attempt < 3 {
            eprintln!("{system}: the bare run re-read after a rebalance (left out); again");
            continue;
        }
        break (stdout, t);
    };
    assert_eq!(t["system"], system);
    assert_eq!(t["rate_msgs_per_sec"], 500);
    assert_eq!(t["complete"], true, "{t:#}");
    assert_eq!(t["left_out"], 0, "{t:#}");
    let runs = t["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{t:#}");
    for side in ["bare", "crossbench"] {
        let r = runs.iter().find(|r| r["side"] == side).unwrap();
        let published = r["published"].as_u64().unwrap();
        // 1 500 scheduled (1 s of warm-up and 2 s of window at 500 msg/s); a closed-loop
        // bare side on a slow machine may publish fewer. The claim is that what was
        // published was delivered and acked, so half the schedule is enough to say it
        // ran.
        assert!(published >= 750, "{system} {side}: {r}");
        assert!(
            r["consumed"].as_u64().unwrap() >= published,
            "{system} {side}: {r}"
        );
        assert_eq!(r["acked"].as_u64(), Some(published), "{system} {side}: {r}");
        assert_eq!(r["complete"], true, "{system} {side}: {r}");
        // A run that re-read what its group had acked is left out, not compared.
        assert_eq!(r["comparable"], true, "{system} {side}: {r}");
        assert!(
            r["deliveries_in_window"].as_u64().unwrap() > 0,
            "{system} {side}: {r}"
        );
        assert!(
            r["cpu_us_per_delivery"].as_f64().unwrap() > 0.0,
            "{system} {side}: {r}"
        );
        assert!(
            stdout.contains(&format!("run 1 {side}")),
            "{side} line in:\n{stdout}"
        );
    }
    assert!(t["bare"]["median"].as_f64().unwrap() > 0.0);
    assert!(t["crossbench"]["median"].as_f64().unwrap() > 0.0);
    let tax = t["tax"].as_f64().unwrap();
    assert!(tax.is_finite() && tax > 0.0, "{tax}");
    assert!(stdout.contains("harness tax"), "{stdout}");
    (system.to_string(), tax, t)
}

#[test]
fn the_control_broker_has_no_bare_loop() {
    let out = binary()
        .args([
            "selftest", "tax", "--system", "mem", "--secs", "1", "--runs", "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "bad input");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("control broker"), "{stderr}");
}
