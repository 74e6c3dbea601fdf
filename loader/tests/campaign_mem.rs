//! Campaigns and the ceiling search on the control broker: a 2 × 2 matrix with three
//! repeats runs twelve cells in an interleaved order; a bad matrix path is bad input
//! with nothing run; `--resume` after a kill runs only what is missing; the ceiling
//! search brackets a known capacity.

mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loader::campaign::ceiling::{self, CeilingRequest};
use loader::campaign::record::{CampaignRecord, CellStatus};
use loader::campaign::{self, CampaignRequest};
use loader::cli::exit::Exit;
use loader::pacing::pacer::Timing;
use support::{stop_with, wait_rated};

/// A campaign file in `dir`: smoke cells of `duration`, a 2 × 2 matrix, `repeats`.
fn campaign_file(dir: &Path, duration: &str, repeats: u32, matrix: &str) -> PathBuf {
    let p = dir.join("c.yaml");
    std::fs::write(
        &p,
        format!(
            "campaign: t\nrepeats: {repeats}\nseed: 5\nscenario: {}\nset:\n  duration: {duration}\n  warmup: 500ms\n  void.loader_cpu_max: 1.0\n  void.schedule_lag_p99_max: 1h\nmatrix:\n{matrix}",
            support::scenario("smoke.yaml").display()
        ),
    )
    .unwrap();
    p
}

const MATRIX: &str = "  rate: [100, 200]\n  lane_headroom: [1.5, 2]\n";

/// A request to run the campaign in `file` into `out`, in virtual time.
fn virtual_request(file: &Path, out: &Path) -> CampaignRequest {
    let mut req = CampaignRequest::new(file);
    req.out = Some(out.to_path_buf());
    req.timing = Timing::Virtual;
    req
}

#[test]
fn a_two_by_two_matrix_with_three_repeats_runs_twelve_cells_interleaved() {
    let tmp = tempfile::tempdir().unwrap();
    let file = campaign_file(tmp.path(), "2s", 3, MATRIX);
    let out = tmp.path().join("out");
    let req = virtual_request(&file, &out);
    let done = campaign::execute(&req).expect("the campaign runs");
    assert_eq!(done.exit, Exit::Pass, "{}", done.text);
    assert_eq!(done.ran, 12);
    let rec = CampaignRecord::read(&out).unwrap();
    assert_eq!(rec.status, "complete");
    assert_eq!(rec.arms.len(), 4);
    assert_eq!(rec.cells.len(), 12);
    assert_eq!(rec.seed, 5);
    for c in &rec.cells {
        assert_eq!(c.status, CellStatus::Done, "{c:?}");
        assert_eq!(c.outcome.map(|o| o.name()), Some("PASS"), "{c:?}");
        assert!(out.join(&c.dir).join("result.json").is_file(), "{c:?}");
    }
    // Interleaved: each block of four runs every arm once, the second block in the
    // first's reverse order (ABBA), and the order is not simply arm by arm.
    let arms_of = |block: usize| -> Vec<String> {
        rec.cells[block * 4..block * 4 + 4]
            .iter()
            .map(|c| c.arm.clone())
            .collect()
    };
    for b in 0..3 {
        let mut a = arms_of(b);
        assert!(rec.cells[b * 4..b * 4 + 4]
            .iter()
            .all(|c| c.repeat == b as u32 + 1));
        a.sort();
        a.dedup();
        assert_eq!(a.len(), 4, "block {b}: {:?}", arms_of(b));
    }
    let mut rev = arms_of(1);
    rev.reverse();
    assert_eq!(arms_of(0), rev);
    assert_eq!(
        rec.order,
        rec.cells.iter().map(|c| c.id.clone()).collect::<Vec<_>>()
    );
    // The closing table has every arm, with medians and intervals.
    for a in &rec.arms {
        assert!(done.text.contains(&a.id), "{}", done.text);
    }
    assert!(done.text.contains("3 PASS"), "{}", done.text);
    // The report reads the campaign: the same arms, three records each.
    let v = report::campaign::CampaignView::load(&out).unwrap();
    assert!(v
        .arms
        .iter()
        .all(|a| a.cells.len() == 3 && a.outcomes.pass == 3));
}

#[test]
fn a_bad_matrix_path_is_exit_2_with_nothing_run() {
    let tmp = tempfile::tempdir().unwrap();
    let file = campaign_file(tmp.path(), "1s", 2, "  ratee: [100, 200]\n");
    let out = tmp.path().join("out");
    let o = support::binary()
        .args(["campaign"])
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("matrix.ratee"), "{err}");
    assert!(!out.exists(), "nothing is written for a bad campaign");
    // An unknown field of the campaign file itself, likewise.
    std::fs::write(&file, "campaign: t\nscenario: s.yaml\nrepeat: 3\n").unwrap();
    let o = support::binary()
        .args(["campaign"])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("repeat"), "{err}");
    // A value out of range in a group's `set`: the error names that group's field,
    // not the first field the campaign sets.
    std::fs::write(
        &file,
        format!(
            "campaign: t\nset:\n  duration: 1s\ngroups:\n  - name: a\n    scenario: {0}\n  - name: b\n    scenario: {0}\n    set:\n      void.loader_cpu_max: 0.0\n",
            support::scenario("smoke.yaml").display()
        ),
    )
    .unwrap();
    let o = support::binary()
        .args(["campaign"])
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("field `groups[1].set.void.loader_cpu_max`"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is written for a bad campaign");
}

