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

// The servers found by address alone live beside `reachable`, shared with the loader's
// tests (services.rs).
pub use super::services::{kafka, nats, rabbitmq, redis};
