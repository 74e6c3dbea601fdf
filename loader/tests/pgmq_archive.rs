//! pgmq's archive mode against the server: with `pgmq.ack=archive` every processed
//! message is moved to the queue's archive table (`pgmq.a_<queue>`) instead of being
//! deleted, so after a clean cell each queue is empty and its archive holds exactly
//! what that stream processed.
//!
//! Needs PostgreSQL + pgmq on 127.0.0.1:5432 (scripts/provision/pgmq.sh).
#![cfg(feature = "pgmq")]

mod support;

use support::{reachable, run_passing, scenario, serial};

fn psql(sql: &str) -> String {
    support::psql(sql).unwrap_or_else(|stderr| panic!("{sql}: {stderr}"))
}

#[test]
fn archive_mode_moves_every_processed_message_to_the_archive() {
    if !reachable("127.0.0.1:5432", "PostgreSQL", "scripts/provision/pgmq.sh") {
        return;
    }
    let _one = serial();
    let (r, _tmp) = run_passing(
        &scenario("pgmq-smoke.yaml"),
        &[
            "pgmq.ack=archive",
            "prefix=cbarc-",
            "duration=3s",
            "warmup=0s",
            "ramp=0s",
            "void.loader_cpu_max=1",
            "void.schedule_lag_p99_max=10s",
            "held.exploratory=true",
        ],
    );
    let streams = r["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 12);
    let mut archived_total = 0;
    for s in streams {
        // The queue of stream `<topic>_<group>` (the topic carries the prefix).
        let name = s["stream"].as_str().unwrap();
        let q = name.replace('-', "_").to_lowercase();
        let processed = s["processed"].as_u64().unwrap();
        assert!(processed > 0, "{s}");
        let left: u64 = psql(&format!("select count(*) from pgmq.q_{q}"))
            .parse()
            .unwrap();
        let archived: u64 = psql(&format!("select count(*) from pgmq.a_{q}"))
            .parse()
            .unwrap();
        assert_eq!(left, 0, "queue {q} is not empty after the cell");
        assert_eq!(
            archived, processed,
            "archive of {q}: {archived} rows, the stream processed {processed}"
        );
        archived_total += archived;
    }
    assert_eq!(
        r["broker_stats"]["pgmq_rows_acked"].as_u64(),
        Some(archived_total),
        "{}",
        r["broker_stats"]
    );
}
