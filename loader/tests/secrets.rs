//! A real password in every adapter's connection string never reaches the record,
//! the console or the HTML report. Per adapter, a credential created by the test (a
//! PostgreSQL role, a RabbitMQ user), a short cell through the real binary, once with
//! and once without `-q`, then `crossbench report` over the cell; every file of the
//! record (samples-remote.csv too: the pgmq cell pulls from a `crossbench sample`
//! whose target carries the same DSN), both consoles and the report are scanned.
//!
//! Queen: its bearer token (`queen.token`), where a Queen server is given.
//!
//! Kafka: `KafkaOptions` has no field that can carry a credential (no SASL or TLS
//! settings; tansu takes none, and the section refuses unknown keys), so there is no
//! secret to leak; the test shows an attempt to pass one is refused (exit 2) without
//! echoing the value.
//!
//! Needs PostgreSQL + pgmq on 127.0.0.1:5432 and RabbitMQ on 127.0.0.1:5672 with
//! `psql` and `rabbitmqctl` (scripts/provision/). Skips when run by hand without them,
//! fails under `CI`.

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use support::secrets::{assert_nowhere, make};
use support::{binary, psql, reachable, result, scenario, serial};

/// VOID is not what these tests are about.
const SHORT: [&str; 7] = [
    "duration=2s",
    "warmup=0s",
    "ramp=0s",
    "drain.max=30s",
    "void.loader_cpu_max=1",
    "void.schedule_lag_p99_max=10s",
    "held.exploratory=true",
];

