//! Fuzzed loader inputs (issue 17): scenario files and `--set` values
//! (`scenario::parse`), campaign files (`CampaignFile::load`, then `arms::expand`,
//! which resolves every arm's scenario), and what a consumer decodes from a message
//! on the topic that may not be ours: the payload stamp (`Stamp::decode`) and the
//! stream workload's sink (`Sink::handle`, which decodes, logs and times a batch).
//!
//! Every property feeds arbitrary bytes, token soups and mutations of valid inputs
//! (real files of scenarios/ and campaigns/: bit flips, inserted and deleted bytes,
//! truncation, duplicated, dropped and swapped lines, numbers swapped for huge or
//! negative values, a field's value replaced with junk). The parsers must answer `Ok`
//! or `Err`, never panic, and an error names what it can: the file, the `--set`
//! argument, or the field.
//!
//! Cases per property: `CROSSBENCH_FUZZ_CASES` (default 10 000). A longer run:
//! `CROSSBENCH_FUZZ_CASES=200000 cargo test --release --test fuzz_inputs`.

use std::fs;
use std::path::Path;
use std::sync::Arc;

use adapters::mem::{MemBroker, MemOptions};
use adapters::{BatchHandler, Delivery, Disposition, KeyBatch};
use bytes::Bytes;
use loader::campaign::arms;
use loader::campaign::file::{CampaignError, CampaignFile};
use loader::measure::clock::Clock;
use loader::measure::window::RatedWindow;
use loader::pacing::pacer::Timing;
use loader::pacing::work_timer::{Drive, Lanes, WorkTimer};
use loader::record::stream_log::StreamLogs;
use loader::scenario::{self, ScenarioError};
use loader::workload::pipeline::metrics::Metrics;
use loader::workload::pipeline::stage::{Stage, StageEnv};
use loader::workload::pipeline::topology::{Flow, StreamDef};
use loader::workload::stamp::{rates_padding, Stamp};
use loader::workload::stream::ledger::Ledger;
use loader::workload::stream::payload::Body;
use loader::workload::stream::sink::{Sink, SinkMetrics};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tokio_util::sync::CancellationToken;

#[path = "../../checker/tests/support/fuzz.rs"]
mod fuzzing;
use fuzzing::{fuzz, fuzz_cases, mutate, rewrite};

use mutate::Input;

// ---------------------------------------------------------------------------------
// Scenarios and --set

/// Real scenarios: the pipeline on the control broker, a broker's section, the
/// stream workload, a ladder.
const SCENARIOS: &[&str] = &[
    include_str!("../../scenarios/smoke.yaml"),
    include_str!("../../scenarios/rabbit-smoke.yaml"),
    include_str!("../../scenarios/stream-smoke.yaml"),
    include_str!("../../scenarios/seed002-ladder.yaml"),
    include_str!("../../scenarios/queen-sparse.yaml"),
    FAULTY,
];

/// Faults, the proxy and the gate (docs/scenarios.md, docs/gate.md).
const FAULTY: &str = "name: faulty
system: pgmq
rate: 100
properties: 10
duration: 30s
warmup: 2s
publish_deadline: 5s
hot: {props: 2, factor: 4}
sample: {interval: 1s}
faults:
  - kind: kill
    target: proc:15/cbfaults
    at: 10s
    duration: 3s
    restart: pg_ctlcluster 15 cbfaults start
  - kind: pause
    target: pidfile:/var/run/x.pid
    at: 12s
    duration: 2s
  - kind: restart
    at: 20s
    restart: pg_ctlcluster 15 cbfaults restart -m fast
  - kind: proxy
    at: 25s
    duration: 3s
    params: {toxic: latency, latency: 50ms, jitter: 10ms}
proxy: {}
gate:
  metrics: [e2e_p50_a, e2e_p99_a, system_cores]
  thresholds: {e2e_p99_a: 0.15}
";

