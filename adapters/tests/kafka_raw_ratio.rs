//! Raw produce and consume throughput: the adapter against the client it is built on,
//! and by hand against a native client, on the same broker, side by side.
//!
//! Work per side (`support::raw::Work`): keyed records (KEYS keys, PAYLOAD bytes each,
//! one task per key, 100 per publish) into a fresh topic of PARTITIONS partitions with
//! the adapter's idempotent `acks=all` producer and `linger.ms=5`; then one
//! consumer-group member reads them all back from the beginning. Both consume times
//! include the group join.
//!
//! - `kafka_raw_ratio_has_not_collapsed` runs in CI (the README's test command): one
//!   pair of [`N_FLOOR`] records, the adapter (its per-partition dispatch with a no-op
//!   handler and coalesced commits) against Kafka's bare loop,
//!   `adapters/src/kafka/bare.rs` (rdkafka alone with the adapter's producer and
//!   consumer settings, the loop `crossbench selftest tax` runs), on the provisioned
//!   tansu. The produce ratio and the consume ratio must each stay above [`FLOOR`]: far
//!   below the target (0.9) and below what a debug build on a loaded machine gives, it
//!   catches a collapse (0.06 was once seen), not noise. Needs a Kafka-protocol broker
//!   on 127.0.0.1:9092 (scripts/provision/tansu.sh): skips by hand without one, fails
//!   under `CI`.
//! - `kafka_raw_throughput_vs_kcat` is the measurement (ignored by default): the same
//!   records against kcat over librdkafka 2.16 (`-G` with auto-commit), a native tool
//!   and not a copy of the bare loop, [`REPS`] pairs, medians printed.
//!
//! ```sh
//! KCAT_LIB=$(scripts/tools/kcat-librdkafka.sh) cargo test --release \
//!   -p crossbench-adapters --features kafka --test kafka_raw_ratio -- --ignored --nocapture
//! ```
#![cfg(feature = "kafka")]

mod support;

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::kafka::{KafkaBroker, KafkaOptions};
use adapters::{BarePlan, Broker, SystemOptions, Topology};
use support::raw::{median, Side, Work};

const N: u64 = 100_000;
const KEYS: u64 = 100;
const PARTITIONS: u64 = 8;
const PAYLOAD: usize = 200;
const REPS: usize = 3;
/// Records per side of the CI floor's pair.
const N_FLOOR: u64 = 20_000;
/// The CI floor (see the module doc).
const FLOOR: f64 = 0.3;
const BROKER: &str = "127.0.0.1:9092";
/// The stage's batch and lanes, on both sides.
const BATCH: usize = 100;
const LANES: usize = 64;

fn topo(name: &str) -> Topology {
    support::topology(name, &["g"], KEYS, PARTITIONS)
}

fn work(n: u64) -> Work {
    Work {
        n,
        keys: KEYS,
        tasks: KEYS,
        per_call: 100,
        bytes: PAYLOAD,
    }
}

fn opts() -> KafkaOptions {
    KafkaOptions {
        members: 1,
        linger: Duration::from_millis(5),
        log_dir: String::new(),
        ..Default::default()
    }
}

/// The adapter's produce and consume of `n` records on a fresh topic `topic`.
async fn adapter_pair(b: &Arc<KafkaBroker>, topic: &str, n: u64) -> (Duration, Duration) {
    b.setup(&topo(topic)).await.expect("setup");
    let side = Side::adapter(b.clone(), &topo(topic), BATCH, LANES);
    (side.publish(work(n)).await, side.consume(n).await)
}

fn kcat(lib: &str) -> Command {
    let mut c = Command::new("kcat");
    c.env("LD_LIBRARY_PATH", lib);
    c
}

fn native_produce(lib: &str, topic: &str, input: &std::path::Path) -> Duration {
    let t0 = Instant::now();
    let st = kcat(lib)
        .args(["-P", "-b", BROKER, "-t", topic, "-K", "\t", "-l"])
        .args([
            "-X",
            "enable.idempotence=true",
            "-X",
            "acks=all",
            "-X",
            "linger.ms=5",
            "-X",
            "partitioner=murmur2_random",
        ])
        .arg(input)
        .status()
        .expect("kcat -P");
    assert!(st.success(), "kcat -P failed");
    t0.elapsed()
}

