//! Raw ordered-consume throughput: the adapter vs a plain SQL loop (pgbench) doing the
//! same `read_grouped_head` + `delete` calls on the same server and the same backlog,
//! side by side.
//!
//! The other side is pgbench, not pgmq's bare loop (`adapters/src/pgmq/bare.rs`, which
//! `crossbench selftest tax` runs): pgbench is PostgreSQL's own native client, outside
//! the project's Rust and sqlx, so it bounds what the server gives these calls rather
//! than what this project's client code does; no copy of the bare loop lives here. The
//! adapter side and the backlog are `support::raw`'s, as in the other raw-ratio tests.
//!
//! - `pgmq_raw_consume_ratio_has_not_collapsed` runs in CI (the README's test command):
//!   the best of up to three pairs must stay above [`FLOOR`]. The floor is far below the
//!   target (0.9) and below what a debug build on a loaded machine gives: it catches a
//!   collapse of the adapter (an accidental per-message round trip, a lost pipeline),
//!   not noise.
//! - `pgmq_raw_consume_ratio` is the measurement (ignored by default): [`REPS`] pairs,
//!   the median ratio and its spread, for docs/performance.md.
//!
//! ```sh
//! cargo test --release -p crossbench-adapters --features pgmq \
//!   --test pgmq_raw_ratio -- --ignored --nocapture
//! ```
//!
//! Needs PostgreSQL + pgmq on 127.0.0.1:5432 and `pgbench` (postgresql-contrib);
//! skips when run by hand without them, fails under `CI`.
#![cfg(feature = "pgmq")]

mod support;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::pgmq::{PgmqBroker, PgmqOptions};
use adapters::{Broker, Topology};
use support::raw::{median, Side, Work};

const GROUPS: u64 = 200;
const PER_GROUP: u64 = 50; // 10 000 messages
const READERS: usize = 4;
const QTY: usize = 100;
/// The CI floor (see the module doc).
const FLOOR: f64 = 0.2;
/// Pairs of the measurement.
const REPS: usize = 3;

fn topo() -> Topology {
    support::topology("raw", &["g"], GROUPS, GROUPS)
}

/// The backlog: PER_GROUP messages of each group, 10 per publish, group by group.
const FILL: Work = Work {
    n: GROUPS * PER_GROUP,
    keys: GROUPS,
    tasks: 1,
    per_call: 10,
    bytes: 224,
};

/// A fresh queue holding the backlog; the adapter on it.
async fn fill(opts: &PgmqOptions) -> (Arc<PgmqBroker>, Side) {
    let b = Arc::new(PgmqBroker::new(opts.clone()).unwrap());
    b.setup(&topo()).await.expect("setup");
    let side = Side::adapter(b.clone(), &topo(), QTY, 1000);
    side.publish(FILL).await;
    (b, side)
}

const PGBENCH_SCRIPT: &str = "\
SELECT coalesce(string_agg(msg_id::text, ','), '0') AS ids, count(*) AS n FROM pgmq.read_grouped_head('raw_g', 30, 100) \\gset
SELECT count(*) FROM pgmq.delete('raw_g', ARRAY[:ids]::bigint[]);
";

fn depth() -> u64 {
    let o = Command::new("psql")
        .args([
            "-X",
            "-At",
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-d",
            "crossbench",
            "-c",
        ])
        .arg("select count(*) from pgmq.q_raw_g")
        .output()
        .expect("psql");
    String::from_utf8_lossy(&o.stdout)
        .trim()
        .parse()
        .unwrap_or(u64::MAX)
}

/// One pair: (adapter msg/s, pgbench msg/s), printed.
async fn measure() -> (f64, f64) {
    let total = GROUPS * PER_GROUP;
    let opts = PgmqOptions {
        readers: READERS,
        read_qty: QTY,
        empty_backoff: Duration::from_millis(1),
        empty_backoff_max: Duration::from_millis(5),
        ..Default::default()
    };

    // Adapter side.
    let (b, adapter) = fill(&opts).await;
    let adapter_secs = adapter.consume(total).await.as_secs_f64();
    let adapter_rate = total as f64 / adapter_secs;
    let stats = b.counters();

    // pgbench side: same backlog, same calls, READERS clients.
    fill(&opts).await;
    let script = tempfile_path();
    std::fs::write(&script, PGBENCH_SCRIPT).unwrap();
    let t1 = Instant::now();
    let mut child = Command::new("pgbench")
        .args([
            "-n",
            "-h",
            "127.0.0.1",
            "-U",
            "postgres",
            "-c",
            &READERS.to_string(),
            "-j",
            "2",
            "-T",
            "120",
            "-f",
        ])
        .arg(&script)
        .arg("crossbench")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("pgbench (apt-get install postgresql-contrib)");
    let mut sql_secs = f64::NAN;
    while t1.elapsed() < Duration::from_secs(120) {
        if depth() == 0 {
            sql_secs = t1.elapsed().as_secs_f64();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_file(&script);
    let sql_rate = total as f64 / sql_secs;
    println!(
        "RAW {total} msgs, {GROUPS} groups, {READERS} readers, qty {QTY}: adapter {adapter_rate:.0} msg/s ({adapter_secs:.2}s, reads {} empty {}), pgbench {sql_rate:.0} msg/s ({sql_secs:.2}s), ratio {:.2}",
        stats["pgmq_reads"],
        stats["pgmq_empty_reads"],
        adapter_rate / sql_rate
    );
    assert!(
        sql_secs.is_finite(),
        "pgbench did not empty the queue in 120 s"
    );
    (adapter_rate, sql_rate)
}

async fn ready() -> bool {
    support::ready::pgmq().await
        && (std::process::Command::new("pgbench")
            .arg("--version")
            .output()
            .is_ok()
            || support::absent("pgbench", "PATH", "apt-get install postgresql-contrib"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgmq_raw_consume_ratio_has_not_collapsed() {
    if !ready().await {
        return;
    }
    // The best of up to three pairs: a collapse is in every pair, a loaded machine's
    // noise (which slows the debug-built adapter more than native pgbench) is not.
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (adapter, sql) = measure().await;
        seen.push(format!("{adapter:.0} vs {sql:.0} msg/s"));
        if adapter / sql >= FLOOR {
            return;
        }
    }
    panic!("adapter vs pgbench below the floor {FLOOR} in all three pairs: {seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement: run with --ignored --nocapture"]
async fn pgmq_raw_consume_ratio() {
    if !ready().await {
        return;
    }
    let mut ratios = Vec::new();
    for _ in 0..REPS {
        let (adapter, sql) = measure().await;
        ratios.push(adapter / sql);
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "RATIO over {REPS} pairs: median {:.2}, min {:.2}, max {:.2}",
        median(ratios.clone()),
        ratios[0],
        ratios[REPS - 1]
    );
}

fn tempfile_path() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("pgmq-raw-{}.sql", std::process::id()))
}