const YAML_TOKENS: &[&str] = &[
    "\n",
    "  ",
    ": ",
    "- ",
    "#",
    "~",
    "null",
    "[]",
    "{}",
    "[",
    "]",
    "{",
    "}",
    ",",
    "'",
    "\"",
    "&a ",
    "*a",
    "!!binary ",
    "!!float ",
    "!!str ",
    "<<: ",
    "? ",
    "---\n",
    "...\n",
    "|\n",
    ">-\n",
    "\t",
    "\u{0}",
    "é",
    "name",
    "system",
    "workload",
    "stream",
    "pipeline",
    "rate",
    "properties",
    "duration",
    "warmup",
    "ramp",
    "drain",
    "max",
    "grace",
    "auto",
    "batch",
    "lanes",
    "hot",
    "props",
    "factor",
    "faults",
    "kind",
    "kill",
    "pause",
    "proxy",
    "at",
    "target",
    "params",
    "toxic",
    "latency",
    "gate",
    "metrics",
    "thresholds",
    "partitions",
    "space",
    "window",
    "ladder",
    "mem",
    "pgmq",
    "rabbitmq",
    "queen",
    "kafka",
    "1ms",
    "0s",
    "1e309",
    "99999999999999999999999s",
    "1e300",
    "-1",
    "1.5",
    ".nan",
    ".inf",
    "true",
];

/// Dotted paths a `--set` may name (and a few it may not).
const SET_KEYS: &[&str] = &[
    "name",
    "system",
    "workload",
    "rate",
    "properties",
    "duration",
    "warmup",
    "ramp",
    "hydrate",
    "drain",
    "drain.max",
    "drain.grace",
    "batch",
    "lanes",
    "lane_headroom",
    "payload_b",
    "hot",
    "hot.props",
    "hot.factor",
    "seed",
    "push_shards",
    "shard_queue",
    "publish_deadline",
    "durability",
    "dedup_window_sec",
    "accept",
    "prefix",
    "no_reset",
    "void.loader_cpu_max",
    "held.served",
    "held.exploratory",
    "threads",
    "sample.interval",
    "sample.targets",
    "stream",
    "stream.ladder",
    "stream.partitions.space",
    "stream.partitions.window",
    "stream.partitions.fixed",
    "stream.partitions.rotate_every",
    "stream.partitions.rotate_step",
    "stream.push.batch",
    "stream.push.workers",
    "stream.push.in_flight",
    "stream.push.partitions_per_request",
    "stream.payload.bytes",
    "stream.consume.groups",
    "stream.consume.consumers",
    "stream.consume.pop_batch",
    "stream.consume.pop_partitions",
    "stream.consume.ack",
    "faults",
    "proxy",
    "proxy.upstream",
    "gate.metrics",
    "gate.thresholds",
    "mem.publish_delay",
    "mem.max_lanes",
    "mem.faults",
    "pgmq.readers",
    "pgmq.read_fn",
    "rabbitmq.idiom",
    "rabbitmq.prefetch",
    "queen.url",
    "queen.mode",
    "queen.lease_time",
    "kafka.linger",
    "rate.x",
    "",
    ".",
    "a..b",
    "ratee",
];

const SET_VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "2000",
    "10000001",
    "18446744073709551615",
    "18446744073709551616",
    "1e309",
    "1e300",
    "99999999999999999999999",
    "99999999999999999999999h",
    "1.5",
    ".nan",
    "-.inf",
    "250ms",
    "0s",
    "1h",
    "8d",
    "auto",
    "banana",
    "stream",
    "pipeline",
    "mem",
    "pgmq",
    "queen",
    "kafka",
    "rabbitmq",
    "memory",
    "fsync",
    "at-least-once",
    "true",
    "~",
    "[]",
    "{}",
    "[1, 2]",
    "[0]",
    "{a: 1}",
    "{max: 1s}",
    "[{kind: kill, at: 1s}]",
    "'",
    "\"",
    "&a",
    "*a",
    "!!binary AA",
    "- x",
    "x: y",
    "é",
    "",
];

/// One `--set` argument: a real path and a junk value, or anything at all.
fn set_arg() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (prop::sample::select(SET_KEYS), prop::sample::select(SET_VALUES))
            .prop_map(|(k, v)| format!("{k}={v}")),
        1 => (prop::sample::select(SET_KEYS), "[ -~]{0,12}").prop_map(|(k, v)| format!("{k}={v}")),
        1 => any::<String>(),
    ]
}

