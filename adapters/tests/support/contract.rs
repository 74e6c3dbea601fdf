//! The adapter contract (SPEC.md §6, `adapters/src/broker.rs`) as one suite of
//! cases, each an async fn taking the broker under test and its system's
//! [`Fixture`]. A system's `tests/contract_<system>.rs` only builds its fixture(s) and
//! instantiates the suite with [`contract_suite!`](crate::contract_suite), which
//! makes every case its own `#[tokio::test]` named `<suite>::<case>`, so a failure
//! names both the system (and variant) and the case.
//!
//! The cases run against the real server (the control broker `mem` is in-process).
//! They hold no wall-clock threshold a slow machine can break: waits have generous
//! deadlines and end as soon as the expected messages are in; the one time that
//! matters (a refused batch comes back only after the lease) is compared with the
//! configured lease, from a moment that is certainly no later than the read that
//! started the lease.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use adapters::{
    Broker, BuildContext, ConsumeOptions, Durability, ErrorClass, FanOut, StreamCounters,
    SystemOptions, TopicSpec, Topology,
};
use tokio_util::sync::CancellationToken;

use super::{keys, publish_concurrently, publish_interleaved, wait_all, Consumers, Recorder};

/// How long any wait for messages may take before the case gives up and reports
/// what it got: far beyond what a loaded machine needs, short of a hung run.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// After the expected messages are in, how long the case keeps listening for one
/// more (a duplicate, a stray from an earlier topology) before it stops the
/// consumers. A settle time, not a threshold: nothing fails for being slow here.
pub const SETTLE: Duration = Duration::from_millis(700);

/// One case at a time per test binary: they share the server and the machine's cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// When a refused batch comes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redelivery {
    /// After the lease (visibility timeout) the system holds a read message for: not
    /// before it, counted from the read.
    AfterLease(Duration),
    /// At once: the adapter gives the batch back. `lease` is the system's lease when
    /// it has one; the batch must be back before it runs out.
    AtOnce { lease: Option<Duration> },
}

/// What a key-batch's key is when the topology has fewer lanes than keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lanes {
    /// The system gives every key its own ordered lane whatever `lanes` says.
    PerKey,
    /// Keys share the lanes (partitions, lane queues), but a batch holds one key.
    SharedKeyBatches,
    /// Keys share the lanes and a batch is a lane: several keys' messages, under the
    /// lane's name (`lanes::lane_key`).
    LaneBatches,
}

/// Keys of the adapter's own `counters()` that count what the suite can check.
#[derive(Debug, Clone, Copy, Default)]
pub struct Counts {
    /// Messages published (logical: one per payload given to `publish`).
    pub published: Option<&'static str>,
    /// Physical copies written: the published messages times the topic's groups under
    /// materialised fan-out, the published messages under native fan-out.
    pub copies: Option<&'static str>,
    /// Messages acked, summed over the streams.
    pub acked: Option<&'static str>,
    /// Messages in refused batches, summed over the streams.
    pub refused: Option<&'static str>,
}

/// A server that is not there, as the system's options name it.
#[derive(Debug, Clone)]
pub struct Unreachable {
    /// Options that point at nothing (a closed port on loopback).
    pub options: SystemOptions,
    /// A password or token those options carry, which no error text may show.
    pub secret: Option<&'static str>,
    /// What the error must say to point at the fix (the provisioning script, the README).
    pub hint: &'static str,
}

/// What the server says it is, read by the test through another path than the
/// adapter's (a command-line tool, the server's binary), for
/// [`provenance_is_the_servers_own`].
#[derive(Debug, Clone, Default)]
pub struct Expected {
    /// The other path, named in every failure message (`psql … SHOW server_version`).
    pub path: String,
    /// The version the server reports; None when its protocol reports none (the
    /// description must then say "not reported").
    pub version: Option<String>,
    /// Facts the description's `reported` must hold, with these values.
    pub reported: Vec<(String, String)>,
    /// Settings the description's `settings` must hold, with these values.
    pub settings: Vec<(String, String)>,
    /// Whether the server's version is known not to name its build (a caveat).
    pub caveat: bool,
}

