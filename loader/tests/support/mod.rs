//! What the loader's end-to-end tests share: where the scenarios are, running a
//! cell in this process (the binary only where a process is what is under test),
//! finding a server (skip when run by hand, fail under `CI`, which the test command
//! sets after provisioning), and reading a cell's `result.json`.
#![allow(dead_code, unused_imports)]

use std::path::{Path, PathBuf};

use serde_json::Value;

pub mod cluster;
pub mod secrets;
#[path = "../../../adapters/tests/support/services.rs"]
mod services;
pub mod victims;
pub use services::{
    absent, kafka, nats, queen_url, rabbitmq, reachable, redis, skipped, unavailable,
};

/// A port on loopback nothing listens on right now (a rendezvous's, say).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One cell at a time within a test binary: the cells share the servers and 2 cores.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Hold `SERIAL`, even after another test panicked while holding it.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// `scenarios/<name>` of this repository.
pub fn scenario(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(name)
}

/// The cell's `result.json`.
pub fn result(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("result.json"))
        .unwrap_or_else(|e| panic!("no result.json in {}: {e}", dir.display()));
    serde_json::from_str(&text).expect("result.json parses")
}

pub fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

/// The checker's verdict on one stream (pipeline) or group (stream workload).
pub fn verdict_stream<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["verdict"]["streams"]
        .as_array()
        .expect("verdict.streams[]")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("stream {name} in verdict"))
}

/// A figure summed over the pipeline's twelve `streams[]`.
pub fn stream_sum(r: &Value, field: &str) -> u64 {
    r["streams"]
        .as_array()
        .expect("streams[]")
        .iter()
        .map(|s| s[field].as_u64().unwrap_or(0))
        .sum()
}

/// `crossbench run <scn> --out <dir> -q --set …`, in this process (the same path as
/// the command, `loader::cli::run::execute`): (exit code, the summaries or the
/// error, as the command would print them).
pub fn run_into(scn: &Path, sets: &[&str], out: &Path) -> (i32, String) {
    use loader::cli::exit::Exit;
    use loader::cli::run::{execute, RunRequest};
    let mut req = RunRequest::new(scn);
    req.sets = sets.iter().map(|s| s.to_string()).collect();
    req.out = Some(out.to_path_buf());
    req.argv = ["crossbench", "run", &scn.display().to_string(), "-q"]
        .iter()
        .map(|s| s.to_string())
        .chain(
            sets.iter()
                .flat_map(|s| ["--set".to_string(), s.to_string()]),
        )
        .collect();
    match execute(&req) {
        Ok(done) => (
            i32::from(done.exit.code()),
            done.cells.iter().map(|c| c.2.as_str()).collect(),
        ),
        Err(e) => (
            i32::from(Exit::of_error(&e).code()),
            format!("error: {e:#}"),
        ),
    }
}

/// [`run_into`] a fresh temporary directory: (exit code, output, the temporary
/// directory that holds `cell`).
pub fn run_raw(scn: &Path, sets: &[&str]) -> (i32, String, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let (code, text) = run_into(scn, sets, &tmp.path().join("cell"));
    (code, text, tmp)
}

/// psql's trimmed answer to one statement on the test database (`crossbench` on
/// 127.0.0.1:5432 as `postgres`, stopping at the first error), or its stderr.
pub fn psql(sql: &str) -> Result<String, String> {
    let o = std::process::Command::new("psql")
        .args([
            "-X",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "crossbench",
            "-c",
        ])
        .arg(sql)
        .output()
        .map_err(|e| e.to_string())?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&o.stderr).into_owned())
    }
}

/// PostgreSQL on 127.0.0.1:5432 with pgmq in the test database: true; otherwise the
/// test skips by hand and fails under `CI` (scripts/provision/pgmq.sh provisions it).
pub fn pgmq_ready() -> bool {
    const PROVISION: &str = "scripts/provision/pgmq.sh";
    reachable("127.0.0.1:5432", "PostgreSQL", PROVISION)
        && (psql("select 1 from pg_extension where extname = 'pgmq'").as_deref() == Ok("1")
            || absent("pgmq (in database crossbench)", "127.0.0.1:5432", PROVISION))
}

