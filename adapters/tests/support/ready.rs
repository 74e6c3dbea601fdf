//! Whether each system's server is there for the adapter tests: skip when run by
//! hand, fail under `CI` (see `services.rs`), naming the script that provisions it.

use super::services::{absent, reachable};

/// PostgreSQL answers on 127.0.0.1:5432 and has pgmq in `crossbench`.
#[cfg(feature = "pgmq")]
pub async fn pgmq() -> bool {
    use adapters::pgmq::{PgmqBroker, PgmqOptions};
    use adapters::Broker;
    const PROVISION: &str = "scripts/provision/pgmq.sh";
    reachable("127.0.0.1:5432", "PostgreSQL", PROVISION) && {
        let b = PgmqBroker::new(PgmqOptions::default()).expect("default options");
        let mut t = super::topology("ct_probe", &["g"], 1, 1);
        t.reset = false;
        let ok = b.setup(&t).await.is_ok();
        let _ = b.close().await;
        ok || absent("pgmq (in database crossbench)", "127.0.0.1:5432", PROVISION)
    }
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