#[test]
fn resume_after_a_kill_runs_only_what_is_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let file = campaign_file(tmp.path(), "1s", 2, MATRIX);
    let out = tmp.path().join("out");
    let mut child = support::binary()
        .args(["campaign", "-q", "--host-probe", "0"])
        .arg(&file)
        .arg("--out")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once some cells are done (it may first wait for the run lock).
    let deadline = Instant::now() + Duration::from_secs(300);
    let done_before = loop {
        assert!(Instant::now() < deadline, "the campaign made no progress");
        let n = CampaignRecord::read(&out).map_or(0, |r| {
            r.cells
                .iter()
                .filter(|c| c.status == CellStatus::Done)
                .count()
        });
        if n >= 3 {
            break n;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the campaign ended early"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = CampaignRecord::read(&out).unwrap();
    let done: Vec<_> = killed
        .cells
        .iter()
        .filter(|c| c.status == CellStatus::Done)
        .map(|c| c.id.clone())
        .collect();
    assert!(
        done.len() >= done_before && done.len() < 8,
        "{}",
        done.len()
    );
    assert_eq!(
        killed.status, "running",
        "a killed campaign's record says it was running"
    );
    let stamp = |id: &str| {
        let c = killed.cells.iter().find(|c| c.id == id).unwrap();
        std::fs::metadata(out.join(&c.dir).join("result.json"))
            .unwrap()
            .modified()
            .unwrap()
    };
    let before: Vec<_> = done.iter().map(|id| stamp(id)).collect();

    let mut req = CampaignRequest::new(&file);
    req.out = Some(out.clone());
    req.resume = true;
    let resumed = campaign::execute(&req).expect("the campaign resumes");
    assert_eq!(
        resumed.ran,
        8 - done.len(),
        "only the missing cells run again"
    );
    let rec = CampaignRecord::read(&out).unwrap();
    assert_eq!(rec.status, "complete");
    assert!(rec.cells.iter().all(|c| c.status == CellStatus::Done));
    // Two sittings: the killed run (never ended) and the resume, each naming its
    // machine and its build.
    assert_eq!(rec.sittings.len(), 2, "{:?}", rec.sittings);
    assert!(rec.sittings[0].ended_utc.is_none(), "{:?}", rec.sittings);
    assert_eq!(rec.sittings[1].cells_run, 8 - done.len());
    assert!(
        rec.sittings[1].machine.ends_with("cores")
            && !rec.sittings[1].crossbench.git_commit.is_empty(),
        "{:?}",
        rec.sittings[1]
    );
    let after: Vec<_> = done.iter().map(|id| stamp(id)).collect();
    assert_eq!(
        before, after,
        "the cells done before the kill were left alone"
    );
    // A resume with a changed campaign file is refused.
    std::fs::write(
        &file,
        std::fs::read_to_string(&file)
            .unwrap()
            .replace("seed: 5", "seed: 6"),
    )
    .unwrap();
    let e = campaign::execute(&req).unwrap_err();
    assert_eq!(Exit::of_error(&e), Exit::BadInput, "{e:#}");
}

#[test]
fn the_ceiling_search_brackets_a_known_capacity() {
    // The control broker hands out at most 6000 messages/s; a pipeline event makes
    // six deliveries, so the system holds up to 1000 ev/s (1010 with the 1 % slack
    // of `served: 0.99`).
    let tmp = tempfile::tempdir().unwrap();
    let req = capped_search(200, 4000, tmp.path());
    let (exit, dir, rec) = ceiling::execute(&req).expect("the search runs");
    assert_eq!(exit, Exit::Pass);
    let (lo, hi) = (rec.ceiling.held.unwrap(), rec.ceiling.not_held.unwrap());
    assert!(
        lo <= 1010 && hi >= 1000,
        "[{lo}, {hi}] must contain the capacity (1000–1010 ev/s): {:#?}",
        rec.probes
    );
    assert!(
        hi as f64 / lo as f64 <= 1.1 + 1e-9,
        "within one bisection step: [{lo}, {hi}]"
    );
    assert_eq!(rec.ceiling.bound.as_deref(), Some("system"));
    // Confirmed with repeats at both sides.
    assert!(rec.probes.iter().filter(|p| p.rate == lo).count() >= 2);
    assert!(rec.probes.iter().filter(|p| p.rate == hi).count() >= 1);
    assert!(dir.join("ceiling.json").is_file());
}

#[test]
fn a_capacity_above_the_range_is_reported_as_above_its_top() {
    // The same broker (1000–1010 ev/s) searched between 200 and 800: both ends hold,
    // so the answer is "at least 800, the ceiling is above the range", with the top
    // confirmed by repeats, never the bottom of the range (what the search said before).
    let tmp = tempfile::tempdir().unwrap();
    let req = capped_search(200, 800, tmp.path());
    let (exit, _dir, rec) = ceiling::execute(&req).expect("the search runs");
    assert_eq!(exit, Exit::Pass);
    assert_eq!(rec.ceiling.held, Some(800), "{:#?}", rec.probes);
    assert_eq!(rec.ceiling.not_held, None, "{:#?}", rec.probes);
    assert!(rec.ceiling.text.contains("above"), "{}", rec.ceiling.text);
    assert_eq!(
        rec.probes
            .iter()
            .filter(|p| p.rate == 800 && p.held)
            .count(),
        2,
        "the top confirmed by the repeats: {:#?}",
        rec.probes
    );
}

/// A ceiling search on the control broker capped at 6000 deliveries/s (1000–1010 ev/s),
/// 2 repeats, resolution 1.1, virtual time.
fn capped_search(low: u64, high: u64, tmp: &std::path::Path) -> CeilingRequest {
    let mut req = CeilingRequest::new(support::scenario("smoke.yaml"), low, high);
    req.sets = [
        "mem.max_deliveries_per_sec=6000",
        "duration=3s",
        "warmup=1s",
        "drain.max=10s",
        "void.loader_cpu_max=1.0",
        "void.schedule_lag_p99_max=1h",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    req.repeats = 2;
    req.served = 0.99;
    req.resolution = 1.1;
    req.out = Some(tmp.join("ceiling"));
    req.timing = Timing::Virtual;
    req
}

/// A ceiling campaign of two arms on the control broker capped at 6000 deliveries/s
/// (1000–1010 ev/s), the second arm searched over `b_between`.
fn ceiling_campaign_file(dir: &Path, b_between: [u64; 2]) -> PathBuf {
    let p = dir.join("ceiling.yaml");
    let smoke = support::scenario("smoke.yaml");
    std::fs::write(
        &p,
        format!(
            "campaign: c\nceiling:\n  between: [200, 4000]\n  repeats: 2\n  served: 0.99\n  resolution: 1.1\nset:\n  mem.max_deliveries_per_sec: 6000\n  duration: 3s\n  warmup: 1s\n  drain.max: 10s\n  void.loader_cpu_max: 1.0\n  void.schedule_lag_p99_max: 1h\ngroups:\n  - name: a\n    scenario: {s}\n  - name: b\n    scenario: {s}\n    between: [{}, {}]\n",
            b_between[0],
            b_between[1],
            s = smoke.display()
        ),
    )
    .unwrap();
    p
}

#[test]
fn rerun_searches_one_arm_of_a_ceiling_campaign_again_and_leaves_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    // Arm b's first range is all below the capacity: "at least 800", unconfirmed above.
    let file = ceiling_campaign_file(tmp.path(), [200, 800]);
    let out = tmp.path().join("out");
    let req = virtual_request(&file, &out);
    let first = campaign::execute(&req).expect("the ceiling campaign runs");
    assert_eq!(first.ran, 2);
    let read = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join("ceiling-campaign.json")).unwrap())
            .unwrap()
    };
    let rec = read();
    assert_eq!(rec["arms"][1]["held"], 800, "{rec:#}");
    assert!(rec["arms"][1]["not_held"].is_null(), "{rec:#}");
    let a_stamp = || {
        std::fs::metadata(out.join("a").join("ceiling.json"))
            .unwrap()
            .modified()
            .unwrap()
    };
    let a_before = a_stamp();
    let a_record = rec["arms"][0].clone();

    // An arm the campaign lacks: bad input, nothing touched.
    let mut bad = req.clone();
    bad.resume = true;
    bad.rerun = vec!["nope".into()];
    let e = campaign::execute(&bad).unwrap_err();
    assert_eq!(Exit::of_error(&e), Exit::BadInput, "{e:#}");
    assert!(format!("{e:#}").contains("a, b"), "names the arms: {e:#}");
    // Without --resume it would start a campaign over the old one: refused as well.
    let mut bad = req.clone();
    bad.rerun = vec!["b".into()];
    let e = campaign::execute(&bad).unwrap_err();
    assert_eq!(Exit::of_error(&e), Exit::BadInput, "{e:#}");
    assert_eq!(read(), rec, "nothing was written by the refused requests");

    // The file widens arm b's range; --rerun b searches b again over it.
    ceiling_campaign_file(tmp.path(), [200, 4000]);
    let mut again = req.clone();
    again.resume = true;
    again.rerun = vec!["b".into()];
    let done = campaign::execute(&again).expect("the rerun runs");
    assert_eq!(done.ran, 1, "only arm b is searched again");
    let rec = read();
    assert_eq!(rec["arms"][0], a_record, "arm a's record is untouched");
    assert_eq!(a_stamp(), a_before, "arm a's search is untouched");
    let b = &rec["arms"][1];
    assert_eq!(b["between"], serde_json::json!([200, 4000]), "{b:#}");
    let (lo, hi) = (b["held"].as_u64().unwrap(), b["not_held"].as_u64().unwrap());
    assert!(lo <= 1010 && hi >= 1000, "[{lo}, {hi}]: {b:#}");
    assert!(
        b["started_utc"].is_string() && b["ended_utc"].is_string(),
        "{b:#}"
    );
    assert_eq!(rec["status"], "complete");
}