/// `crossbench run scenarios/smoke.yaml -q --set …` as a process of its own whose
/// pacers stall for 5 s one second into paced traffic (`CROSSBENCH_PACER_FAILPOINT`,
/// loader/src/pacing/failpoint.rs: read from the environment, so it is set for that
/// process only, never in a test process where other cells run beside it): (exit
/// code, result.json, stderr, the temporary directory that holds `cell`).
pub fn run_smoke_with_stalled_pacer(sets: &[&str]) -> (i32, Value, String, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("cell");
    let mut cmd = binary();
    cmd.arg("run").arg(scenario("smoke.yaml")).arg("-q");
    for s in sets {
        cmd.args(["--set", s]);
    }
    let o = cmd
        .arg("--out")
        .arg(&out)
        .env("CROSSBENCH_PACER_FAILPOINT", "stall:1s:5s")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains("CROSSBENCH_PACER_FAILPOINT: every pacer stalls"),
        "the failpoint was not taken: {err}"
    );
    let json = std::fs::read_to_string(out.join("result.json"))
        .unwrap_or_else(|e| panic!("no result.json ({e}); stderr:\n{err}"));
    (
        o.status.code().unwrap_or(-1),
        serde_json::from_str(&json).unwrap(),
        err,
        tmp,
    )
}

/// The `crossbench` binary itself, for tests of what only a process shows: its exit
/// code from `main`, its console, signals.
pub fn binary() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_crossbench"))
}

/// `crossbench run <scn> --out <dir> -q --set …` as a process of its own, as a user
/// runs it: for what only a process shows (what its pacers got, `loader.pacer_priority`,
/// is recorded process-wide; its peak RSS is the loader's alone). `sets` are given as
/// they are (pass them through [`relaxed`] where the VOID rule should be). Returns
/// (exit code, -1 if a signal ended it; result.json, kept on request ([`keep`]); its
/// stdout and stderr; the temporary directory that holds `cell`). A cell that wrote no
/// result.json fails the test with its exit code and output.
pub fn run_process(scn: &Path, sets: &[&str]) -> (i32, Value, String, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let mut cmd = binary();
    cmd.arg("run").arg(scn);
    for s in sets {
        cmd.args(["--set", s]);
    }
    let o = cmd
        .arg("--out")
        .arg(tmp.path().join("cell"))
        .arg("-q")
        .output()
        .expect("running crossbench");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let code = o.status.code().unwrap_or(-1);
    let r = kept_result(&tmp, code, &text);
    (code, r, text, tmp)
}

/// Send signal `sig` to a child process (`kill -<sig>`): where a signal is what is
/// under test.
pub fn signal(child: &std::process::Child, sig: i32) {
    let st = std::process::Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(st.success());
}

/// Send `sig` to `child`, wait for it to exit, and assert its exit code is `code`
/// (its output in the message): what it printed, and how long it took to stop.
pub fn stop_with(
    child: std::process::Child,
    sig: i32,
    code: i32,
) -> (std::process::Output, std::time::Duration) {
    let t0 = std::time::Instant::now();
    signal(&child, sig);
    let o = child.wait_with_output().unwrap();
    let took = t0.elapsed();
    assert_eq!(
        o.status.code(),
        Some(code),
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o, took)
}

