//! Build the adapter a scenario names.

use std::sync::Arc;

use adapters::mem::MemBroker;
use adapters::Broker;

use crate::scenario::{Scenario, SystemKind};

/// The system is not in this build, or its section is wrong.
#[derive(Debug, thiserror::Error)]
#[error("system `{system}`: {message}")]
pub struct SystemError {
    pub system: String,
    pub message: String,
}

pub fn build(s: &Scenario) -> Result<Arc<dyn Broker>, SystemError> {
    match s.system {
        SystemKind::Mem => Ok(Arc::new(MemBroker::new(s.mem.clone()))),
        #[cfg(feature = "pgmq")]
        SystemKind::Pgmq => {
            let o = s.pgmq.clone().unwrap_or_default();
            adapters::pgmq::PgmqBroker::new(o)
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(|e| SystemError {
                    system: "pgmq".into(),
                    message: e.to_string(),
                })
        }
        #[cfg(feature = "rabbitmq")]
        SystemKind::Rabbitmq => {
            let o = s.rabbitmq.clone().unwrap_or_default();
            adapters::rabbitmq::RabbitBroker::new(o)
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(|e| SystemError {
                    system: "rabbitmq".into(),
                    message: e.to_string(),
                })
        }
        #[cfg(feature = "queen")]
        SystemKind::Queen => {
            let mut o = s.queen.clone().unwrap_or_default();
            // The stream workload's K (partitions per pop) is Queen's partitions_per_pop.
            if let Some(k) = s
                .stream
                .as_ref()
                .map(|st| st.consume.pop_partitions)
                .filter(|k| *k > 1)
            {
                o.partitions_per_pop = u32::try_from(k).unwrap_or(u32::MAX);
            }
            adapters::queen::QueenBroker::new(o)
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(|e| SystemError {
                    system: "queen".into(),
                    message: e.to_string(),
                })
        }
        #[cfg(feature = "kafka")]
        SystemKind::Kafka => {
            let o = s.kafka.clone().unwrap_or_default();
            adapters::kafka::KafkaBroker::new(o)
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(|e| SystemError {
                    system: "kafka".into(),
                    message: e.to_string(),
                })
        }
        #[allow(unreachable_patterns)]
        other => Err(SystemError {
            system: other.name().into(),
            message: format!(
                "this crossbench was built without the `{0}` adapter; rebuild with `cargo build --release --features {0}`",
                other.name()
            ),
        }),
    }
}

/// Fail early, before anything is created, when the scenario's system is not built in.
pub fn check_available(s: &Scenario) -> Result<(), SystemError> {
    build(s).map(|_| ())
}

/// Sampler targets of the system under test when the scenario names none:
/// (label, spec). For the control broker the system *is* the loader.
pub fn default_sample_targets(s: &Scenario) -> Vec<(String, String)> {
    match s.system {
        SystemKind::Mem => vec![],
        SystemKind::Pgmq => {
            let dsn = s.pgmq.clone().unwrap_or_default().dsn;
            vec![
                ("postgres".into(), "proc:postgres".into()),
                ("pg_internals".into(), format!("postgres:{dsn}")),
            ]
        }
        SystemKind::Rabbitmq => vec![("rabbitmq".into(), "proc:beam.smp".into())],
        SystemKind::Kafka => {
            // The broker process named by kafka.process (tansu, java, redpanda).
            let process = s.kafka.clone().unwrap_or_default().process;
            if process.is_empty() {
                vec![]
            } else {
                vec![("kafka".into(), format!("proc:{process}"))]
            }
        }
        SystemKind::Queen => vec![
            // The server binary is `queen-server` (a bare `queen` would also match
            // postgres backends of a database named queen).
            ("queen".into(), "proc:queen-server".into()),
            ("postgres".into(), "proc:postgres".into()),
        ],
    }
}

/// Build the topology on the system. A refusal of the topology is the cell's result,
/// not an error: it comes back as `Ok(Err(refusal))`; any other failure is an error.
pub async fn setup(
    broker: &dyn Broker,
    s: &Scenario,
    topology: &adapters::Topology,
) -> anyhow::Result<Result<adapters::Description, crate::record::refused::Refusal>> {
    use anyhow::Context;
    match broker.setup(topology).await {
        Ok(d) => Ok(Ok(d)),
        Err(adapters::BrokerError::TopologyRefused { what, answer }) => {
            Ok(Err(crate::record::refused::Refusal { what, answer }))
        }
        Err(e) => {
            Err(anyhow::Error::new(e)).with_context(|| format!("setting up {}", s.system.name()))
        }
    }
}