#[test]
fn rerun_runs_one_arm_of_a_matrix_campaign_again() {
    let tmp = tempfile::tempdir().unwrap();
    let file = campaign_file(tmp.path(), "1s", 2, MATRIX);
    let out = tmp.path().join("out");
    let mut req = virtual_request(&file, &out);
    assert_eq!(campaign::execute(&req).unwrap().ran, 8);
    let rec = CampaignRecord::read(&out).unwrap();
    let arm = rec.arms[2].id.clone();
    let stamps = |rec: &CampaignRecord| -> Vec<(String, std::time::SystemTime)> {
        rec.cells
            .iter()
            .map(|c| {
                let t = std::fs::metadata(out.join(&c.dir).join("result.json"))
                    .unwrap()
                    .modified()
                    .unwrap();
                (c.arm.clone(), t)
            })
            .collect()
    };
    let before = stamps(&rec);
    req.resume = true;
    req.rerun = vec![arm.clone()];
    let done = campaign::execute(&req).unwrap();
    assert_eq!(done.ran, 2, "the arm's two repeats, nothing else");
    let rec = CampaignRecord::read(&out).unwrap();
    assert_eq!(rec.status, "complete");
    for ((a, t0), (_, t1)) in before.iter().zip(stamps(&rec)) {
        if *a == arm {
            assert!(t1 > *t0, "{a}: run again");
        } else {
            assert_eq!(*t0, t1, "{a}: left alone");
        }
    }
}