/// What an error of `scenario::parse` must say: the file for a parse error, the
/// argument for a `--set` error, the field for a refused value.
fn check_scenario_error(
    e: &ScenarioError,
    origin: &str,
    sets: &[String],
) -> Result<(), TestCaseError> {
    let shown = e.to_string();
    match e {
        ScenarioError::Parse { path, .. } => {
            prop_assert_eq!(path.as_str(), origin);
            prop_assert!(
                shown.contains(origin),
                "{:?} does not name {:?}",
                shown,
                origin
            );
        }
        ScenarioError::Set { arg, .. } => {
            prop_assert!(sets.contains(arg), "{:?} is not one of {:?}", arg, sets);
            let quoted = format!("{arg:?}");
            prop_assert!(
                shown.contains(&quoted),
                "{:?} does not quote {:?}",
                shown,
                quoted
            );
        }
        ScenarioError::Invalid { field, .. } => {
            prop_assert!(!field.is_empty(), "{:?}", shown);
            let named = format!("`{field}`");
            prop_assert!(
                shown.contains(&named),
                "{:?} does not name {:?}",
                shown,
                named
            );
        }
        ScenarioError::Read { .. } => {
            return Err(TestCaseError::fail(format!("parse read a file: {shown}")));
        }
    }
    Ok(())
}

#[test]
fn scenario_seeds_parse() {
    for s in SCENARIOS {
        scenario::parse(s, "seed.yaml", &[]).unwrap_or_else(|e| panic!("{e}\n{s}"));
    }
}

#[test]
fn fuzz_scenario_files() {
    let origin = "scenarios/fuzzed.yaml";
    fuzz(
        file!(),
        "scenario",
        fuzz_cases(),
        mutate::input(mutate::seeds(SCENARIOS), YAML_TOKENS),
        |input| {
            let text = input.text();
            if let Err(e) = scenario::parse(&text, origin, &[]) {
                check_scenario_error(&e, origin, &[])?;
            }
            Ok(())
        },
    );
}

