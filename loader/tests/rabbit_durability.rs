//! RabbitMQ's durability tier, read back from the server: after a cell of each queue
//! type (in a vhost of this test's own), `rabbitmqctl list_queues name type arguments
//! durable` must show every queue the cell declared with that type, the
//! `x-queue-type` argument and `durable`; and the record's `durability` (fsync for
//! quorum, default for classic) must agree with what the server holds. A queue
//! argument the adapter silently dropped (a classic queue where quorum was asked)
//! fails here, whatever the adapter believes it declared.
//!
//! Needs RabbitMQ on 127.0.0.1:5672 and `rabbitmqctl` (scripts/provision/rabbitmq.sh).
#![cfg(feature = "rabbitmq")]

mod support;

use std::process::Command;

use serde_json::Value;
use support::{run_passing, scenario, serial};

fn rabbitmqctl(args: &[&str]) -> String {
    let o = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("rabbitmqctl runs");
    assert!(
        o.status.success(),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

struct Vhost(String);
impl Drop for Vhost {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl")
            .args(["delete_vhost", &self.0])
            .output();
    }
}

fn check(queue_type: &str, tier: &str) {
    if !support::rabbitmq() {
        return;
    }
    let _one = serial();
    let vhost = Vhost(format!("cb-dur-{queue_type}-{}", std::process::id()));
    rabbitmqctl(&["add_vhost", &vhost.0]);
    rabbitmqctl(&["set_permissions", "-p", &vhost.0, "guest", ".*", ".*", ".*"]);
    let url = format!("rabbitmq.url=amqp://guest:guest@127.0.0.1:5672/{}", vhost.0);
    let qt = format!("rabbitmq.queue_type={queue_type}");
    let (r, _tmp) = run_passing(
        &scenario("rabbit-smoke.yaml"),
        &[
            &url,
            &qt,
            "lanes=2",
            "rate=100",
            "properties=20",
            "duration=2s",
            "warmup=0s",
            "void.loader_cpu_max=1",
            "void.schedule_lag_p99_max=10s",
            "held.exploratory=true",
        ],
    );
    assert_eq!(r["durability"], tier, "the record's tier");
    let listed = rabbitmqctl(&[
        "list_queues",
        "-p",
        &vhost.0,
        "name",
        "type",
        "arguments",
        "durable",
        "--formatter",
        "json",
    ]);
    let json = &listed[listed.find('[').expect("a JSON list")..];
    let queues: Vec<Value> = serde_json::from_str(json).expect("list_queues JSON");
    let ours: Vec<&Value> = queues
        .iter()
        .filter(|q| q["name"].as_str().is_some_and(|n| n.starts_with("cb.")))
        .collect();
    // Lane queues: 12 streams x 2 lanes.
    assert_eq!(ours.len(), 24, "{listed}");
    assert_eq!(
        r["provisioned"]["physical_queues"].as_u64(),
        Some(ours.len() as u64),
        "the record counts the queues the server holds"
    );
    for q in ours {
        assert_eq!(q["type"], queue_type, "queue type on the server: {q}");
        assert_eq!(q["durable"], true, "{q}");
        let args = q["arguments"].as_array().expect("arguments");
        assert!(
            args.iter()
                .any(|a| a[0] == "x-queue-type" && a[2] == queue_type),
            "x-queue-type={queue_type} on the server: {q}"
        );
    }
}

#[test]
fn quorum_queues_on_the_server_back_the_fsync_tier() {
    check("quorum", "fsync");
}

#[test]
fn classic_queues_on_the_server_back_the_default_tier() {
    check("classic", "default");
}
