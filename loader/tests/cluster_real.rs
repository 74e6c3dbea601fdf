//! Replicated tiers under the faults users buy them for: a three-node cluster of the
//! test's own, each node on a test host of its own (support/cluster.rs), cut by a
//! `partition` fault or robbed of its leader by `kill-leader`, with a cell running
//! through it. Each test asks what the tier promises: nothing acknowledged is lost,
//! the cluster serves again after the heal, and the record says who led each second.
//!
//! The cut is checked twice: by the harness (its record's `connectivity`, which makes
//! the cell VOID when traffic crossed the cut) and by this test, which watches the
//! namespaces while the cell runs and connects across the cut itself.
//!
//! Needs root (namespaces, nftables): under `CI` a cluster that cannot be made fails
//! its test; by hand it skips. Every test's name starts with `real_cluster_`.

mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use support::cluster::Cluster;
use support::u;
use support::victims::need;

/// Run a cell, returning (exit code, result.json, console text, dir holder).
fn cell(scn: &str, sets: &[String]) -> (i32, Value, String, tempfile::TempDir) {
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    support::run_cell(scn, &sets)
}

/// What every cell here shares: a small pipeline (8 keys, 100 ev/s), a short
/// warm-up, a drain long enough for the cluster to recover, duplicates allowed
/// (at-least-once: a redelivery after a lost acknowledgement is not a fault), and a
/// load that is exploratory (a cut cluster cannot hold it).
fn cell_sets(system_sets: &[String], duration: &str, cluster: &str, faults: &str) -> Vec<String> {
    [
        "properties=8",
        "rate=100",
        "warmup=2s",
        "drain.max=40s",
        "accept=at-least-once",
        "held.exploratory=true",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(system_sets.iter().cloned())
    .chain([
        format!("duration={duration}"),
        format!("cluster={cluster}"),
        format!("faults={faults}"),
    ])
    .collect()
}

/// The figures a failed assertion shows.
fn show(r: &Value) -> String {
    format!(
        "outcome={} void={} load={} drain={} totals={} events={} warnings={}",
        r["outcome"],
        r["void"],
        r["load"],
        r["drain"],
        r["verdict"]["totals"],
        r["faults"]["events"],
        r["warnings"]
    )
}

/// What the test itself saw of a cut while the cell ran: for each moment a node's
/// namespace held the harness's table, whether that node still reached the others.
#[derive(Debug, Default)]
struct Watched {
    /// (isolated node, peer, connected).
    tries: Vec<(usize, usize, bool)>,
}

/// Does node `i`'s namespace hold the harness's table, with every other node's
/// address in it (the isolated node's rules)?
fn isolated_by_table(hosts: &Cluster, i: usize) -> bool {
    let out = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &hosts.hosts[i].netns,
            "nft",
            "list",
            "table",
            "inet",
            "crossbench",
        ])
        .output();
    let Ok(out) = out else { return false };
    let text = String::from_utf8_lossy(&out.stdout);
    out.status.success()
        && (0..hosts.hosts.len())
            .filter(|j| *j != i)
            .all(|j| text.contains(&hosts.hosts[j].address))
}

/// Watch the hosts until `stop`: a node whose namespace holds the harness's table
/// with every other node's address in it is the isolated one; try its links. A try
/// counts only when the table was there before it and is still there after it (a
/// heal between the two would let a connection through that the cut never did).
fn watch(hosts: &Cluster, port: u16, stop: &AtomicBool, seen: &Mutex<Watched>) {
    while !stop.load(Ordering::Relaxed) {
        for i in 0..hosts.hosts.len() {
            if !isolated_by_table(hosts, i) {
                continue;
            }
            let tries: Vec<(usize, usize, bool)> = (0..hosts.hosts.len())
                .filter(|j| *j != i)
                .map(|j| (i, j, hosts.connects(i, j, port)))
                .collect();
            if isolated_by_table(hosts, i) {
                seen.lock().unwrap().tries.extend(tries);
            }
        }
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// A cell with a watcher beside it.
fn watched_cell(
    hosts: &Cluster,
    port: u16,
    scn: &str,
    sets: &[String],
) -> (i32, Value, String, tempfile::TempDir, Watched) {
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Watched::default()));
    std::thread::scope(|s| {
        let w = s.spawn(|| watch(hosts, port, &stop, &seen));
        let out = cell(scn, sets);
        stop.store(true, Ordering::Relaxed);
        w.join().unwrap();
        let seen = std::mem::take(&mut *seen.lock().unwrap());
        (out.0, out.1, out.2, out.3, seen)
    })
}

