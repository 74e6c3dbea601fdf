//! A real refusal, in CI: RabbitMQ with a queue limit on a vhost of this test's own
//! (`rabbitmqctl set_vhost_limits … {"max-queues": 5}`) refuses the smoke cell's
//! queues at setup. The cell ends REFUSED, exits 5, and result.json holds the
//! server's own answer. (tansu, the Kafka-protocol broker here, refuses nothing we
//! could provoke: compose/kafka/README.md; the control broker's `mem.max_lanes` is a
//! test knob, pipeline_mem.rs.)
//!
//! Needs RabbitMQ on 127.0.0.1:5672 and `rabbitmqctl` (scripts/provision/rabbitmq.sh).
#![cfg(feature = "rabbitmq")]

mod support;

use std::process::Command;

use support::{result, run_raw, scenario, serial};

fn rabbitmqctl(args: &[&str]) {
    let o = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("rabbitmqctl runs");
    assert!(
        o.status.success(),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// A vhost of this test's own, deleted (with whatever the cell declared) on drop.
struct Vhost(String);
impl Drop for Vhost {
    fn drop(&mut self) {
        let _ = Command::new("rabbitmqctl")
            .args(["delete_vhost", &self.0])
            .output();
    }
}

#[test]
fn rabbitmq_queue_limit_refuses_the_topology_with_exit_5() {
    if !support::rabbitmq() {
        return;
    }
    let _one = serial();
    let vhost = Vhost(format!("cb-refuse-{}", std::process::id()));
    rabbitmqctl(&["add_vhost", &vhost.0]);
    rabbitmqctl(&["set_permissions", "-p", &vhost.0, "guest", ".*", ".*", ".*"]);
    rabbitmqctl(&["set_vhost_limits", "-p", &vhost.0, r#"{"max-queues": 5}"#]);
    let url = format!("rabbitmq.url=amqp://guest:guest@127.0.0.1:5672/{}", vhost.0);
    // 12 streams x 10 lane queues = 120 queues asked for, 5 allowed.
    let (code, out, tmp) = run_raw(
        &scenario("rabbit-smoke.yaml"),
        &[&url, "lanes=10", "duration=2s", "warmup=0s"],
    );
    let dir = tmp.path().join("cell");
    assert_eq!(code, 5, "REFUSED exits 5; output:\n{out}");
    let r = result(&dir);
    assert_eq!(r["outcome"], "REFUSED", "{r:#}");
    assert_eq!(r["system"], "rabbitmq");
    assert_eq!(r["workload"]["lanes"], 10);
    let answer = r["refused"]["answer"].as_str().unwrap();
    assert!(
        answer.starts_with("PRECONDITION_FAILED - cannot declare queue")
            && answer.contains(&format!(
                "queue limit in vhost '{}' (5) is reached",
                vhost.0
            )),
        "the server's own answer: {answer}"
    );
    assert!(
        r["refused"]["what"]
            .as_str()
            .unwrap()
            .contains("queue.declare"),
        "{r:#}"
    );
    assert!(r.get("verdict").is_none(), "a refused cell has no verdict");
    assert!(
        !std::fs::read_to_string(dir.join("result.json"))
            .unwrap()
            .contains("guest:guest@"),
        "the URL's password stays out of the record"
    );
    let inv = std::fs::read_to_string(dir.join("invocation.txt")).unwrap();
    assert!(inv.contains("REFUSED"), "{inv}");
    assert!(out.contains("OUTCOME: REFUSED"), "{out}");
}
