//! Finding the servers the integration tests need, shared by the adapter and loader
//! tests (the loader's support module includes this file by path): skip when run by
//! hand, fail under `CI`, which the test command sets after provisioning.
//!
//! Every skip goes through [`skipped`], which also appends a line to the file named
//! by `CROSSBENCH_SKIP_LOG` when it is set: a skipped test returns early and counts
//! as passed in `cargo test`'s totals, so the test command reads that ledger to say
//! how many tests really ran.

use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// True when something answers on `addr`; otherwise see [`absent`].
pub fn reachable(addr: &str, what: &str, provision: &str) -> bool {
    let a: SocketAddr = addr.parse().expect("a socket address");
    TcpStream::connect_timeout(&a, Duration::from_secs(2)).is_ok() || absent(what, addr, provision)
}

/// RabbitMQ answers on 127.0.0.1:5672.
pub fn rabbitmq() -> bool {
    reachable(
        "127.0.0.1:5672",
        "RabbitMQ",
        "scripts/provision/rabbitmq.sh",
    )
}

/// A Kafka-protocol broker answers on 127.0.0.1:9092.
pub fn kafka() -> bool {
    reachable(
        "127.0.0.1:9092",
        "a Kafka-protocol broker",
        "scripts/provision/tansu.sh",
    )
}

/// NATS (with JetStream) answers on 127.0.0.1:4222.
pub fn nats() -> bool {
    reachable(
        "127.0.0.1:4222",
        "NATS (JetStream)",
        "scripts/provision/nats.sh",
    )
}

/// Redis answers on 127.0.0.1:6379.
pub fn redis() -> bool {
    reachable("127.0.0.1:6379", "Redis", "scripts/provision/redis.sh")
}

/// `what` is not there: under `CI` the test fails naming the script that provisions
/// it; run by hand it prints SKIP and the caller returns (false).
pub fn absent(what: &str, addr: &str, provision: &str) -> bool {
    unavailable(
        &format!("{what} not reachable at {addr}"),
        &format!("run {provision}"),
    );
    false
}

/// Something the test needs is missing (`what`, with why): under `CI`, where the test
/// command provisions everything, the test fails, saying how to get it (`fix`); run by
/// hand it is [`skipped`] and the caller returns.
pub fn unavailable(what: &str, fix: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{what} and CI is set ({fix})");
    }
    skipped(&format!("{what} ({fix})"));
}

/// Say that the running test skips (part of) its work, and why: a SKIP line on the
/// console and one line in the `CROSSBENCH_SKIP_LOG` ledger (the test binary and the
/// test's name, a tab, the reason). libtest names each test's thread after the test.
pub fn skipped(why: &str) {
    let thread = std::thread::current();
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .map(|s| {
            s.rsplit_once('-')
                .map_or(s.clone(), |(name, _hash)| name.to_string())
        })
        .unwrap_or_default();
    let test = format!("{binary}::{}", thread.name().unwrap_or("?"));
    eprintln!("SKIP {test}: {why}");
    if let Some(path) = std::env::var_os("CROSSBENCH_SKIP_LOG") {
        use std::io::Write;
        let line = format!("{test}\t{}\n", why.replace(['\t', '\n'], " "));
        // One write of one short line to a file opened for append: lines of tests
        // running at once do not interleave.
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
}

/// The Queen server of `CROSSBENCH_QUEEN_URL`, or None with a SKIP line (also under
/// `CI`: no registry ships Queen, so the test command cannot provision it).
pub fn queen_url(test: &str) -> Option<String> {
    match std::env::var("CROSSBENCH_QUEEN_URL") {
        Ok(u) if !u.trim().is_empty() => Some(u.trim().to_string()),
        _ => {
            skipped(&format!(
                "{test}: CROSSBENCH_QUEEN_URL is not set (build and start a Queen server, see compose/queen/README.md, then export CROSSBENCH_QUEEN_URL=http://127.0.0.1:6632)"
            ));
            None
        }
    }
}