struct Reap(Child);
impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `crossbench run <scn> --set … --out <dir> [-q] [--sampler URL]` through the
/// binary: (exit code, stdout + stderr).
fn run_binary(
    scn: &Path,
    sets: &[String],
    out: &Path,
    quiet: bool,
    sampler: Option<&str>,
) -> (i32, String) {
    let mut c = binary();
    c.arg("run").arg(scn).arg("--out").arg(out);
    for s in sets {
        c.args(["--set", s]);
    }
    if quiet {
        c.arg("-q");
    }
    if let Some(u) = sampler {
        c.args(["--sampler", u]);
    }
    let o = c.output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// Both runs (quiet and not) of one cell shape, the report over both, and the scan.
fn run_and_scan(system: &str, scn: &str, sets: &[String], secret: &str, sampler: Option<&str>) {
    let tmp = tempfile::tempdir().unwrap();
    let mut texts = Vec::new();
    let mut cells = Vec::new();
    for quiet in [false, true] {
        let out = tmp.path().join(if quiet { "quiet" } else { "loud" });
        let (code, console) = run_binary(&scenario(scn), sets, &out, quiet, sampler);
        assert_eq!(code, 0, "{system} cell (quiet={quiet}):\n{console}");
        let r = result(&out);
        assert_eq!(r["system"], system);
        // The console is what CI logs keep: the non-quiet one has per-second lines.
        if !quiet {
            assert!(console.contains("OUTCOME: PASS"), "{console}");
        }
        texts.push((if quiet { "console -q" } else { "console" }, console));
        cells.push(out);
    }
    if sampler.is_some() {
        for c in &cells {
            let remote = std::fs::read_to_string(c.join("samples-remote.csv")).unwrap();
            assert!(
                remote.lines().count() > 2,
                "remote samples pulled: {remote}"
            );
        }
    }
    let report = tmp.path().join("report");
    let o = binary()
        .arg("report")
        .args(&cells)
        .arg("--out")
        .arg(&report)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report_console = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    texts.push(("report console", report_console));
    let roots: Vec<&Path> = cells
        .iter()
        .map(|c| c.as_path())
        .chain([report.as_path()])
        .collect();
    let texts: Vec<(&str, &str)> = texts.iter().map(|(l, t)| (*l, t.as_str())).collect();
    let scanned = assert_nowhere(secret, &roots, &texts);
    // result.json, invocation.txt, samples.csv, produced.meta, report.csv, 3 .hlog,
    // 12 stream logs per cell, and the report.
    assert!(scanned > 2 * 20, "only {scanned} files scanned");
}

/// A login role with a password and the rights pgmq needs, dropped (with the queues
/// its cells made) on drop.
struct PgRole {
    name: String,
    prefix: String,
}
impl Drop for PgRole {
    fn drop(&mut self) {
        let _ = psql(&format!(
            "select pgmq.drop_queue(queue_name) from pgmq.list_queues() where queue_name like '{}%'",
            self.prefix.replace('-', "_")
        ));
        let _ = psql(&format!(
            "drop owned by {0}; drop role if exists {0}",
            self.name
        ));
    }
}

#[cfg(feature = "pgmq")]
#[test]
fn a_pgmq_password_is_in_no_file_console_or_report() {
    if !reachable("127.0.0.1:5432", "PostgreSQL", "scripts/provision/pgmq.sh") {
        return;
    }
    let _one = serial();
    let secret = make("pg");
    let role = PgRole {
        name: format!("cb_secret_{}", std::process::id()),
        prefix: "cbsec-".into(),
    };
    psql(&format!(
        "create role {r} login password '{secret}'; \
         grant usage, create on schema pgmq to {r}; \
         grant all on all tables in schema pgmq to {r}; \
         grant all on all sequences in schema pgmq to {r}; \
         grant execute on all functions in schema pgmq to {r}",
        r = role.name
    ))
    .expect("create the role");
    let dsn = format!(
        "postgres://{}:{secret}@127.0.0.1:5432/crossbench",
        role.name
    );
    // A remote sampler whose PostgreSQL target carries the same DSN.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let mut child = binary()
        .args(["sample", "--listen", &addr, "--target"])
        .arg(format!("pg=postgres:{dsn}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let _sampler = Reap(child);
    assert!(line.contains("serving samples"), "{line}");
    assert!(!line.contains(&secret), "the sampler's console: {line}");
    let mut sets: Vec<String> = SHORT.iter().map(|s| s.to_string()).collect();
    sets.push(format!("pgmq.dsn={dsn}"));
    sets.push(format!("prefix={}", role.prefix));
    run_and_scan(
        "pgmq",
        "pgmq-smoke.yaml",
        &sets,
        &secret,
        Some(&format!("http://{addr}")),
    );
}

/// A RabbitMQ user with a password, deleted on drop.
struct RabbitUser(String);
impl Drop for RabbitUser {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl")
            .args(["delete_user", &self.0])
            .output();
    }
}

#[cfg(feature = "rabbitmq")]
#[test]
fn a_rabbitmq_password_is_in_no_file_console_or_report() {
    if !support::rabbitmq() {
        return;
    }
    let _one = serial();
    let secret = make("rb");
    let user = RabbitUser(format!("cb-secret-{}", std::process::id()));
    for args in [
        vec!["add_user", &user.0, &secret],
        vec!["set_permissions", "-p", "/", &user.0, ".*", ".*", ".*"],
    ] {
        let o = Command::new("rabbitmqctl").args(&args).output().unwrap();
        assert!(
            o.status.success(),
            "rabbitmqctl {}: {}",
            args[0],
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let mut sets: Vec<String> = SHORT.iter().map(|s| s.to_string()).collect();
    sets.extend([
        format!("rabbitmq.url=amqp://{}:{secret}@127.0.0.1:5672/%2f", user.0),
        "lanes=10".into(),
        "rate=100".into(),
        "properties=20".into(),
    ]);
    run_and_scan("rabbitmq", "rabbit-smoke.yaml", &sets, &secret, None);
}

/// Queen's bearer token, through the same scan (files, both consoles, the report).
/// Runs where a Queen server is given (`CROSSBENCH_QUEEN_URL`); CI cannot provision
/// one, so without the variable it skips with a message, also under `CI`.
#[cfg(feature = "queen")]
#[test]
fn a_queen_token_is_in_no_file_console_or_report() {
    let Some(url) = support::queen_url("secrets_queen_token") else {
        return;
    };
    let _one = serial();
    let secret = make("qn");
    let mut sets: Vec<String> = SHORT.iter().map(|s| s.to_string()).collect();
    sets.extend([
        format!("queen.url={url}"),
        format!("queen.token={secret}"),
        "rate=100".into(),
        "properties=20".into(),
    ]);
    run_and_scan("queen", "queen-smoke.yaml", &sets, &secret, None);
}

/// The Kafka section has no field that can carry a credential: an attempt is bad
/// input that names the key and does not echo the value.
#[cfg(feature = "kafka")]
#[test]
fn kafka_options_carry_no_secret_and_an_attempt_is_refused_without_echo() {
    let secret = make("kf");
    for key in ["sasl_password", "sasl.password", "password"] {
        let set = format!("kafka.{key}={secret}");
        let (code, text, _tmp) = support::run_raw(&scenario("kafka-smoke.yaml"), &[&set]);
        assert_eq!(code, 2, "{set}: {text}");
        assert!(
            text.contains(key.split('.').next().unwrap()),
            "{set}: {text}"
        );
        assert_nowhere(&secret, &[], &[("error", &text)]);
    }
}