/// Two groups of one smoke cell each; group b at `b_rate`.
fn two_group_file(dir: &Path, b_rate: u32) -> PathBuf {
    let p = dir.join("g.yaml");
    let smoke = support::scenario("smoke.yaml");
    std::fs::write(
        &p,
        format!(
            "campaign: g\nrepeats: 2\nseed: 5\nset: {{duration: 1s, warmup: 500ms, void.loader_cpu_max: 1.0, void.schedule_lag_p99_max: 1h}}\ngroups:\n  - {{name: a, scenario: {s}, set: {{rate: 100}}}}\n  - {{name: b, scenario: {s}, set: {{rate: {b_rate}}}}}\n",
            s = smoke.display()
        ),
    )
    .unwrap();
    p
}

/// A method fixed after a campaign ran (an arm's overrides changed in the file): a
/// plain --resume refuses the changed file, `--rerun` of the changed arm runs all its
/// cells again with the new overrides, records them, and leaves the other arm alone.
#[test]
fn rerun_takes_the_new_overrides_of_the_arm_it_runs_again() {
    let tmp = tempfile::tempdir().unwrap();
    let file = two_group_file(tmp.path(), 100);
    let out = tmp.path().join("out");
    let req = virtual_request(&file, &out);
    assert_eq!(campaign::execute(&req).unwrap().ran, 4);
    let read = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join("campaign.json")).unwrap()).unwrap()
    };
    let a_before = read()["arms"][0].clone();
    let stamp = |arm: &str| {
        std::fs::metadata(out.join(arm).join("r1").join("result.json"))
            .unwrap()
            .modified()
            .unwrap()
    };
    let a_stamp = stamp("a");

    two_group_file(tmp.path(), 150);
    let mut resume = req.clone();
    resume.resume = true;
    let e = campaign::execute(&resume).unwrap_err();
    assert_eq!(Exit::of_error(&e), Exit::BadInput, "{e:#}");
    assert!(format!("{e:#}").contains("other arms"), "{e:#}");
    // Rerunning the arm that did not change does not admit the one that did.
    let mut wrong = resume.clone();
    wrong.rerun = vec!["a".into()];
    let e = campaign::execute(&wrong).unwrap_err();
    assert_eq!(Exit::of_error(&e), Exit::BadInput, "{e:#}");

    let mut rerun = resume.clone();
    rerun.rerun = vec!["b".into()];
    let done = campaign::execute(&rerun).expect("the rerun runs");
    assert_eq!(done.ran, 2, "arm b's two repeats, nothing else");
    let rec = read();
    assert_eq!(rec["status"], "complete");
    assert_eq!(rec["arms"][0], a_before, "arm a's record is untouched");
    assert_eq!(stamp("a"), a_stamp, "arm a's cells are untouched");
    let b_sets = rec["arms"][1]["sets"].to_string();
    assert!(
        b_sets.contains("150") && !b_sets.contains("100"),
        "{b_sets}"
    );
    for r in ["r1", "r2"] {
        let cell: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join("b").join(r).join("result.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(
            cell["workload"]["rate_events_per_sec"], 150,
            "b/{r} ran at the new rate"
        );
    }
}

/// `crossbench campaign -q <file> --out <out> <args>`, with `var` set to `value` (or
/// unset when `None`).
fn run_campaign(
    file: &Path,
    out: &Path,
    args: &[&str],
    var: &str,
    value: Option<&str>,
) -> std::process::Output {
    let mut c = support::binary();
    // No host probe: it would burn both cores for 20 s beside this binary's other tests.
    c.args(["campaign", "-q", "--host-probe", "0"])
        .arg(file)
        .arg("--out")
        .arg(out);
    c.args(args).env_remove(var);
    if let Some(v) = value {
        c.env(var, v);
    }
    c.output().unwrap()
}

/// A campaign of two smoke arms, `a` and `b`, two repeats each, 1 s windows; `b_extra`
/// is appended to arm `b`'s group (its `requires_env`, its `set`).
fn two_smoke_arms(dir: &Path, b_extra: &str) -> PathBuf {
    let file = dir.join("c.yaml");
    let smoke = support::scenario("smoke.yaml");
    std::fs::write(
        &file,
        format!(
            "campaign: t\nrepeats: 2\nseed: 5\nset:\n  duration: 1s\n  warmup: 500ms\n  void.loader_cpu_max: 1.0\n  void.schedule_lag_p99_max: 1h\ngroups:\n  - name: a\n    scenario: {s}\n  - name: b\n    scenario: {s}\n{b_extra}",
            s = smoke.display()
        ),
    )
    .unwrap();
    file
}

/// Each cell's status of `arm`, in the recorded order.
fn statuses(rec: &CampaignRecord, arm: &str) -> Vec<CellStatus> {
    rec.cells
        .iter()
        .filter(|c| c.arm == arm)
        .map(|c| c.status)
        .collect()
}