/// Wait until the cell being recorded in `dir` is in its rated window (its
/// `report.csv` has a rated line); the run may first wait for the run lock.
pub fn wait_rated(dir: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    loop {
        let csv = std::fs::read_to_string(dir.join("report.csv")).unwrap_or_default();
        if csv.contains(",rated,") {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} never reached its rated window",
            dir.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The cell PASSed with no gap, order violation, duplicate or lost tail.
pub fn assert_clean_pass(r: &Value) {
    assert_eq!(r["outcome"], "PASS", "outcome; verdict: {}", r["verdict"]);
    let t = &r["verdict"]["totals"];
    for k in ["gaps", "order_violations", "duplicates", "lost_tail"] {
        assert_eq!(t[k].as_u64(), Some(0), "{k} in {t}");
    }
}

/// The figures a failed cell assertion should show.
pub fn summary(r: &Value) -> String {
    format!(
        "outcome={} load={} variant={} verdict={} warnings={} void={} broker_stats={}",
        r["outcome"],
        r["load"],
        r["variant"],
        r["verdict"],
        r["warnings"],
        r["void"],
        r["broker_stats"]
    )
}

/// The rules about the machine's load relaxed, for tests about something else: a
/// loaded machine can make a debug build VOID (loader CPU, schedule lag) or serve
/// less than `held.served` of its demand (NOT-HELD, exit 8), and neither must hide
/// the verdict such a test is about. The load is still judged and recorded; only
/// its exit code is waived (`held.exploratory`). The rules themselves are tested in
/// drain_and_void.rs and faults_real.rs. (A test's own sets, given after these, win.)
pub const RELAX_VOID: [&str; 3] = [
    "void.loader_cpu_max=1",
    "void.schedule_lag_p99_max=10s",
    "held.exploratory=true",
];

/// `RELAX_VOID` followed by `sets`.
pub fn relaxed<'a>(sets: &[&'a str]) -> Vec<&'a str> {
    RELAX_VOID
        .iter()
        .copied()
        .chain(sets.iter().copied())
        .collect()
}

/// [`run_raw`] with the VOID rule relaxed ([`RELAX_VOID`]), then the cell must have
/// exited 0 and PASSed cleanly ([`assert_clean_pass`]): its `result.json` and the
/// directory holding `cell`.
pub fn run_passing(scn: &Path, sets: &[&str]) -> (Value, tempfile::TempDir) {
    let (code, text, tmp) = run_raw(scn, &relaxed(sets));
    let dir = tmp.path().join("cell");
    if !dir.join("result.json").exists() {
        panic!("exit code {code}, no result.json; output:\n{text}");
    }
    let r = result(&dir);
    assert_eq!(code, 0, "exit code; {}", summary(&r));
    assert_clean_pass(&r);
    (r, tmp)
}

/// To read a record after the test: `CROSSBENCH_TEST_KEEP=<dir>` keeps a copy of the
/// cell's directory under `tmp` (named after the cell and the temporary directory).
pub fn keep(tmp: &tempfile::TempDir, r: &Value) {
    if let Ok(keep) = std::env::var("CROSSBENCH_TEST_KEEP") {
        let name = format!(
            "{}-{}",
            r["name"].as_str().unwrap_or("cell"),
            tmp.path().file_name().unwrap().to_string_lossy()
        );
        let to = std::path::Path::new(&keep).join(name);
        let _ = std::fs::create_dir_all(&keep);
        let _ = std::process::Command::new("cp")
            .arg("-r")
            .arg(tmp.path().join("cell"))
            .arg(&to)
            .status();
        eprintln!("record kept in {}", to.display());
    }
}

/// Run `scenarios/<scn>` in this process with `sets` (relaxed, [`relaxed`]), its
/// record kept on request ([`keep`]): (exit code, result.json, console text, the
/// temporary directory that holds `cell`). A cell that wrote no result.json fails the
/// test with its console text.
pub fn run_cell(scn: &str, sets: &[&str]) -> (i32, Value, String, tempfile::TempDir) {
    let (code, text, tmp) = run_raw(&scenario(scn), &relaxed(sets));
    let r = kept_result(&tmp, code, &text);
    (code, r, text, tmp)
}

/// The result.json of the cell in `tmp`'s `cell`, kept on request ([`keep`]); a cell
/// that wrote none fails the test with its exit code and console text.
pub fn kept_result(tmp: &tempfile::TempDir, code: i32, text: &str) -> Value {
    let path = tmp.path().join("cell/result.json");
    let r: Value = match std::fs::read_to_string(&path) {
        Ok(t) => serde_json::from_str(&t).unwrap(),
        Err(e) => panic!("no result.json ({e}); exit {code}\n{text}"),
    };
    keep(tmp, &r);
    r
}