fn native_consume(lib: &str, topic: &str, group: &str) -> Duration {
    let t0 = Instant::now();
    let mut child = kcat(lib)
        .args(["-C", "-b", BROKER, "-G", group, "-c", &N.to_string(), "-q"])
        .args([
            "-X",
            "auto.offset.reset=earliest",
            "-X",
            "session.timeout.ms=6000",
            "-X",
            "enable.auto.commit=true",
            "-f",
            "%k\n",
        ])
        .arg(topic)
        .stdout(Stdio::piped())
        .spawn()
        .expect("kcat -G");
    let mut out = child.stdout.take().unwrap();
    let mut sink = Vec::new();
    std::io::Read::read_to_end(&mut out, &mut sink).unwrap();
    let st = child.wait().unwrap();
    let took = t0.elapsed();
    assert!(st.success(), "kcat -G failed");
    let lines = sink.iter().filter(|&&b| b == b'\n').count() as u64;
    assert_eq!(lines, N, "kcat consumed {lines} of {N}");
    took
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_raw_ratio_has_not_collapsed() {
    if !support::ready::kafka() {
        return;
    }
    let b = Arc::new(KafkaBroker::new(opts()).unwrap());
    let tag = std::process::id();
    let rate = |d: Duration| N_FLOOR as f64 / d.as_secs_f64();
    let (p, c) = adapter_pair(&b, &format!("cbfloor-a{tag}"), N_FLOOR).await;
    let (ap, ac) = (rate(p), rate(c));
    b.close().await.unwrap();
    let plan = BarePlan {
        topology: topo(&format!("cbfloor-n{tag}")),
        batch: BATCH,
        lanes: LANES,
    };
    let bare = Side::bare(&SystemOptions::Kafka(opts()), &plan).await;
    let np = rate(bare.publish(work(N_FLOOR)).await);
    let nc = rate(bare.consume(N_FLOOR).await);
    bare.close().await;
    let ratio = (1.0 / np + 1.0 / nc) / (1.0 / ap + 1.0 / ac);
    let (produce, consume) = (ap / np, ac / nc);
    println!(
        "floor pair, {N_FLOOR} records: adapter produce {ap:.0}/s consume {ac:.0}/s | bare loop produce {np:.0}/s consume {nc:.0}/s; ratios produce {produce:.2} consume {consume:.2}, produce+consume {ratio:.2}"
    );
    // Each direction on its own: a fast produce side would hide a collapsed consume
    // side in the combined ratio (shown: consume at 0.20 of bare, combined 0.35).
    for (what, r) in [("produce", produce), ("consume", consume)] {
        assert!(
            r >= FLOOR,
            "{what}: adapter produce {ap:.0}/s consume {ac:.0}/s vs bare loop {np:.0}/s {nc:.0}/s: {what} ratio {r:.2} < floor {FLOOR}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand with KCAT_LIB set (see the file header)"]
async fn kafka_raw_throughput_vs_kcat() {
    let lib = std::env::var("KCAT_LIB").expect(
        "KCAT_LIB: the directory of a librdkafka >= 2.2 (scripts/tools/kcat-librdkafka.sh)",
    );
    let input = std::env::temp_dir().join(format!("cb-kafka-raw-{}.tsv", std::process::id()));
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&input).unwrap());
        // The same records in the same per-key order as the adapter publishes them.
        for (key, payloads) in work(N).calls() {
            for p in payloads {
                writeln!(f, "{key}\t{}", String::from_utf8_lossy(&p)).unwrap();
            }
        }
    }
    let b = Arc::new(KafkaBroker::new(opts()).unwrap());
    let (mut ap, mut ac, mut np, mut nc) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let rate = |d: Duration| N as f64 / d.as_secs_f64();
    for rep in 0..REPS {
        let (p, c) = adapter_pair(&b, &format!("cbraw-a{rep}"), N).await;
        let tn = format!("cbraw-n{rep}");
        b.setup(&topo(&tn)).await.expect("setup");
        let (lib2, input2) = (lib.clone(), input.clone());
        let (q, d) = tokio::task::spawn_blocking(move || {
            let q = native_produce(&lib2, &tn, &input2);
            let group = format!("cbraw-kcat-{rep}-{}", std::process::id());
            (q, native_consume(&lib2, &tn, &group))
        })
        .await
        .unwrap();
        println!(
            "rep {rep}: adapter produce {:.0}/s consume {:.0}/s | kcat produce {:.0}/s consume {:.0}/s",
            rate(p),
            rate(c),
            rate(q),
            rate(d)
        );
        ap.push(rate(p));
        ac.push(rate(c));
        np.push(rate(q));
        nc.push(rate(d));
    }
    let ratios: Vec<f64> = (0..REPS)
        .map(|i| (1.0 / np[i] + 1.0 / nc[i]) / (1.0 / ap[i] + 1.0 / ac[i]))
        .collect();
    let spread = (
        ratios.iter().copied().fold(f64::MAX, f64::min),
        ratios.iter().copied().fold(f64::MIN, f64::max),
    );
    println!(
        "produce+consume ratio per pair: {ratios:.2?}; median {:.2}, min {:.2}, max {:.2}",
        median(ratios.clone()),
        spread.0,
        spread.1
    );
    let (ap, ac, np, nc) = (median(ap), median(ac), median(np), median(nc));
    println!(
        "median over {REPS}: adapter produce {ap:.0}/s, consume {ac:.0}/s; kcat produce {np:.0}/s, consume {nc:.0}/s; ratio produce {:.2}, consume {:.2}, produce+consume {:.2}",
        ap / np,
        ac / nc,
        (1.0 / np + 1.0 / nc) / (1.0 / ap + 1.0 / ac)
    );
    b.close().await.unwrap();
    let _ = std::fs::remove_file(&input);
}