/// An archived campaign completed later: arms recorded "not run" (a variable they
/// need was unset) run with `--resume --only` once it is set, and the other arms'
/// records, whose logs were dropped as an archive drops them, are left alone (a plain
/// `--resume` would verify them again and, finding no logs, run them again).
#[test]
fn resume_only_runs_the_arms_that_could_not_run_before_and_leaves_the_rest() {
    const VAR: &str = "CROSSBENCH_TEST_ONLY_RATE";
    let tmp = tempfile::tempdir().unwrap();
    let file = two_smoke_arms(
        tmp.path(),
        &format!("    requires_env: [{VAR}]\n    set:\n      rate: \"${{{VAR}}}\"\n"),
    );
    let out = tmp.path().join("out");
    let campaign = |args: &[&str], rate: Option<&str>| run_campaign(&file, &out, args, VAR, rate);
    let first = campaign(&[], None);
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let rec = CampaignRecord::read(&out).unwrap();
    assert_eq!(statuses(&rec, "a"), [CellStatus::Done, CellStatus::Done]);
    assert_eq!(
        statuses(&rec, "b"),
        [CellStatus::NotRun, CellStatus::NotRun]
    );
    // Archive arm a: its stream logs go, its result.json stays.
    let mut stamps = Vec::new();
    for c in rec.cells.iter().filter(|c| c.arm == "a") {
        let d = out.join(&c.dir);
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "log") {
                std::fs::remove_file(p).unwrap();
            }
        }
        stamps.push(
            std::fs::metadata(d.join("result.json"))
                .unwrap()
                .modified()
                .unwrap(),
        );
    }
    // Bad patterns are bad input, and nothing runs.
    let bad = campaign(&["--resume", "--only", "zzz*"], Some("150"));
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--only zzz*"));

    // --dry-run with --resume lists what the resume would run, and runs nothing.
    let dry = campaign(&["--resume", "--only", "b", "--dry-run"], Some("150"));
    assert_eq!(dry.status.code(), Some(0), "{dry:?}");
    let listed = String::from_utf8_lossy(&dry.stdout);
    assert!(
        listed.contains("b#1") && listed.contains("b#2") && !listed.contains("a#"),
        "{listed}"
    );
    assert!(listed.contains("(2 cells to run)"), "{listed}");
    let rec = CampaignRecord::read(&out).unwrap();
    assert_eq!(
        statuses(&rec, "b"),
        [CellStatus::NotRun, CellStatus::NotRun]
    );
    // Without --only, the archived arm a would run again: its logs are gone.
    let plain = campaign(&["--resume", "--dry-run"], Some("150"));
    assert!(
        String::from_utf8_lossy(&plain.stdout).contains("(4 cells to run)"),
        "{plain:?}"
    );

    let second = campaign(&["--resume", "--only", "b"], Some("150"));
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    let rec = CampaignRecord::read(&out).unwrap();
    assert_eq!(rec.status, "complete");
    assert_eq!(statuses(&rec, "a"), [CellStatus::Done, CellStatus::Done]);
    assert_eq!(statuses(&rec, "b"), [CellStatus::Done, CellStatus::Done]);
    let b = rec.arms.iter().find(|a| a.id == "b").unwrap();
    assert_eq!(b.not_run, None);
    assert_eq!(b.system, "mem");
    assert!(b.sets.contains(&"rate=150".to_string()), "{:?}", b.sets);
    for c in rec.cells.iter().filter(|c| c.arm == "b") {
        let r: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.join(&c.dir).join("result.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(r["outcome"], "PASS", "{c:?}");
        let inv = std::fs::read_to_string(out.join(&c.dir).join("invocation.txt")).unwrap();
        assert!(
            inv.contains("\nrate: 150"),
            "{c:?}: the variable's value\n{inv}"
        );
    }
    let after: Vec<_> = rec
        .cells
        .iter()
        .filter(|c| c.arm == "a")
        .map(|c| {
            std::fs::metadata(out.join(&c.dir).join("result.json"))
                .unwrap()
                .modified()
                .unwrap()
        })
        .collect();
    assert_eq!(stamps, after, "arm a's archived records are left alone");
}

/// A ceiling campaign's arm recorded "not run" (its variable unset) is searched on a
/// `--resume` once the variable is set, and its record no longer says "not run".
/// (`served: 0.9`: in 1 s windows, 1 % is 10 ms of deliveries, and whether 300 ev/s
/// held at 0.99 would depend on the machine; the claim is the resume's.)
#[test]
fn a_ceiling_arm_that_could_not_run_before_is_searched_on_resume() {
    const VAR: &str = "CROSSBENCH_TEST_CEILING_CAP";
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("ceiling.yaml");
    std::fs::write(
        &file,
        format!(
            "campaign: c\nceiling:\n  between: [300, 3000]\n  repeats: 1\n  served: 0.9\n  resolution: 2\nset:\n  duration: 1s\n  warmup: 500ms\n  drain.max: 10s\n  void.loader_cpu_max: 1.0\n  void.schedule_lag_p99_max: 1h\ngroups:\n  - name: capped\n    scenario: {}\n    requires_env: [{VAR}]\n    set:\n      mem.max_deliveries_per_sec: \"${{{VAR}}}\"\n",
            support::scenario("smoke.yaml").display()
        ),
    )
    .unwrap();
    let out = tmp.path().join("out");
    let campaign = |args: &[&str], cap: Option<&str>| run_campaign(&file, &out, args, VAR, cap);
    let read = || -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(out.join("ceiling-campaign.json")).unwrap())
            .unwrap()
    };
    let first = campaign(&[], None);
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let arm = &read()["arms"][0];
    assert!(
        arm["not_run"].is_string() && arm["text"].is_null(),
        "{arm:#}"
    );

    let second = campaign(&["--resume"], Some("6000"));
    assert_eq!(second.status.code(), Some(0), "{second:?}");
    let arm = &read()["arms"][0];
    assert!(
        arm["not_run"].is_null(),
        "searched, so not 'not run': {arm:#}"
    );
    assert_eq!(arm["system"], "mem", "{arm:#}");
    assert!(arm["text"].is_string() && arm["held"].is_u64(), "{arm:#}");
}