/// The partition's event and the heal's, checked: the cut held (nothing crossed it,
/// as the harness and this test saw), and the heal joined every node again.
fn assert_cut_and_heal(r: &Value, seen: &Watched) {
    let events = r["faults"]["events"].as_array().expect("fault events");
    let cut = events
        .iter()
        .find(|e| e["action"] == "partition")
        .unwrap_or_else(|| panic!("no partition event: {}", show(r)));
    let c = &cut["connectivity"];
    assert!(
        cut["ineffective"].is_null(),
        "the cut did not take effect: {}",
        show(r)
    );
    assert_eq!(u(&c["across_tried"]), 4, "{}", show(r));
    assert_eq!(
        c["across_connected"].as_array().map(Vec::len),
        Some(0),
        "{}",
        show(r)
    );
    let heal = events
        .iter()
        .find(|e| e["action"] == "heal")
        .unwrap_or_else(|| panic!("no heal event: {}", show(r)));
    assert_eq!(
        heal["connectivity"]["within_refused"]
            .as_array()
            .map(Vec::len),
        Some(0),
        "{}",
        show(r)
    );
    assert_eq!(u(&heal["connectivity"]["within_tried"]), 6, "{}", show(r));
    assert!(
        !seen.tries.is_empty(),
        "the test never saw the cut in a namespace: {}",
        show(r)
    );
    let crossed: Vec<_> = seen.tries.iter().filter(|t| t.2).collect();
    assert!(
        crossed.is_empty(),
        "connections crossed the cut while it held (isolated, peer): {crossed:?}"
    );
    assert!(
        !r["void"]["reasons"]
            .to_string()
            .contains("did not take effect"),
        "{}",
        show(r)
    );
}