/// Reads [`Expected`]; None when the other path is not there (SKIP by hand, a
/// failure under `CI`, through [`tool`]).
pub type Witness = fn() -> Option<Expected>;

/// The output of `program args…` (stdout, trimmed), or None with a SKIP (a failure
/// under `CI`) when it cannot be run or fails.
pub fn tool(program: &str, args: &[&str]) -> Option<String> {
    let shown = format!("{program} {}", args.join(" "));
    match std::process::Command::new(program).args(args).output() {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        Ok(o) => {
            super::services::unavailable(
                &format!(
                    "`{shown}` failed ({}): {}",
                    o.status,
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
                "the provisioning script installs it",
            );
            None
        }
        Err(e) => {
            super::services::unavailable(
                &format!("`{shown}` cannot run: {e}"),
                "the provisioning script installs it",
            );
            None
        }
    }
}

/// The value of `key:` in `key:value` lines (Redis's INFO).
pub fn field(text: &str, key: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(|v| v.trim().to_string())
}

/// One system (and variant) as the suite drives it.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// The system and variant in every failure message (`rabbitmq hash-exchange/quorum`).
    pub name: String,
    /// What the broker is built from, through the registry (`SystemOptions::build`).
    pub options: SystemOptions,
    /// Every topic of the suite starts with it: unique per system and variant, and
    /// short (pgmq's queue names stop at 47 characters).
    pub prefix: String,
    pub durability: Durability,
    pub redelivery: Redelivery,
    pub lanes: Lanes,
    pub counts: Counts,
    /// The server's own account of itself, read another way.
    pub witness: Witness,
}

impl Fixture {
    /// The broker, built through the registry.
    pub fn build(&self) -> Arc<dyn Broker> {
        self.options
            .build(&BuildContext::default())
            .unwrap_or_else(|e| panic!("{}: building the broker: {e}", self.name))
    }

    pub fn topic(&self, case: &str) -> String {
        format!("{}{case}", self.prefix)
    }

    /// One topic read by `groups`, reset at setup, at the fixture's durability.
    pub fn topology(&self, topic: &str, groups: &[&str], keys: u64, lanes: u64) -> Topology {
        Topology {
            topics: vec![TopicSpec {
                name: topic.into(),
                groups: groups.iter().map(|g| g.to_string()).collect(),
            }],
            keys,
            lanes,
            durability: self.durability,
            dedup_window_sec: 0,
            reset: true,
            sharing: adapters::Sharing::ALONE,
        }
    }

    /// A recorder for `group` that expects batch keys as this system makes them with
    /// `lanes` lanes for `keys` keys.
    pub fn recorder(&self, group: &str, lanes: u64, keys: u64) -> Recorder {
        let r = Recorder::new(group);
        if self.lanes == Lanes::LaneBatches && lanes < keys {
            r.lane_batches(lanes, keys)
        } else {
            r
        }
    }
}

/// Run one case that needs the server: one at a time, skipped (or failed under `CI`)
/// when `subject` finds no server.
pub async fn online<S, C, Fut>(case: &str, subject: S, run: C)
where
    S: Future<Output = Option<Fixture>>,
    C: FnOnce(Arc<dyn Broker>, Fixture) -> Fut,
    Fut: Future<Output = ()>,
{
    let _serial = SERIAL.lock().await;
    let Some(f) = subject.await else { return };
    eprintln!("{}: {case}", f.name);
    let broker = f.build();
    run(broker.clone(), f).await;
    broker.close().await.expect("close");
}

/// Run one case that needs no server.
pub async fn offline<C, Fut>(case: &str, system: &str, u: Unreachable, run: C)
where
    C: FnOnce(Arc<dyn Broker>, String, Unreachable) -> Fut,
    Fut: Future<Output = ()>,
{
    eprintln!("{system}: {case}");
    let broker = u
        .options
        .build(&BuildContext::default())
        .unwrap_or_else(|e| panic!("{system}: building the broker: {e}"));
    run(broker, system.to_string(), u).await;
}