#[test]
fn fuzz_scenario_sets() {
    let origin = "scenarios/fuzzed.yaml";
    let text = prop_oneof![
        4 => prop::sample::select(SCENARIOS).prop_map(str::to_string),
        1 => mutate::input(mutate::seeds(SCENARIOS), YAML_TOKENS).prop_map(|i| i.text()),
    ];
    fuzz(
        file!(),
        "scenario --set",
        fuzz_cases(),
        (text, prop::collection::vec(set_arg(), 1..4)),
        |(text, sets)| {
            if let Err(e) = scenario::parse(&text, origin, &sets) {
                check_scenario_error(&e, origin, &sets)?;
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------
// Campaign files

const CAMPAIGNS: &[&str] = &[
    include_str!("../../campaigns/ceiling.yaml"),
    include_str!("../../campaigns/findings.yaml"),
    include_str!("../../campaigns/seed000-reproduce.yaml"),
    include_str!("../../campaigns/seed002-ladder.yaml"),
    SMALL_CAMPAIGN,
];

/// An inline group with a matrix, and a group of its own.
const SMALL_CAMPAIGN: &str = "campaign: small
description: two arms and a matrix
repeats: 2
seed: 9
set: {duration: 5s, drain.max: 10s}
scenario: ../scenarios/smoke.yaml
matrix:
  rate: [100, 200]
  properties: [10]
groups:
  - name: stream
    scenario: ../scenarios/stream-smoke.yaml
    set: {rate: 1000}
    between: [100, 400]
";

const CAMPAIGN_TOKENS: &[&str] = &[
    "\n",
    "  ",
    ": ",
    "- ",
    "#",
    "~",
    "null",
    "[]",
    "{}",
    "[",
    "]",
    "{",
    "}",
    ",",
    "'",
    "\"",
    "&a ",
    "*a",
    "!!binary ",
    "<<: ",
    "---\n",
    "\t",
    "é",
    "campaign",
    "description",
    "repeats",
    "seed",
    "set",
    "scenario",
    "matrix",
    "groups",
    "name",
    "between",
    "requires_env",
    "published",
    "dir",
    "ids",
    "ceiling",
    "served",
    "p99_max",
    "resolution",
    "findings",
    "checks",
    "${CROSSBENCH_QUEEN_URL}",
    "${UNSET_FUZZ_VAR}",
    "${",
    "../scenarios/smoke.yaml",
    "../scenarios/missing.yaml",
    "/etc/passwd",
    "rate",
    "stream.ladder",
    "[100, 200]",
    "0",
    "-1",
    "1001",
    "4294967296",
    "1e309",
];

/// Everything the campaigns' relative paths reach, copied once under `root`:
/// `scenarios/`, three published cells, and the campaigns' own directory.
fn campaign_tree(root: &Path) {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    fs::create_dir_all(root.join("campaigns")).unwrap();
    fs::create_dir_all(root.join("scenarios")).unwrap();
    for e in fs::read_dir(repo.join("scenarios")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "yaml") {
            fs::copy(&p, root.join("scenarios").join(p.file_name().unwrap())).unwrap();
        }
    }
    let published = root.join("results/published");
    fs::create_dir_all(&published).unwrap();
    for id in ["FM-kafka-1000", "HOL-kafka-1k", "TP-pulsar-2m"] {
        let f = format!("{id}.yaml");
        fs::copy(repo.join("results/published").join(&f), published.join(&f)).unwrap();
    }
}

fn check_campaign_error(e: &CampaignError, path: &Path) -> Result<(), TestCaseError> {
    let shown = e.to_string();
    let p = path.display().to_string();
    prop_assert!(shown.contains(&p), "{:?} does not name {:?}", shown, p);
    if let CampaignError::Invalid { field, .. } = e {
        prop_assert!(!field.is_empty(), "{:?}", shown);
    }
    Ok(())
}

#[test]
fn campaign_seeds_load_and_expand() {
    let dir = tempfile::tempdir().unwrap();
    campaign_tree(dir.path());
    let path = dir.path().join("campaigns/fuzzed.yaml");
    for c in CAMPAIGNS {
        rewrite(&path, c.as_bytes());
        let f = CampaignFile::load(&path).unwrap_or_else(|e| panic!("{e}\n{c}"));
        let arms = arms::expand(&f, &path).unwrap_or_else(|e| panic!("{e}\n{c}"));
        assert!(!arms.is_empty(), "{c}");
    }
}

#[test]
fn fuzz_campaign_files() {
    let dir = tempfile::tempdir().unwrap();
    campaign_tree(dir.path());
    let path = dir.path().join("campaigns/fuzzed.yaml");
    fuzz(
        file!(),
        "campaign",
        fuzz_cases(),
        (
            mutate::input(mutate::seeds(CAMPAIGNS), CAMPAIGN_TOKENS),
            prop::bool::weighted(0.3),
        ),
        |(input, resolve)| {
            rewrite(&path, &input.0);
            match CampaignFile::load(&path) {
                Ok(f) => {
                    // Resolve the arms (each parses its scenario) in a third of the
                    // cases, and only when there are few: a mutated matrix may
                    // multiply them.
                    let arms: usize = f
                        .groups()
                        .iter()
                        .map(|g| g.matrix.values().map(Vec::len).product::<usize>())
                        .sum();
                    if resolve && arms <= 24 {
                        if let Err(e) = arms::expand(&f, &path) {
                            check_campaign_error(&e, &path)?;
                        }
                    }
                }
                Err(e) => check_campaign_error(&e, &path)?,
            }
            Ok(())
        },
    );
}

// ---------------------------------------------------------------------------------
// Foreign messages: the stamp decoder and the stream sink

/// Payloads as the loader writes them, and as a system may hand them back.
fn stamp_seeds() -> Vec<Vec<u8>> {
    let s = Stamp {
        prop: 41,
        flow: b'A',
        seq: 7,
        ts: 1_700_000_000_000_000,
        loader: None,
    };
    let pad = rates_padding(200);
    let b = Stamp { flow: b'B', ..s };
    vec![
        s.encode(None),
        b.encode(Some(&pad)),
        Body::new(256, false, 3)
            .encode(9, 12, 1_700_000_000_000_000)
            .to_vec(),
        Body::new(64, true, 3).encode(0, 1, 0).to_vec(),
        // jsonb re-serialised: spaces, keys reordered.
        br#"{"ts": 1700000000000000, "seq": 7, "flow": "A", "prop": 41}"#.to_vec(),
        br#"{"pad": "xx", "ts": -5, "seq": -1, "flow": "S", "prop": 0}"#.to_vec(),
    ]
}

const JSON_TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "\\u0000",
    "\\ud800",
    " ",
    "\n",
    "null",
    "true",
    "\"prop\":",
    "\"flow\":",
    "\"seq\":",
    "\"ts\":",
    "\"rates\":",
    "\"pad\":",
    "\"A\"",
    "\"AB\"",
    "\"\"",
    "\"é\"",
    "-",
    "0",
    "1",
    "1e400",
    "-0",
    "0.5",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
];

/// What a decoded stamp must be: the fast path reads the encoder's layout and the
/// stamp round-trips; the slow path reads a JSON document with the same four fields.
fn check_stamp(payload: &[u8]) -> Result<Option<Stamp>, TestCaseError> {
    match Stamp::decode(payload) {
        Ok((s, false)) => {
            // The fast path reads the encoder's layout (leniently: `007` is 7).
            let head: &[u8] = b"{\"prop\":";
            prop_assert!(payload.starts_with(head));
            prop_assert_eq!(Stamp::decode(&s.encode(None)).ok(), Some((s, false)));
            Ok(Some(s))
        }
        Ok((s, true)) => {
            // serde skips the fields it ignores without checking their strings (UTF-8,
            // escapes); where the document is strict JSON, its four fields are the stamp.
            let text = String::from_utf8_lossy(payload);
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
                prop_assert_eq!(v["prop"].as_u64(), Some(s.prop));
                prop_assert_eq!(v["seq"].as_i64(), Some(s.seq));
                prop_assert_eq!(v["ts"].as_i64(), Some(s.ts));
                let flow = String::from_utf8(vec![s.flow]).ok();
                prop_assert_eq!(v["flow"].as_str(), flow.as_deref());
            }
            Ok(Some(s))
        }
        Err(e) => {
            prop_assert!(e
                .to_string()
                .starts_with("payload is not a crossbench stamp"));
            Ok(None)
        }
    }
}

#[test]
fn fuzz_stamp_decode() {
    fuzz(
        file!(),
        "Stamp::decode",
        fuzz_cases(),
        mutate::input(stamp_seeds(), JSON_TOKENS),
        |input| check_stamp(&input.0).map(|_| ()),
    );
}

/// A message on the topic that may not be ours: a stamp whose numbers sit on the
/// edges, or a mutated payload of the loader's own.
fn foreign_payload(now: i64) -> impl Strategy<Value = Input> {
    let edge = prop_oneof![
        Just(0i64),
        Just(-1),
        Just(i64::MIN),
        Just(i64::MAX),
        Just(now),
        Just(now + 10_000_000_000),
        any::<i64>(),
    ];
    let flow = prop::sample::select(&[b'S', b'A', b'B', b'"', 0u8, 0xff][..]);
    let edge_stamp = (any::<u64>(), edge.clone(), edge, flow).prop_map(|(prop, seq, ts, flow)| {
        Input(
            Stamp {
                prop,
                flow,
                seq,
                ts,
                loader: None,
            }
            .encode(None),
        )
    });
    prop_oneof![
        1 => edge_stamp,
        2 => mutate::input(stamp_seeds(), JSON_TOKENS),
    ]
}

fn batch_of(payloads: &[Input]) -> KeyBatch {
    KeyBatch {
        key: Arc::from("p1"),
        messages: payloads
            .iter()
            .map(|p| Delivery {
                payload: Bytes::copy_from_slice(&p.0),
                redelivered: false,
            })
            .collect(),
    }
}

#[test]
fn fuzz_stream_sink() {
    let dir = tempfile::tempdir().unwrap();
    let logs = StreamLogs::create(dir.path(), &["stream_g1".to_string()]).unwrap();
    let clock = Clock::anchor();
    let now = clock.now_us();
    let window = Arc::new(RatedWindow::default());
    window.set(now - 1_000_000, now + 3_600_000_000);
    let sink = Sink::new(
        logs.log(0),
        Arc::new(Ledger::new(64, 1)),
        0,
        Arc::new(SinkMetrics::default()),
        window,
        clock,
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let payload = foreign_payload(now);
    // Found by this property: a stamp whose ts is i64::MIN overflowed `now - ts`.
    let pinned = [Input(
        Stamp {
            prop: 0,
            flow: b'S',
            seq: 0,
            ts: i64::MIN,
            loader: None,
        }
        .encode(None),
    )];
    assert_eq!(
        rt.block_on(sink.handle(batch_of(&pinned))),
        Disposition::Ack
    );
    fuzz(
        file!(),
        "stream sink",
        fuzz_cases(),
        prop::collection::vec(payload, 1..4),
        |payloads| {
            let errors_before = sink.counters.decode_errors.get();
            let popped_before = sink.counters.popped.get();
            let mut bad = 0;
            for p in &payloads {
                bad += u64::from(Stamp::decode(&p.0).is_err());
            }
            let d = rt.block_on(sink.handle(batch_of(&payloads)));
            prop_assert_eq!(d, Disposition::Ack);
            prop_assert_eq!(sink.counters.decode_errors.get() - errors_before, bad);
            prop_assert_eq!(
                sink.counters.popped.get() - popped_before,
                payloads.len() as u64
            );
            Ok(())
        },
    );
    rt.block_on(logs.close()).unwrap();
}

#[test]
fn fuzz_pipeline_stage() {
    let dir = tempfile::tempdir().unwrap();
    let def = StreamDef {
        topic: "cm-ota-sync".into(),
        group: "ota-1".into(),
        flow: Flow::A,
        work_min_ms: 0,
        work_max_ms: 0,
        out_topic: None,
    };
    let logs = StreamLogs::create(dir.path(), &[def.name()]).unwrap();
    let clock = Clock::anchor();
    let now = clock.now_us();
    let window = Arc::new(RatedWindow::default());
    window.set(now - 1_000_000, now + 3_600_000_000);
    // Paused time: the stage's simulated work (0 ms) does not wait for a timer tick.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let mut lanes = Lanes::default();
    let group = lanes.add_group(4);
    let timer = rt
        .block_on(async { WorkTimer::start(lanes, Timing::Virtual, Drive::Thread) })
        .unwrap();
    let env = StageEnv {
        broker: Arc::new(MemBroker::new(MemOptions::default())),
        metrics: Arc::new(Metrics::new(std::slice::from_ref(&def))),
        window,
        clock,
        cohorts: None,
        stop: CancellationToken::new(),
        seed: 1,
        properties: 64,
        timer,
        fleet: None,
    };
    let stage = Stage::new(0, def, group, logs.log(0), &env);
    // Found by this property: a stamp whose ts is i64::MIN overflowed `now - ts`.
    let pinned = [Input(
        Stamp {
            prop: 0,
            flow: b'S',
            seq: 0,
            ts: i64::MIN,
            loader: None,
        }
        .encode(None),
    )];
    assert_eq!(
        rt.block_on(stage.handle(batch_of(&pinned))),
        Disposition::Ack
    );
    fuzz(
        file!(),
        "pipeline stage",
        fuzz_cases(),
        prop::collection::vec(foreign_payload(now), 1..4),
        |payloads| {
            let errors_before = stage.counters.decode_errors.get();
            let bad: u64 = payloads
                .iter()
                .map(|p| u64::from(Stamp::decode(&p.0).is_err()))
                .sum();
            let d = rt.block_on(stage.handle(batch_of(&payloads)));
            prop_assert_eq!(d, Disposition::Ack);
            prop_assert_eq!(stage.counters.decode_errors.get() - errors_before, bad);
            Ok(())
        },
    );
    rt.block_on(logs.close()).unwrap();
}

/// The panics these properties found, pinned: a duration past `Duration`'s range
/// (`cannot convert float seconds to Duration` in `duration_text` and the drain's
/// grace) is refused with a parse error. (The stamp whose `ts` is `i64::MIN`,
/// `attempt to subtract with overflow` in the stream sink and the pipeline stage, is
/// pinned at the start of `fuzz_stream_sink` and `fuzz_pipeline_stage`.)
#[test]
fn durations_past_the_range_are_refused() {
    let smoke = include_str!("../../scenarios/smoke.yaml");
    for (from, to) in [
        ("duration: 8s", "duration: 18446744073709551615s"),
        ("duration: 8s", "duration: 1e300"),
        ("grace: auto", "grace: 1e300"),
    ] {
        let text = smoke.replace(from, to);
        let e = scenario::parse(&text, "smoke.yaml", &[]).unwrap_err();
        assert!(matches!(e, ScenarioError::Parse { .. }), "{to}: {e}");
        assert!(e.to_string().contains("too long a duration"), "{to}: {e}");
    }
    let set = "warmup=99999999999999999999999h".to_string();
    let e = scenario::parse(smoke, "smoke.yaml", std::slice::from_ref(&set)).unwrap_err();
    assert!(e.to_string().contains("too long a duration"), "{e}");
}