/// NATS JetStream, three servers, R3 streams: the node leading the most streams is
/// cut off from the other two for 8 s (the loader still reaches it) and healed. What
/// R3 promises: nothing acknowledged is lost; the majority elects new leaders.
/// (`kill-leader` on this cluster is a campaign arm, not a test here:
/// docs/reliability.md, "Clusters", says what it showed.)
#[test]
fn real_cluster_nats_r3_minority_partition_of_the_leader() {
    let _g = support::serial();
    let Some(c) = need(
        "a NATS cluster of the test's own (root, iproute2, nftables)",
        Cluster::up("nats", 21),
    ) else {
        return;
    };
    let sets = cell_sets(
        &[
            format!("nats.url={}", c.nats_url()),
            "nats.replicas=3".into(),
            "nats.ack_wait=5s".into(),
        ],
        "15s",
        &c.yaml(),
        "[{kind: partition, at: 3s, duration: 8s, params: {isolate: leader}}]",
    );
    let (code, r, text, tmp, seen) = watched_cell(&c, 4222, "nats-smoke.yaml", &sets);
    let t = &r["verdict"]["totals"];
    let cl = &r["faults"]["cluster"];
    let bs = &r["broker_stats"];
    eprintln!(
        "nats R3 leader partition: exit {code} outcome {} lost_acked {} duplicates {} copies under a new sequence {} late deliveries {} reused sequences {} stale redeliveries {} served {} unavailability {} recovery {} leader changes {} cut {}",
        r["outcome"], t["lost_acked"], t["duplicates"], bs["nats_copies_under_new_sequence"],
        bs["nats_late_deliveries"], bs["nats_reused_sequences"], bs["nats_stale_redeliveries"],
        r["load"]["served_in_window"],
        r["faults"]["figures"]["unavailability_ms"], r["faults"]["figures"]["recovery"],
        cl["leader_changes"].as_array().map_or(0, Vec::len),
        r["faults"]["events"][0]["detail"]
    );
    assert!(matches!(code, 0 | 3 | 4), "exit {code}: {text}");
    assert_cut_and_heal(&r, &seen);
    // R3's promise: nothing acknowledged is lost. NATS 2.9.10 broke it in delivery in 2
    // of 16 runs of this cell (docs/reliability.md, "Deliveries NATS skipped"): a
    // message the stream kept, never delivered to some of its groups. What this test
    // holds the harness to is the part it can tell apart: such a loss is a FAIL with
    // exit 3, and the streams hold every acknowledged publish, as the servers count
    // them (a message missing from storage is not a skipped delivery).
    let lost = u(&t["lost_acked"]);
    if lost > 0 {
        let kept = kept_elsewhere(&tmp.path().join("cell"), &r);
        assert_a_loss_is_in_delivery(code, &r, &text);
        eprintln!(
            "finding (NATS): {lost} acknowledged deliveries skipped; the streams hold {} of {} acknowledged publishes; of the skipped, {} were delivered to another group of their topic, {} to none ({:?}); {} copies under a new sequence",
            bs["nats_server_stream_messages"],
            bs["nats_logical_publishes"],
            kept.found,
            kept.missing.len(),
            kept.missing,
            bs["nats_copies_under_new_sequence"]
        );
    }
    assert_eq!(u(&t["aborted_reads"]), 0, "{}", show(&r));
    // The record says who led: every stream (one per topic) on three replicas,
    // leaders each second.
    let replicas = cl["replicas"].as_object().expect("replicas");
    assert_eq!(replicas.len(), 4, "{cl}");
    assert!(
        replicas
            .values()
            .all(|r| r.as_array().map(Vec::len) == Some(3)),
        "{cl}"
    );
    let seconds = cl["seconds"].as_array().expect("seconds");
    assert!(seconds.len() >= 15, "{} seconds", seconds.len());
    // The majority elected new leaders, and the record saw them change.
    assert!(
        cl["leader_changes"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{cl}"
    );
    assert!(
        seconds
            .iter()
            .any(|s| !s["leaders"].as_object().unwrap().is_empty()),
        "{cl}"
    );
    assert_eq!(
        r["provenance"]["settings"]["stream_replicas"]
            .as_str()
            .map(|s| s.contains('3')),
        Some(true),
        "{}",
        r["provenance"]
    );
}

/// A NATS cell that lost acknowledged messages says FAIL with exit 3, and its streams
/// hold at least as many messages as were acknowledged (`nats_server_stream_messages`,
/// read from the servers at the end, against `nats_logical_publishes`): the loss was
/// in delivery, not in storage.
fn assert_a_loss_is_in_delivery(code: i32, r: &Value, text: &str) {
    assert_eq!(code, 3, "a loss must fail the cell: {text}");
    assert_eq!(r["outcome"], "FAIL", "{}", show(r));
    let bs = &r["broker_stats"];
    let held = u(&bs["nats_server_stream_messages"]);
    let acked = u(&bs["nats_logical_publishes"]);
    assert!(
        held >= acked,
        "R3 lost acknowledged messages from storage: the streams hold {held} messages of {acked} acknowledged publishes: {}",
        show(r)
    );
}

/// What [`kept_elsewhere`] found of the messages the streams with `lost_acked` missed.
#[derive(Debug, Default)]
struct KeptElsewhere {
    /// Missed messages another group of the same topic was delivered.
    found: usize,
    /// (stream, prop, seq) of missed messages no group of the topic was delivered.
    missing: Vec<(String, u64, u64)>,
}

/// For each stream that lost acknowledged messages, the checker's gaps (prop, seq
/// range) looked up in the stream logs of the topic's other groups (`<topic>_<group>`,
/// lines `prop,seq`). Printed, not asserted: a topic of one group has no other, and a
/// message an upstream group skipped is missing downstream from every group.
fn kept_elsewhere(dir: &std::path::Path, r: &Value) -> KeptElsewhere {
    let streams = r["verdict"]["streams"].as_array().expect("streams");
    let lines = |name: &str| -> std::collections::HashSet<String> {
        std::fs::read_to_string(dir.join(format!("{name}.log")))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let mut out = KeptElsewhere::default();
    for s in streams.iter().filter(|s| u(&s["lost_acked"]) > 0) {
        let name = s["name"].as_str().expect("name");
        let topic = name.split('_').next().unwrap_or(name);
        let others: Vec<_> = streams
            .iter()
            .filter_map(|o| o["name"].as_str())
            .filter(|o| *o != name && o.split('_').next() == Some(topic))
            .map(lines)
            .collect();
        let gaps = s["gap_examples"].as_array().expect("gap_examples");
        assert!(!gaps.is_empty(), "{name}: lost_acked without gap examples");
        for g in gaps {
            let prop = u(&g["prop"]);
            for seq in u(&g["from"])..=u(&g["to"]) {
                let line = format!("{prop},{seq}");
                if others.iter().any(|o| o.contains(&line)) {
                    out.found += 1;
                } else {
                    out.missing.push((name.to_owned(), prop, seq));
                }
            }
        }
    }
    out
}

/// RabbitMQ quorum queues on three nodes (`pause_minority`): the node leading the
/// most queues is cut off for 5 s and healed; 4 s after the heal the node leading
/// the most queues is SIGKILLed and started again 3 s later. The loader's
/// connections start on every node; those on the cut node are closed when it pauses
/// and reconnect to another. What quorum queues promise: nothing acknowledged (confirmed) is lost.
#[test]
fn real_cluster_rabbit_quorum_minority_partition_of_the_leader_then_kill_leader() {
    // The cluster boots (about 20 s) while another test's cell runs; the cell waits
    // for its turn.
    let Some(c) = need(
        "a RabbitMQ cluster of the test's own (root, iproute2, nftables)",
        Cluster::up("rabbitmq", 22),
    ) else {
        return;
    };
    let _g = support::serial();
    let (code, r, text, _tmp, seen) = watched_cell(
        &c,
        5672,
        "rabbit-smoke.yaml",
        &cell_sets(
            &[
                format!("rabbitmq.url={}", c.amqp_url(0)),
                format!("rabbitmq.nodes=[{}, {}]", c.amqp_url(1), c.amqp_url(2)),
                format!("rabbitmq.management_url={}", c.management_url(1)),
                "rabbitmq.queue_type=quorum".into(),
                "rabbitmq.publish_channels=4".into(),
                "rabbitmq.cost_snapshot=false".into(),
            ],
            // The kill 4 s after the nominal heal: asking who leads before the cut
            // takes up to 2–3 s here, and the cut's 5 s count from when it took effect;
            // asked while the cut still held, the management API does not answer
            // (CI of 8ba78f2).
            "18s",
            &c.yaml(),
            "[{kind: partition, at: 2s, duration: 5s, params: {isolate: leader}}, {kind: kill-leader, at: 11s, duration: 3s}]",
        ),
    );
    let t = &r["verdict"]["totals"];
    let cl = &r["faults"]["cluster"];
    eprintln!(
        "rabbit quorum leader partition: exit {code} outcome {} lost_acked {} duplicates {} served {} unavailability {} recovery {} leader changes {} reconnects {} cut {}",
        r["outcome"], t["lost_acked"], t["duplicates"], r["load"]["served_in_window"],
        r["faults"]["figures"]["unavailability_ms"], r["faults"]["figures"]["recovery"],
        cl["leader_changes"].as_array().map_or(0, Vec::len),
        r["faults"]["figures"]["reconnects"],
        r["faults"]["events"][0]["detail"]
    );
    assert!(matches!(code, 0 | 3 | 4), "exit {code}: {text}");
    assert_cut_and_heal(&r, &seen);
    // The node leading the most queues was killed (its processes, named) and started
    // again.
    let events = r["faults"]["events"].as_array().unwrap();
    let kill = events
        .iter()
        .find(|e| e["action"] == "sigkill")
        .unwrap_or_else(|| panic!("no kill: {}", show(&r)));
    assert!(kill["ineffective"].is_null(), "{}", show(&r));
    assert!(
        kill["pids"].as_array().is_some_and(|p| !p.is_empty()),
        "{}",
        show(&r)
    );
    assert!(
        kill["detail"].as_str().unwrap().contains("leader of"),
        "{}",
        show(&r)
    );
    let restart = events
        .iter()
        .find(|e| e["action"] == "restart")
        .unwrap_or_else(|| panic!("no restart: {}", show(&r)));
    assert_eq!(restart["command"]["exit_code"], 0, "{}", show(&r));
    assert_eq!(restart["target"], kill["target"], "{}", show(&r));
    assert_eq!(
        u(&t["lost_acked"]),
        0,
        "quorum queues lost confirmed messages: {}",
        show(&r)
    );
    assert_eq!(u(&t["aborted_reads"]), 0, "{}", show(&r));
    let replicas = cl["replicas"].as_object().expect("replicas");
    assert!(!replicas.is_empty(), "{cl}");
    assert!(
        replicas
            .values()
            .all(|r| r.as_array().map(Vec::len) == Some(3)),
        "{cl}"
    );
    assert!(
        cl["seconds"]
            .as_array()
            .expect("seconds")
            .iter()
            .any(|s| !s["leaders"].as_object().unwrap().is_empty()),
        "{cl}"
    );
    // The loader's connections were spread over the nodes (consumer connection i
    // starts on node i mod 3), as the management API named them.
    let on = cl["per_node"]
        .as_object()
        .expect("per_node")
        .values()
        .filter(|n| u(&n["connection_seconds"]) > 0)
        .count();
    assert!(on >= 2, "connections on {on} node(s): {cl}");
    assert!(
        cl["leader_changes"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{cl}"
    );
}