/// Setup, and what it said, or a failure naming the system.
async fn setup(b: &Arc<dyn Broker>, f: &Fixture, t: &Topology) -> adapters::Description {
    b.setup(t)
        .await
        .unwrap_or_else(|e| panic!("{}: setup of {:?}: {e}", f.name, t.topics))
}

/// What every recorder got, for failure messages.
fn progress(recs: &[Arc<Recorder>], want: u64) -> String {
    recs.iter()
        .map(|r| {
            format!(
                "{} processed {} of {want} (keys {:?}, refused batches {})",
                r.group,
                r.processed(),
                r.keys_seen(),
                r.refused_batches()
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

// ------------------------------------------------------------------------ cases

/// The description's provenance is the server's own: the version (and the facts and
/// settings the fixture's witness reads) equal what the test reads through another
/// path; a server whose protocol reports no version is said to report none.
pub async fn provenance_is_the_servers_own(b: Arc<dyn Broker>, f: Fixture) {
    let topic = f.topic("prov");
    let d = setup(&b, &f, &f.topology(&topic, &["g"], 1, 1)).await;
    let p = &d.provenance;
    let witness = f.witness;
    let Some(want) = tokio::task::spawn_blocking(witness)
        .await
        .expect("the witness ran")
    else {
        return;
    };
    eprintln!(
        "{}: provenance {p:?}; read through {}: {want:?}",
        f.name, want.path
    );
    assert!(
        !p.product.is_empty() && !p.source.is_empty(),
        "{}: the provenance names no product or source: {p:?}",
        f.name
    );
    assert_eq!(
        p.version, want.version,
        "{}: the version in the description is not the one the server reports through `{}` (provenance: {p:?})",
        f.name, want.path
    );
    if want.version.is_none() {
        assert!(
            p.notes.iter().any(|n| n.contains("version not reported")),
            "{}: no version, and no note saying it was not reported: {p:?}",
            f.name
        );
    }
    for (k, v) in &want.reported {
        assert_eq!(
            p.reported.get(k),
            Some(v),
            "{}: reported {k} differs from `{}` (provenance: {p:?})",
            f.name,
            want.path
        );
    }
    for (k, v) in &want.settings {
        assert_eq!(
            p.settings.get(k),
            Some(v),
            "{}: setting {k} differs from `{}` (provenance: {p:?})",
            f.name,
            want.path
        );
    }
    assert_eq!(
        p.caveat.is_some(),
        want.caveat,
        "{}: a caveat on the version was {}expected: {p:?}",
        f.name,
        if want.caveat { "" } else { "not " }
    );
    let text = format!("{p:?}");
    assert!(
        !text.contains("://"),
        "{}: the provenance carries a URL (it may carry a password): {text}",
        f.name
    );
}

/// Two groups read one topic; each gets every message once, in publish order per
/// key, never one key in two handler calls at once. Half the messages are published
/// before the consumers start, half while they run, each key from its own task.
pub async fn in_order_per_key_two_groups(b: Arc<dyn Broker>, f: Fixture) {
    let topic = f.topic("order");
    let (n_keys, per_key) = (10u64, 30u64);
    let d = setup(&b, &f, &f.topology(&topic, &["g1", "g2"], n_keys, n_keys)).await;
    assert_eq!(
        d.system,
        f.options.system().name(),
        "{}: description",
        f.name
    );
    let names = keys(n_keys);
    publish_concurrently(&b, &topic, &names, 0..per_key / 2).await;
    let recs = [
        f.recorder("g1", n_keys, n_keys).arc(),
        f.recorder("g2", n_keys, n_keys).arc(),
    ];
    let run = Consumers::start(&b, &topic, &recs, 4, 16);
    publish_concurrently(&b, &topic, &names, per_key / 2..per_key).await;
    let want = n_keys * per_key;
    wait_all(&recs, want, DEADLINE).await;
    tokio::time::sleep(SETTLE).await;
    run.finish().await;
    let context = format!("{}: {}", f.name, progress(&recs, want));
    for r in &recs {
        r.assert_in_order(&names, per_key, &context);
    }
}

/// A refused key-batch comes back whole (every message of it, flagged redelivered),
/// with its key's order kept (nothing later of the key is processed before it, nothing
/// is processed twice), and, where the system has a lease, not before the lease ran
/// out (counted from the consumers' start, which is no later than the read) or, where
/// the adapter gives it back at once, before the lease would have run out.
pub async fn refused_batch_is_redelivered(b: Arc<dyn Broker>, f: Fixture) {
    let topic = f.topic("refuse");
    let (n_keys, per_key) = (3u64, 8u64);
    let d = setup(&b, &f, &f.topology(&topic, &["g"], n_keys, n_keys)).await;
    let lease = match f.redelivery {
        Redelivery::AfterLease(l) => Some(l),
        Redelivery::AtOnce { lease } => lease,
    };
    assert_eq!(
        d.lease_ms,
        lease.map(|l| l.as_millis() as u64),
        "{}: the description's lease is the one refused batches wait for",
        f.name
    );
    let names = keys(n_keys);
    // Everything published first: the first batch of p1 holds its head and, where the
    // system batches, the messages after it.
    publish_interleaved(&*b, &topic, &names, 0..per_key, per_key).await;
    let rec = f
        .recorder("g", n_keys, n_keys)
        .refusing(Some(("p1".into(), 0)))
        .arc();
    let started = Instant::now();
    let run = Consumers::start(&b, &topic, std::slice::from_ref(&rec), 4, 8);
    let want = n_keys * per_key;
    rec.wait_for(want, DEADLINE + lease.unwrap_or_default())
        .await;
    tokio::time::sleep(SETTLE).await;
    let counters = run.finish().await;
    let context = format!("{}: {}", f.name, progress(std::slice::from_ref(&rec), want));

    let refused = rec.refused();
    assert!(
        refused.contains(&("p1".to_string(), 0)),
        "{context}: the batch holding (p1, 0) was never handed over and refused: {refused:?}"
    );
    assert_eq!(rec.refused_batches(), 1, "{context}");
    // Whole and in order: every message of every key exactly once, in order, so every
    // refused message came back and nothing of p1 overtook it.
    rec.assert_in_order(&names, per_key, &context);
    for (k, s) in &refused {
        assert!(
            rec.deliveries(k)
                .iter()
                .any(|&(s2, again)| s2 == *s && again),
            "{context}: ({k}, {s}) of the refused batch came back without the redelivered flag: {:?}",
            rec.deliveries(k)
        );
    }
    assert_eq!(
        StreamCounters::get(&counters[0].refused),
        refused.len() as u64,
        "{context}: StreamCounters.refused is the refused batch's messages"
    );
    let (refused_at, back_at) = rec.refused_then_back();
    let (refused_at, back_at) = (refused_at.expect("refused"), back_at.expect("back"));
    match f.redelivery {
        Redelivery::AfterLease(lease) => {
            // The read that leased the batch happened after `started`, so the batch
            // may not come back before `started + lease`. Granularity: pgmq counts
            // its visibility timeout on the server's clock, read by statements that
            // take their timestamps a little apart; 50 ms covers that, not load.
            let after = back_at - started;
            assert!(
                after + Duration::from_millis(50) >= lease,
                "{context}: the refused batch came back {after:?} after the consumers started, before the {lease:?} lease ran out"
            );
        }
        Redelivery::AtOnce { lease: Some(lease) } => {
            let waited = back_at - refused_at;
            assert!(
                waited < lease,
                "{context}: the refused batch came back {waited:?} after the refusal: it waited for the {lease:?} lease instead of being given back"
            );
        }
        Redelivery::AtOnce { lease: None } => {}
    }
}

/// Many keys, two groups, a handler that takes a while, a small batch and a wide
/// stage, and messages arriving for keys already in a handler call (a third before the
/// consumers start, the rest while they run, each key from its own task): the adapter
/// has every chance to hand one key to two handler calls at once. The recorder notices
/// a batch key or a message key already in a call; there must be none, and every key
/// stays in order.
pub async fn one_key_in_flight_per_group(b: Arc<dyn Broker>, f: Fixture) {
    let topic = f.topic("inflight");
    let (n_keys, per_key) = (16u64, 15u64);
    setup(&b, &f, &f.topology(&topic, &["g1", "g2"], n_keys, n_keys)).await;
    let names = keys(n_keys);
    publish_interleaved(&*b, &topic, &names, 0..per_key / 3, 5).await;
    let recs = [
        f.recorder("g1", n_keys, n_keys)
            .work(Duration::from_millis(5))
            .arc(),
        f.recorder("g2", n_keys, n_keys)
            .work(Duration::from_millis(5))
            .arc(),
    ];
    let run = Consumers::start(&b, &topic, &recs, 2, 64);
    publish_concurrently(&b, &topic, &names, per_key / 3..per_key).await;
    let want = n_keys * per_key;
    wait_all(&recs, want, DEADLINE).await;
    tokio::time::sleep(SETTLE).await;
    run.finish().await;
    let context = format!("{}: {}", f.name, progress(&recs, want));
    for r in &recs {
        assert_eq!(
            r.overlaps(),
            0,
            "{context}: {} had a key in two handler calls at once",
            r.group
        );
        r.assert_in_order(&names, per_key, &context);
    }
}

/// Twenty keys on four lanes: every key still comes out in order, and a batch holds
/// what the system says it holds (one key, or one lane's keys under the lane's name).
pub async fn fewer_lanes_than_keys(b: Arc<dyn Broker>, f: Fixture) {
    let topic = f.topic("lanes");
    let (n_keys, lanes, per_key) = (20u64, 4u64, 10u64);
    let d = setup(&b, &f, &f.topology(&topic, &["g"], n_keys, lanes)).await;
    if f.lanes != Lanes::PerKey {
        assert!(
            (1..=lanes).contains(&d.ordered_lanes),
            "{}: {} ordered lanes provisioned for {lanes} lanes of one stream",
            f.name,
            d.ordered_lanes
        );
    }
    let names = keys(n_keys);
    publish_interleaved(&*b, &topic, &names, 0..per_key / 2, 2).await;
    let rec = f.recorder("g", lanes, n_keys).arc();
    let run = Consumers::start(&b, &topic, std::slice::from_ref(&rec), 8, 8);
    publish_concurrently(&b, &topic, &names, per_key / 2..per_key).await;
    let want = n_keys * per_key;
    rec.wait_for(want, DEADLINE).await;
    tokio::time::sleep(SETTLE).await;
    run.finish().await;
    let context = format!("{}: {}", f.name, progress(std::slice::from_ref(&rec), want));
    rec.assert_in_order(&names, per_key, &context);
    if f.lanes == Lanes::LaneBatches {
        let lanes_seen = rec.batch_keys();
        assert!(
            lanes_seen.len() as u64 <= lanes,
            "{context}: batches under {} lane names for {lanes} lanes: {lanes_seen:?}",
            lanes_seen.len()
        );
    }
}

/// Reset leaves nothing behind: what an earlier topology of the same names held (a
/// backlog in one group, committed progress in the other) is not delivered after a
/// setup with `reset: true`, and the new messages all are, from their start. The old
/// messages carry seqs from 1000 so any that leak are told apart.
pub async fn reset_leaves_nothing_behind(b: Arc<dyn Broker>, f: Fixture) {
    let topic = f.topic("reset");
    let (n_keys, per_key) = (4u64, 20u64);
    let t = f.topology(&topic, &["g1", "g2"], n_keys, n_keys);
    setup(&b, &f, &t).await;
    let names = keys(n_keys);
    // Before: g1 consumes ten messages per key (and acks or commits them), g2 none;
    // then five more per key, left for both.
    publish_interleaved(&*b, &topic, &names, 1000..1010, 5).await;
    let before = f.recorder("g1", n_keys, n_keys).arc();
    let run = Consumers::start(&b, &topic, std::slice::from_ref(&before), 4, 8);
    before.wait_for(n_keys * 10, DEADLINE).await;
    tokio::time::sleep(SETTLE).await;
    run.finish().await;
    assert_eq!(
        before.processed(),
        n_keys * 10,
        "{}: before the reset g1 processed {} of {}",
        f.name,
        before.processed(),
        n_keys * 10
    );
    publish_interleaved(&*b, &topic, &names, 1010..1015, 5).await;

    setup(&b, &f, &t).await;
    publish_interleaved(&*b, &topic, &names, 0..per_key, 5).await;
    let recs = [
        f.recorder("g1", n_keys, n_keys).arc(),
        f.recorder("g2", n_keys, n_keys).arc(),
    ];
    let run = Consumers::start(&b, &topic, &recs, 4, 8);
    let want = n_keys * per_key;
    wait_all(&recs, want, DEADLINE).await;
    tokio::time::sleep(SETTLE).await;
    run.finish().await;
    let context = format!(
        "{}: after the reset (old seqs are >= 1000): {}",
        f.name,
        progress(&recs, want)
    );
    for r in &recs {
        r.assert_in_order(&names, per_key, &context);
    }
}

/// Publishing to a topic the topology does not have is an `UnknownTopic` error, and so
/// is consuming one (at once, not after the stop).
pub async fn unknown_topic_is_classified(b: Arc<dyn Broker>, f: Fixture) {
    let topic = f.topic("known");
    setup(&b, &f, &f.topology(&topic, &["g"], 1, 1)).await;
    let nosuch = f.topic("nosuch");
    let e = b
        .publish(&nosuch, "p0", &[super::payload("p0", 0)])
        .await
        .expect_err("publish to a topic the topology does not have");
    assert_eq!(
        e.class(),
        ErrorClass::UnknownTopic,
        "{}: publish to {nosuch:?}: {e}",
        f.name
    );
    let stop = CancellationToken::new();
    let consume = b.consume(
        &nosuch,
        "g",
        ConsumeOptions {
            batch: 1,
            lanes: 1,
            counters: Arc::new(StreamCounters::default()),
        },
        Recorder::new("g").arc(),
        stop.clone(),
    );
    let r = tokio::time::timeout(DEADLINE, consume).await;
    stop.cancel();
    let e = r
        .unwrap_or_else(|_| panic!("{}: consume of {nosuch:?} neither failed nor ended", f.name))
        .expect_err("consume of a topic the topology does not have");
    assert_eq!(
        e.class(),
        ErrorClass::UnknownTopic,
        "{}: consume of {nosuch:?}: {e}",
        f.name
    );
}

/// The counts agree with what happened: per stream, `acked` (plus `ack_errors`, if an
/// ack failed) is what the handler acknowledged, `refused` the messages of the refused
/// batches, `redelivered` the deliveries flagged so; the adapter's own counters, where
/// it keeps them, the messages published, the copies its fan-out writes, and the
/// streams' acked and refused messages summed.
pub async fn counters_are_consistent(b: Arc<dyn Broker>, f: Fixture) {
    let topic = f.topic("counts");
    let (n_keys, per_key) = (4u64, 12u64);
    let d = setup(&b, &f, &f.topology(&topic, &["g1", "g2"], n_keys, n_keys)).await;
    let names = keys(n_keys);
    publish_interleaved(&*b, &topic, &names, 0..per_key, 4).await;
    let recs = [
        f.recorder("g1", n_keys, n_keys)
            .refusing_each(vec![("p1".into(), 0), ("p2".into(), 5)])
            .arc(),
        f.recorder("g2", n_keys, n_keys)
            .refusing_each(vec![("p3".into(), 2)])
            .arc(),
    ];
    let run = Consumers::start(&b, &topic, &recs, 4, 8);
    let published = n_keys * per_key;
    let lease = match f.redelivery {
        Redelivery::AfterLease(l) => l,
        Redelivery::AtOnce { .. } => Duration::ZERO,
    };
    wait_all(&recs, published, DEADLINE + lease * 2).await;
    tokio::time::sleep(SETTLE).await;
    let counters = run.finish().await;
    let stats = b.counters();
    let context = format!(
        "{}: {}; broker counters {stats:?}",
        f.name,
        progress(&recs, published)
    );
    let (mut acked, mut refused) = (0u64, 0u64);
    for ((r, c), want_refusals) in recs.iter().zip(&counters).zip([2u64, 1]) {
        let get = StreamCounters::get;
        r.assert_in_order(&names, per_key, &context);
        assert_eq!(r.refused_batches(), want_refusals, "{context}");
        assert_eq!(
            get(&c.acked) + get(&c.ack_errors),
            r.processed(),
            "{context}: {}: acked + ack_errors is what the handler acknowledged",
            r.group
        );
        assert_eq!(
            get(&c.refused),
            r.refused_messages(),
            "{context}: {}: refused is the messages of the refused batches",
            r.group
        );
        assert_eq!(
            get(&c.redelivered),
            r.redelivered_seen(),
            "{context}: {}: redelivered is the deliveries flagged redelivered",
            r.group
        );
        acked += get(&c.acked);
        refused += get(&c.refused);
    }
    let copies = match d.fan_out {
        FanOut::Materialised => published * 2,
        FanOut::Native => published,
    };
    for (key, want, what) in [
        (f.counts.published, published, "messages published"),
        (f.counts.copies, copies, "copies its fan-out writes"),
        (f.counts.acked, acked, "the streams' acked messages"),
        (f.counts.refused, refused, "the streams' refused messages"),
    ] {
        let Some(key) = key else { continue };
        assert_eq!(
            stats.get(key).copied(),
            Some(want),
            "{context}: {key} is {what}"
        );
    }
}

/// What the system still holds (`Broker::held`), where the adapter can ask: every
/// copy published that no consumer took (one per group), then nothing once the groups
/// consumed it all. An adapter that cannot ask answers `None` from the start, and the
/// drain then judges a silent tail as before (docs/record.md, `drain.outcome`).
pub async fn held_counts_what_no_consumer_took(b: Arc<dyn Broker>, f: Fixture) {
    let topic = f.topic("held");
    let (n_keys, per_key) = (4u64, 5u64);
    setup(&b, &f, &f.topology(&topic, &["g1", "g2"], n_keys, n_keys)).await;
    let names = keys(n_keys);
    publish_interleaved(&*b, &topic, &names, 0..per_key, 5).await;
    let published = n_keys * per_key;
    // Every group holds a copy of every message until it takes it. A system's count
    // may lag its acknowledgement a little: asked again until it agrees or 10 s pass.
    let want = published * 2;
    let held_until = |want: u64| {
        let b = b.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let h = b.held().await;
                let done = h.as_ref().is_none_or(|h| h.messages == want);
                if done || Instant::now() >= deadline {
                    return h;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let Some(before) = held_until(want).await else {
        return;
    };
    assert_eq!(
        before.messages, want,
        "{}: held before any consumer ran: {before:?}",
        f.name
    );
    assert!(before.places >= 2, "{}: {before:?}", f.name);
    let recs = [
        f.recorder("g1", n_keys, n_keys).arc(),
        f.recorder("g2", n_keys, n_keys).arc(),
    ];
    let run = Consumers::start(&b, &topic, &recs, 4, 8);
    wait_all(&recs, published, DEADLINE).await;
    let after = held_until(0).await;
    let _counters = run.finish().await;
    assert_eq!(
        after.map(|h| h.messages),
        Some(0),
        "{}: held once both groups took everything ({})",
        f.name,
        progress(&recs, published)
    );
}

/// A server that is not there: setup fails with a `Connection` error that says where
/// to look, and never shows the password (or token) the options carry.
pub async fn unreachable_server_is_a_connection_error(
    b: Arc<dyn Broker>,
    system: String,
    u: Unreachable,
) {
    let t = Topology {
        topics: vec![TopicSpec {
            name: "ct-unreachable".into(),
            groups: vec!["g".into()],
        }],
        keys: 1,
        lanes: 1,
        durability: Durability::Default,
        dedup_window_sec: 0,
        reset: false,
        sharing: adapters::Sharing::ALONE,
    };
    let e = tokio::time::timeout(DEADLINE, b.setup(&t))
        .await
        .unwrap_or_else(|_| panic!("{system}: setup against nothing did not end"))
        .expect_err("setup against a closed port");
    let text = e.to_string();
    assert_eq!(e.class(), ErrorClass::Connection, "{system}: {text}");
    assert!(
        text.contains(u.hint),
        "{system}: the error does not point at {}: {text}",
        u.hint
    );
    if let Some(secret) = u.secret {
        assert!(
            !text.contains(secret) && !format!("{e:?}").contains(secret),
            "{system}: the error shows the secret: {text}"
        );
    }
}

/// The suite for one system (or variant): a module of `#[tokio::test]`s, one per case.
///
/// ```ignore
/// contract_suite! {
///     mod pgmq {
///         subject: pgmq(),                   // async: Option<Fixture>, None = SKIP
///         unreachable: unreachable(),        // optional: the offline case
///         known: { case: "why", … },         // optional: cases the system fails
///     }
/// }
/// ```
///
/// A case listed under `known` is `#[ignore]`d with its reason (`cargo test --
/// --ignored` runs it and shows the failure); list one only for a real violation of
/// the contract by the system, never to hide a flaky test.
#[macro_export]
macro_rules! contract_suite {
    (
        mod $suite:ident {
            subject: $subject:expr
            $(, unreachable: $unreachable:expr)?
            $(, known: { $($known:ident: $why:literal),* $(,)? })?
            $(,)?
        }
    ) => {
        mod $suite {
            #[allow(unused_imports)]
            use super::*;
            $crate::contract_suite!(@case_macro ($) [$($($known: $why),*)?]);
            __contract_case!(in_order_per_key_two_groups, $subject);
            __contract_case!(refused_batch_is_redelivered, $subject);
            __contract_case!(one_key_in_flight_per_group, $subject);
            __contract_case!(fewer_lanes_than_keys, $subject);
            __contract_case!(reset_leaves_nothing_behind, $subject);
            __contract_case!(unknown_topic_is_classified, $subject);
            __contract_case!(counters_are_consistent, $subject);
            __contract_case!(held_counts_what_no_consumer_took, $subject);
            __contract_case!(provenance_is_the_servers_own, $subject);
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn unreachable_server_is_a_connection_error() {
                    $crate::support::contract::offline(
                        "unreachable_server_is_a_connection_error",
                        stringify!($suite),
                        $unreachable,
                        $crate::support::contract::unreachable_server_is_a_connection_error,
                    )
                    .await;
                }
            )?
        }
    };
    // One test per case; a known case is ignored with its reason.
    (@case_macro ($d:tt) [$($known:ident: $why:literal),*]) => {
        macro_rules! __contract_case {
            $(
                ($known, $d subject:expr) => {
                    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                    #[ignore = $why]
                    async fn $known() {
                        $crate::support::contract::online(
                            stringify!($known),
                            $d subject,
                            $crate::support::contract::$known,
                        )
                        .await;
                    }
                };
            )*
            ($d case:ident, $d subject:expr) => {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $d case() {
                    $crate::support::contract::online(
                        stringify!($d case),
                        $d subject,
                        $crate::support::contract::$d case,
                    )
                    .await;
                }
            };
        }
    };
}