/// `crossbench campaign -q <file> --out <out>` started, its output piped.
fn spawn_campaign(file: &Path, out: &Path) -> std::process::Child {
    support::binary()
        .args(["campaign", "-q", "--host-probe", "0"])
        .arg(file)
        .arg("--out")
        .arg(out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

/// Ctrl-C in the middle of a ceiling campaign: the campaign stops after the arm it
/// cut short, says `interrupted` and exits 130; the cut-short cell is not counted as a
/// rate that did not hold, so that arm has no answer, only the interruption as its
/// error; the next arm never starts; `--resume` then searches both.
#[test]
fn a_sigint_leaves_a_ceiling_campaign_interrupted_and_resume_finishes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let file = ceiling_campaign_file(tmp.path(), [200, 800]);
    let out = tmp.path().join("out");
    let child = spawn_campaign(&file, &out);
    // The search's first cell is arm a's low end, 200 ev/s.
    wait_rated(&out.join("a").join("r200-1"));
    let (o, took) = stop_with(child, 2, 130);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(took < Duration::from_secs(60), "{took:?}");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ceiling-campaign.json")).unwrap())
            .unwrap();
    assert_eq!(rec["status"], "interrupted", "{rec:#}");
    let a = &rec["arms"][0];
    assert!(
        a["text"].is_null() && a["held"].is_null(),
        "no answer: {a:#}"
    );
    assert!(
        a["error"].as_str().unwrap_or("").contains("interrupted"),
        "{a:#}"
    );
    assert!(
        !out.join("a").join("ceiling.json").exists(),
        "no ceiling.json claims an answer"
    );
    let b = &rec["arms"][1];
    assert!(
        b["started_utc"].is_null() && b["text"].is_null(),
        "arm b never started: {b:#}"
    );
    assert!(stdout.contains("interrupted"), "{stdout}");

    let mut req = virtual_request(&file, &out);
    req.resume = true;
    let done = campaign::execute(&req).expect("the campaign resumes");
    assert_eq!(done.exit, Exit::Pass);
    assert_eq!(done.ran, 2, "both arms are searched");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ceiling-campaign.json")).unwrap())
            .unwrap();
    assert_eq!(rec["status"], "complete", "{rec:#}");
    for a in rec["arms"].as_array().unwrap() {
        assert!(a["error"].is_null() && a["text"].is_string(), "{a:#}");
    }
}

/// Spawn a matrix campaign of four cells of `duration` each and wait until its first
/// cell is in its rated window: the child, the campaign's directory, and that cell's.
fn a_matrix_campaign_in_its_first_cell(
    tmp: &Path,
    duration: &str,
) -> (std::process::Child, PathBuf, PathBuf) {
    let file = campaign_file(tmp, duration, 1, MATRIX);
    let out = tmp.join("out");
    let child = spawn_campaign(&file, &out);
    let deadline = Instant::now() + Duration::from_secs(300);
    let first = loop {
        assert!(
            Instant::now() < deadline,
            "the campaign never started a cell"
        );
        if let Ok(r) = CampaignRecord::read(&out) {
            if let Some(c) = r.cells.iter().find(|c| c.started_utc.is_some()) {
                break out.join(&c.dir);
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    wait_rated(&first);
    (child, out, first)
}

/// After a signal: the campaign says `interrupted`, its first cell has `status`, and
/// the three others never ran.
fn assert_stopped_after_the_first_cell(out: &Path, status: CellStatus) -> CampaignRecord {
    let rec = CampaignRecord::read(out).unwrap();
    assert_eq!(rec.status, "interrupted");
    let statuses: Vec<CellStatus> = rec.cells.iter().map(|c| c.status).collect();
    let ran: Vec<&CellStatus> = statuses
        .iter()
        .filter(|s| **s != CellStatus::Pending)
        .collect();
    assert_eq!(ran, [&status], "{statuses:?}");
    assert_eq!(
        statuses
            .iter()
            .filter(|s| **s == CellStatus::Pending)
            .count(),
        3,
        "no cell ran after the signal: {statuses:?}"
    );
    rec
}

/// Ctrl-C in the middle of a matrix campaign: the running cell goes on to its end
/// (its record is whole: PASS, not INTERRUPTED), no cell after it starts, and the
/// campaign says `interrupted` and exits 130.
#[test]
fn a_sigint_lets_the_running_cell_end_then_stops_the_matrix_campaign() {
    let tmp = tempfile::tempdir().unwrap();
    let (child, out, first) = a_matrix_campaign_in_its_first_cell(tmp.path(), "4s");
    let (o, _) = stop_with(child, SIGINT, 130);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("3 of 4 cells still to run") && stdout.contains("--resume"),
        "the closing lines say what is left and how to run it: {stdout}"
    );
    let rec = assert_stopped_after_the_first_cell(&out, CellStatus::Done);
    let c = rec
        .cells
        .iter()
        .find(|c| c.status == CellStatus::Done)
        .unwrap();
    assert_eq!(c.outcome.map(|o| o.name()), Some("PASS"), "{c:?}");
    assert!(c.error.is_none(), "{c:?}");
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(first.join("result.json")).unwrap()).unwrap();
    assert_eq!(r["outcome"], "PASS", "the cell ran to its end: {r}");
}

/// Send `signals` (the last one waited for, with exit `code`) while a 60 s first cell
/// runs: that cell is cut short (it drains briefly and is recorded as interrupted,
/// outcome INTERRUPTED) long before its 60 s were up, and no other cell starts.
fn cut_short_by(signals: &[i32], code: i32) {
    let tmp = tempfile::tempdir().unwrap();
    let (child, out, first) = a_matrix_campaign_in_its_first_cell(tmp.path(), "60s");
    let (last, before) = signals.split_last().unwrap();
    for sig in before {
        support::signal(&child, *sig);
        std::thread::sleep(Duration::from_millis(500));
    }
    let (_, took) = stop_with(child, *last, code);
    assert!(took < Duration::from_secs(45), "stopped after {took:?}");
    assert_stopped_after_the_first_cell(&out, CellStatus::Interrupted);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(first.join("result.json")).unwrap()).unwrap();
    assert_eq!(r["outcome"], "INTERRUPTED", "{r}");
}

/// A second Ctrl-C cuts the running cell short; exit 130.
#[test]
fn a_second_sigint_cuts_the_running_cell_short() {
    cut_short_by(&[SIGINT, SIGINT], 130);
}

/// SIGTERM is a supervisor's: it cuts the running cell short at once, with no step
/// that waits for the cell's end; exit 143.
#[test]
fn a_sigterm_cuts_the_running_cell_short_at_once() {
    cut_short_by(&[SIGTERM], 143);
}

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

/// Run, in virtual time, a campaign whose first group (`broken`) is pgmq at a port
/// nothing listens on, so each of its cells ends in an error, and whose second is
/// `second`: `head` gives the campaign's kind and `set` its common settings.
fn run_with_a_broken_group(
    head: &str,
    second: &str,
) -> (tempfile::TempDir, campaign::CampaignDone) {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("c.yaml");
    std::fs::write(
        &file,
        format!(
            "{head}set:\n  duration: 1s\n  warmup: 500ms\n  ramp: 0s\n  drain.max: 10s\n  void.loader_cpu_max: 1.0\n  void.schedule_lag_p99_max: 1h\ngroups:\n  - name: broken\n    scenario: {}\n    set:\n      pgmq.dsn: postgres://postgres@127.0.0.1:1/crossbench\n  - name: {second}\n    scenario: {}\n    set:\n      mem.max_deliveries_per_sec: 6000\n",
            support::scenario("pgmq-smoke.yaml").display(),
            support::scenario("smoke.yaml").display()
        ),
    )
    .unwrap();
    let req = virtual_request(&file, &tmp.path().join("out"));
    let done = campaign::execute(&req).expect("the campaign runs");
    assert_eq!(done.exit, Exit::Internal, "{}", done.text);
    (tmp, done)
}

/// A ceiling arm whose search ends in an error has no answer: the campaign goes on to
/// the next arm, then says `incomplete` and exits 1, never `complete` and 0.
#[test]
fn a_ceiling_arm_that_errs_leaves_the_campaign_incomplete() {
    let (_tmp, done) = run_with_a_broken_group(
        "campaign: c\nceiling:\n  between: [300, 3000]\n  repeats: 1\n  served: 0.99\n  resolution: 2\n",
        "capped",
    );
    let rec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(done.dir.join("ceiling-campaign.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(rec["status"], "incomplete", "{rec:#}");
    let broken = &rec["arms"][0];
    assert!(
        broken["error"].is_string() && broken["text"].is_null(),
        "{broken:#}"
    );
    let capped = &rec["arms"][1];
    assert!(
        capped["error"].is_null() && capped["text"].is_string(),
        "the arm after the error still ran: {capped:#}"
    );
}

/// A matrix cell that ends in an error leaves no record: the campaign runs the other
/// cells, then says `incomplete` and exits 1.
#[test]
fn a_matrix_cell_that_errs_leaves_the_campaign_incomplete() {
    let (_tmp, done) = run_with_a_broken_group("campaign: t\nrepeats: 1\nseed: 5\n", "fine");
    let rec = CampaignRecord::read(&done.dir).unwrap();
    assert_eq!(rec.status, "incomplete");
    let of = |arm: &str| rec.cells.iter().find(|c| c.arm == arm).unwrap();
    assert_eq!(of("broken").status, CellStatus::Failed);
    assert_eq!(of("fine").status, CellStatus::Done);
}

/// The closing lines name each cell that did not PASS and why, in one line: here a
/// VOID arm (its loader allowed 0.01 % of the CPU) beside a PASS arm, in virtual time.
#[test]
fn the_closing_lines_say_why_each_cell_did_not_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("c.yaml");
    std::fs::write(
        &file,
        format!(
            "campaign: t\nrepeats: 2\nseed: 5\nset:\n  duration: 1s\n  warmup: 500ms\n  void.schedule_lag_p99_max: 1h\ngroups:\n  - name: starved\n    scenario: {0}\n    set:\n      void.loader_cpu_max: 0.0001\n  - name: fine\n    scenario: {0}\n    set:\n      void.loader_cpu_max: 1.0\n",
            support::scenario("smoke.yaml").display()
        ),
    )
    .unwrap();
    let req = virtual_request(&file, &tmp.path().join("out"));
    let done = campaign::execute(&req).expect("the campaign runs");
    let rec = CampaignRecord::read(&done.dir).unwrap();
    let void: Vec<&str> = rec
        .cells
        .iter()
        .filter(|c| c.outcome.map(|o| o.name()) == Some("VOID"))
        .map(|c| c.id.as_str())
        .collect();
    assert_eq!(void, ["starved#1", "starved#2"], "{}", done.text);
    assert!(done.text.contains("not PASS (2):"), "{}", done.text);
    for id in void {
        let line = done
            .text
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{id}  VOID: ")))
            .unwrap_or_else(|| panic!("no line for {id}: {}", done.text));
        assert!(line.contains("loader used"), "{line}");
    }
    assert!(!done.text.contains("fine#1  "), "{}", done.text);
}

/// `crossbench campaign` probes the host before its first cell (`--host-probe SECS`),
/// says what it saw on stderr and records it in campaign.json; a resume with nothing
/// left to run does not probe again.
#[test]
fn the_host_probe_runs_before_the_first_cell_and_is_recorded() {
    let tmp = tempfile::tempdir().unwrap();
    let file = campaign_file(tmp.path(), "1s", 1, "  rate: [100]\n");
    let out = tmp.path().join("out");
    let run = |extra: &[&str]| {
        support::binary()
            .args(["campaign", "-q", "--host-probe", "1"])
            .arg(&file)
            .arg("--out")
            .arg(&out)
            .args(extra)
            .output()
            .unwrap()
    };
    let o = run(&[]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let rec = CampaignRecord::read(&out).unwrap();
    assert_eq!(rec.host_probes.len(), 1, "{stderr}");
    let p = &rec.host_probes[0];
    assert!(p.seconds >= 1.0 && p.seconds < 5.0, "{p:?}");
    assert!(p.busy_threads >= 1, "{p:?}");
    // 1 ms sleeps for a second: hundreds of wakeups on an idle machine; at least 20
    // proves it slept and counted however loaded the machine is.
    assert!(p.wakeups >= 20, "{p:?}");
    assert!(
        p.late_max_ms >= p.late_p99_ms && p.late_p99_ms >= p.late_p50_ms,
        "{p:?}"
    );
    assert!(stderr.contains("host probe, 1 s with"), "{stderr}");
    let first_cell = rec.cells[0].started_utc.clone().unwrap();
    assert!(
        p.utc <= first_cell,
        "probed before the first cell: {p:?} {first_cell}"
    );

    let o = run(&["--resume"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let rec = CampaignRecord::read(&out).unwrap();
    assert_eq!(rec.host_probes.len(), 1, "nothing to run, no second probe");
}

/// `crossbench ceiling --host-probe SECS` probes the host before its first cell and
/// records it in ceiling.json.
#[test]
fn the_ceiling_search_records_its_host_probe() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ceiling");
    let o = support::binary()
        .args([
            "ceiling",
            "-q",
            "--host-probe",
            "1",
            "--between",
            "100",
            "105",
        ])
        .args(["--repeats", "1"])
        .arg(support::scenario("smoke.yaml"))
        .args(["--set", "duration=1s", "--set", "warmup=500ms"])
        .args(["--set", "void.loader_cpu_max=1.0"])
        .args(["--set", "void.schedule_lag_p99_max=1h"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let rec: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("ceiling.json")).unwrap()).unwrap();
    let p = &rec["host_probe"];
    assert!(p["wakeups"].as_u64().unwrap_or(0) >= 20, "{rec:#}");
    assert!(p["seconds"].as_f64().unwrap_or(0.0) >= 1.0, "{p:#}");
    assert!(stderr.contains("host probe, 1 s with"), "{stderr}");
}

/// A sitting of some arms: `--only` on a new campaign runs only the arms it selects,
/// records the others "not run" with the reason, and a later `--resume` runs them.
#[test]
fn a_new_campaign_with_only_is_a_sitting_of_those_arms_and_a_resume_runs_the_rest() {
    const VAR: &str = "CROSSBENCH_TEST_SITTING_UNUSED";
    let tmp = tempfile::tempdir().unwrap();
    let file = two_smoke_arms(tmp.path(), "");
    let out = tmp.path().join("out");
    let campaign = |args: &[&str]| run_campaign(&file, &out, args, VAR, None);
    // The dry run counts only the sitting's cells.
    let dry = campaign(&["--only", "b", "--dry-run"]);
    assert_eq!(dry.status.code(), Some(0), "{dry:?}");
    let listed = String::from_utf8_lossy(&dry.stdout);
    assert!(listed.contains("(2 cells to run)"), "{listed}");
    assert!(listed.contains("a#1  (not in this sitting"), "{listed}");
    assert!(!out.exists(), "a dry run writes nothing");
    let first = campaign(&["--only", "b"]);
    assert_eq!(first.status.code(), Some(0), "{first:?}");
    let rec = CampaignRecord::read(&out).unwrap();
    assert_eq!(statuses(&rec, "b"), [CellStatus::Done, CellStatus::Done]);
    assert_eq!(
        statuses(&rec, "a"),
        [CellStatus::NotRun, CellStatus::NotRun]
    );
    let a = rec.arms.iter().find(|e| e.id == "a").unwrap();
    let why = a.not_run.as_deref().unwrap_or_default();
    assert!(why.contains("not in this sitting"), "{why}");
    assert!(!out.join("a").exists(), "arm a ran");
    assert_eq!(rec.sittings.len(), 1);

    let rest = campaign(&["--resume"]);
    assert_eq!(rest.status.code(), Some(0), "{rest:?}");
    let rec = CampaignRecord::read(&out).unwrap();
    assert_eq!(statuses(&rec, "a"), [CellStatus::Done, CellStatus::Done]);
    assert!(rec.arms.iter().all(|e| e.not_run.is_none()));
    assert_eq!(rec.sittings.len(), 2, "the resume is a second sitting");
}
