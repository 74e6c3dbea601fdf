//! The one place that lists the systems crossbench drives.
//!
//! Each system has an entry here: its name, the cargo feature that builds its
//! adapter, what it can do beyond the contract ([`Capabilities`]), its typed scenario
//! section ([`SystemOptions`], checked by [`crate::options::Section`]), its
//! constructor and its default sampler targets. The loader, the scenario validator,
//! the workloads and the report ask this module; none of them names a system.
//!
//! Adding a system: a folder `adapters/src/<system>/` with its options (a
//! [`crate::options::Section`]) and its [`Broker`], declared in [`systems`]; one
//! variant in [`System`] and [`SystemOptions`], one entry in [`ENTRIES`], one arm in
//! [`SystemOptions::build`], and a cargo feature (adapters/README.md has the whole
//! recipe).

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize};

/// Each system's folder, `adapters/src/<system>/`; the crate's root re-exports them
/// (`adapters::pgmq`, …).
#[path = "."]
pub mod systems {
    #[path = "kafka/mod.rs"]
    pub mod kafka;
    #[path = "mem/mod.rs"]
    pub mod mem;
    #[path = "nats/mod.rs"]
    pub mod nats;
    #[path = "pgmq/mod.rs"]
    pub mod pgmq;
    #[path = "queen/mod.rs"]
    pub mod queen;
    #[path = "rabbitmq/mod.rs"]
    pub mod rabbitmq;
    #[path = "redis/mod.rs"]
    pub mod redis;
}

use crate::broker::Broker;
use crate::error::BrokerError;
use crate::options::{OptionsError, Section};

/// A system crossbench can drive, as a scenario names it (`system: pgmq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum System {
    /// The in-process control broker.
    Mem,
    Pgmq,
    Rabbitmq,
    Kafka,
    Queen,
    Nats,
    Redis,
}

/// What a system can do beyond the adapter contract: the questions workloads and
/// validators ask instead of naming systems.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// One pop can span several partitions (the stream workload's
    /// `consume.pop_partitions` > 1).
    pub multi_partition_pop: bool,
    /// The system runs inside the crossbench process: its CPU and memory are the
    /// loader's own, and nothing else is there to sample.
    pub in_process: bool,
    /// Whether consumers in several loader processes can read one stream together
    /// with every key still at one consumer at a time (the `shared` topology of
    /// several loaders, SPEC.md §10).
    pub shared_consumers: SharedConsumers,
}

/// Whether several loader processes can consume one stream of a system together, and
/// how the system keeps a key at one consumer at a time if so (SPEC.md §10 says what
/// the checker can prove for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SharedConsumers {
    /// Yes, by this mechanism of the system's.
    Exclusive(&'static str),
    /// No, for this reason: several loaders need the `partitioned` topology.
    No(&'static str),
}

/// One system's entry.
#[derive(Debug)]
pub struct Entry {
    pub system: System,
    /// The scenario's name for it, and the key of its options section.
    pub name: &'static str,
    /// What a reader calls it.
    pub title: &'static str,
    /// The cargo feature that builds the adapter (`None`: always built).
    pub feature: Option<&'static str>,
    /// Whether this build has the adapter.
    pub built: bool,
    pub capabilities: Capabilities,
    /// What a reader of this system's memory figure should know, for comparison
    /// tables (`None`: nothing to add).
    pub memory_note: Option<&'static str>,
}

const PLAIN: Capabilities = Capabilities {
    multi_partition_pop: false,
    in_process: false,
    shared_consumers: SharedConsumers::No("not said"),
};

/// Every system, in the order of [`System`].
pub static ENTRIES: [Entry; 7] = [
    Entry {
        system: System::Mem,
        name: "mem",
        title: "control broker (in-process)",
        feature: None,
        built: true,
        capabilities: Capabilities {
            multi_partition_pop: false,
            in_process: true,
            shared_consumers: SharedConsumers::No(
                "the control broker lives inside one loader's process: no other loader can reach it",
            ),
        },
        memory_note: None,
    },
    Entry {
        system: System::Pgmq,
        name: "pgmq",
        title: "PostgreSQL + pgmq",
        feature: Some("pgmq"),
        built: cfg!(feature = "pgmq"),
        capabilities: Capabilities {
            shared_consumers: SharedConsumers::Exclusive(
                "read_grouped_head hands out a key's head row only while no row of the key is invisible, whichever process reads; read_grouped_rr has the same exclusivity race across processes as within one (finding F3)",
            ),
            ..PLAIN
        },
        memory_note: Some(
            "RAM here: RSS summed over PostgreSQL's processes, which counts shared buffers once per backend and overstates; the published figure is the container's memory.current.",
        ),
    },
    Entry {
        system: System::Rabbitmq,
        name: "rabbitmq",
        title: "RabbitMQ",
        feature: Some("rabbitmq"),
        built: cfg!(feature = "rabbitmq"),
        capabilities: Capabilities {
            shared_consumers: SharedConsumers::Exclusive(
                "every queue is declared with x-single-active-consumer: of all the loaders' consumers of a queue, one receives its deliveries, another takes over only when it goes",
            ),
            ..PLAIN
        },
        memory_note: None,
    },
    Entry {
        system: System::Kafka,
        name: "kafka",
        title: "Kafka protocol (Apache Kafka, Redpanda, tansu)",
        feature: Some("kafka"),
        built: cfg!(feature = "kafka"),
        capabilities: Capabilities {
            shared_consumers: SharedConsumers::Exclusive(
                "the consumer group assigns each partition to one member at a time; a rebalance moves partitions between loaders (counted as reconnects)",
            ),
            ..PLAIN
        },
        memory_note: None,
    },
    Entry {
        system: System::Queen,
        name: "queen",
        title: "Queen MQ",
        feature: Some("queen"),
        built: cfg!(feature = "queen"),
        capabilities: Capabilities {
            multi_partition_pop: true,
            in_process: false,
            shared_consumers: SharedConsumers::Exclusive(
                "a pop leases the whole partition to one consumer of the group until it is acked or the lease runs out",
            ),
        },
        memory_note: None,
    },
    Entry {
        system: System::Nats,
        name: "nats",
        title: "NATS JetStream",
        feature: Some("nats"),
        built: cfg!(feature = "nats"),
        capabilities: Capabilities {
            shared_consumers: SharedConsumers::No(
                "each lane is one durable pull consumer: two processes pulling from it would split a key's messages between them",
            ),
            ..PLAIN
        },
        memory_note: None,
    },
    Entry {
        system: System::Redis,
        name: "redis",
        title: "Redis Streams",
        feature: Some("redis"),
        built: cfg!(feature = "redis"),
        capabilities: Capabilities {
            shared_consumers: SharedConsumers::No(
                "each lane is read by one consumer of the group: readers in two processes would split a key's entries between them",
            ),
            ..PLAIN
        },
        memory_note: Some(
            "RAM here: redis-server's RSS; the adapter also records INFO memory's used_memory (redis_server_used_memory_bytes).",
        ),
    },
];

impl System {
    /// Every system.
    pub fn all() -> impl Iterator<Item = System> {
        ENTRIES.iter().map(|e| e.system)
    }

    /// The system a scenario or a record names, if any.
    pub fn from_name(name: &str) -> Option<System> {
        ENTRIES.iter().find(|e| e.name == name).map(|e| e.system)
    }

    pub fn entry(self) -> &'static Entry {
        &ENTRIES[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.entry().name
    }

    pub fn capabilities(self) -> Capabilities {
        self.entry().capabilities
    }

    /// Every system's name, for messages ("one of mem, pgmq, …").
    pub fn names() -> Vec<&'static str> {
        ENTRIES.iter().map(|e| e.name).collect()
    }
}

impl std::fmt::Display for System {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The options section of the system a scenario drives, typed. It serialises as
/// `{<system name>: {…}}`, so flattened into a scenario it is the `pgmq:` (…) section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum SystemOptions {
    #[serde(rename = "mem")]
    Mem(crate::mem::MemOptions),
    #[serde(rename = "pgmq")]
    Pgmq(crate::pgmq::PgmqOptions),
    #[serde(rename = "rabbitmq")]
    Rabbitmq(crate::rabbitmq::RabbitOptions),
    #[serde(rename = "kafka")]
    Kafka(crate::kafka::KafkaOptions),
    #[serde(rename = "queen")]
    Queen(crate::queen::QueenOptions),
    #[serde(rename = "nats")]
    Nats(crate::nats::NatsOptions),
    #[serde(rename = "redis")]
    Redis(crate::redis::RedisOptions),
}

impl Default for SystemOptions {
    /// The control broker's defaults: what a value with no system yet holds.
    fn default() -> Self {
        SystemOptions::defaults(System::Mem)
    }
}

/// What the workload tells the constructor about how the adapter will be driven.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuildContext {
    /// Partitions one pop may span (1 unless the system has
    /// [`Capabilities::multi_partition_pop`] and the workload asks for more).
    pub pop_partitions: u64,
    /// Client processes driving the system at once (several loaders of one cell; 0 or
    /// 1: this one alone). An adapter that sizes itself from what the server has free
    /// (pgmq's connection pool) takes its share.
    pub clients: u64,
}

/// Why an adapter could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("system `{name}`: this crossbench was built without the `{feature}` adapter; rebuild with `cargo build --release --features {feature}`")]
    NotBuilt {
        name: &'static str,
        feature: &'static str,
    },
    #[error("system `{name}`: {source}")]
    Config {
        name: &'static str,
        #[source]
        source: BrokerError,
    },
}

/// Apply `f` to the typed section of any system (one arm per system, here only).
macro_rules! each_section {
    ($options:expr, $o:ident => $body:expr) => {
        match $options {
            SystemOptions::Mem($o) => $body,
            SystemOptions::Pgmq($o) => $body,
            SystemOptions::Rabbitmq($o) => $body,
            SystemOptions::Kafka($o) => $body,
            SystemOptions::Queen($o) => $body,
            SystemOptions::Nats($o) => $body,
            SystemOptions::Redis($o) => $body,
        }
    };
}

impl SystemOptions {
    /// The defaults of `system`'s section (a scenario that omits it).
    pub fn defaults(system: System) -> SystemOptions {
        match system {
            System::Mem => SystemOptions::Mem(Default::default()),
            System::Pgmq => SystemOptions::Pgmq(Default::default()),
            System::Rabbitmq => SystemOptions::Rabbitmq(Default::default()),
            System::Kafka => SystemOptions::Kafka(Default::default()),
            System::Queen => SystemOptions::Queen(Default::default()),
            System::Nats => SystemOptions::Nats(Default::default()),
            System::Redis => SystemOptions::Redis(Default::default()),
        }
    }

    /// `system`'s section from any serde form (the scenario's YAML value).
    pub fn deserialize_for<'de, D: Deserializer<'de>>(
        system: System,
        section: D,
    ) -> Result<SystemOptions, D::Error> {
        Ok(match system {
            System::Mem => SystemOptions::Mem(Deserialize::deserialize(section)?),
            System::Pgmq => SystemOptions::Pgmq(Deserialize::deserialize(section)?),
            System::Rabbitmq => SystemOptions::Rabbitmq(Deserialize::deserialize(section)?),
            System::Kafka => SystemOptions::Kafka(Deserialize::deserialize(section)?),
            System::Queen => SystemOptions::Queen(Deserialize::deserialize(section)?),
            System::Nats => SystemOptions::Nats(Deserialize::deserialize(section)?),
            System::Redis => SystemOptions::Redis(Deserialize::deserialize(section)?),
        })
    }

    pub fn system(&self) -> System {
        match self {
            SystemOptions::Mem(_) => System::Mem,
            SystemOptions::Pgmq(_) => System::Pgmq,
            SystemOptions::Rabbitmq(_) => System::Rabbitmq,
            SystemOptions::Kafka(_) => System::Kafka,
            SystemOptions::Queen(_) => System::Queen,
            SystemOptions::Nats(_) => System::Nats,
            SystemOptions::Redis(_) => System::Redis,
        }
    }

    /// Check every knob of the section.
    pub fn validate(&self) -> Result<(), OptionsError> {
        each_section!(self, o => o.validate())
    }

    /// The system's sampler targets when the scenario names none.
    pub fn sample_targets(&self) -> Vec<(String, String)> {
        each_section!(self, o => o.sample_targets())
    }

    /// The section alone (without the system's name around it), as JSON.
    pub fn section_json(&self) -> serde_json::Value {
        each_section!(self, o => serde_json::to_value(o).unwrap_or_default())
    }

    /// The `host:port` the adapter connects to (the harness's proxy's upstream), or why
    /// the system cannot be routed through a proxy.
    pub fn endpoint(&self) -> Result<String, String> {
        each_section!(self, o => o.endpoint())
    }

    /// The same options, connecting to `addr` instead (the proxy's address).
    pub fn routed_to(&self, addr: &str) -> Result<SystemOptions, String> {
        Ok(match self {
            SystemOptions::Mem(o) => SystemOptions::Mem(o.routed_to(addr)?),
            SystemOptions::Pgmq(o) => SystemOptions::Pgmq(o.routed_to(addr)?),
            SystemOptions::Rabbitmq(o) => SystemOptions::Rabbitmq(o.routed_to(addr)?),
            SystemOptions::Kafka(o) => SystemOptions::Kafka(o.routed_to(addr)?),
            SystemOptions::Queen(o) => SystemOptions::Queen(o.routed_to(addr)?),
            SystemOptions::Nats(o) => SystemOptions::Nats(o.routed_to(addr)?),
            SystemOptions::Redis(o) => SystemOptions::Redis(o.routed_to(addr)?),
        })
    }

    /// Whether the section is the system's defaults.
    pub fn is_default(&self) -> bool {
        *self == SystemOptions::defaults(self.system())
    }

    /// Build the adapter.
    pub fn build(&self, ctx: &BuildContext) -> Result<Arc<dyn Broker>, BuildError> {
        let entry = self.system().entry();
        let config = |source: BrokerError| BuildError::Config {
            name: entry.name,
            source,
        };
        #[allow(unreachable_patterns)]
        match self {
            SystemOptions::Mem(o) => Ok(Arc::new(crate::mem::MemBroker::new(o.clone()))),
            #[cfg(feature = "pgmq")]
            SystemOptions::Pgmq(o) => crate::pgmq::PgmqBroker::new(o.clone())
                .map(|b| Arc::new(b.with_clients(ctx.clients)) as Arc<dyn Broker>)
                .map_err(config),
            #[cfg(feature = "rabbitmq")]
            SystemOptions::Rabbitmq(o) => crate::rabbitmq::RabbitBroker::new(o.clone())
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(config),
            #[cfg(feature = "kafka")]
            SystemOptions::Kafka(o) => crate::kafka::KafkaBroker::new(o.clone())
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(config),
            #[cfg(feature = "queen")]
            SystemOptions::Queen(o) => {
                let mut o = o.clone();
                // The workload's partitions per pop is Queen's partitions_per_pop.
                if ctx.pop_partitions > 1 {
                    o.partitions_per_pop = u32::try_from(ctx.pop_partitions).unwrap_or(u32::MAX);
                }
                crate::queen::QueenBroker::new(o)
                    .map(|b| Arc::new(b) as Arc<dyn Broker>)
                    .map_err(config)
            }
            #[cfg(feature = "nats")]
            SystemOptions::Nats(o) => crate::nats::NatsBroker::new(o.clone())
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(config),
            #[cfg(feature = "redis")]
            SystemOptions::Redis(o) => crate::redis::RedisBroker::new(o.clone())
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(config),
            _ => {
                let _ = (ctx, config);
                Err(BuildError::NotBuilt {
                    name: entry.name,
                    feature: entry.feature.unwrap_or(entry.name),
                })
            }
        }
    }

    /// Whether this build has the system's bare loop (crate::bare), asked before
    /// anything connects.
    pub fn bare_check(&self) -> Result<(), crate::bare::BareError> {
        use crate::bare::BareError;
        let entry = self.system().entry();
        let none = |why: &str| {
            Err(BareError::Unsupported {
                name: entry.name,
                why: why.into(),
            })
        };
        #[allow(unreachable_patterns)]
        match self {
            SystemOptions::Mem(_) => none("the control broker is crossbench's own code; its cost is measured by control-dense and `selftest floor`"),
            #[cfg(feature = "queen")]
            SystemOptions::Queen(_) => Ok(()),
            #[cfg(feature = "pgmq")]
            SystemOptions::Pgmq(_) => Ok(()),
            #[cfg(feature = "rabbitmq")]
            SystemOptions::Rabbitmq(_) => Ok(()),
            #[cfg(feature = "kafka")]
            SystemOptions::Kafka(_) => Ok(()),
            #[cfg(feature = "nats")]
            SystemOptions::Nats(_) => Ok(()),
            #[cfg(feature = "redis")]
            SystemOptions::Redis(_) => Ok(()),
            _ => Err(BuildError::NotBuilt {
                name: entry.name,
                feature: entry.feature.unwrap_or(entry.name),
            }
            .into()),
        }
    }

    /// The system's bare loop for `plan` (crate::bare): its objects built by the
    /// adapter's own setup, then its client library alone.
    pub async fn bare(
        &self,
        plan: &crate::bare::BarePlan,
    ) -> Result<Box<dyn crate::bare::BareClient>, crate::bare::BareError> {
        use crate::bare::BareClient;
        self.bare_check()?;
        let name = self.system().entry().name;
        let setup = |source: BrokerError| crate::bare::BareError::Setup { name, source };
        let boxed = |b: Box<dyn BareClient>| b;
        #[allow(unreachable_patterns)]
        match self {
            #[cfg(feature = "pgmq")]
            SystemOptions::Pgmq(o) => crate::pgmq::bare::PgmqBare::start(o, plan)
                .await
                .map(|b| boxed(Box::new(b)))
                .map_err(setup),
            #[cfg(feature = "rabbitmq")]
            SystemOptions::Rabbitmq(o) => crate::rabbitmq::bare::RabbitBare::start(o, plan)
                .await
                .map(|b| boxed(Box::new(b)))
                .map_err(setup),
            #[cfg(feature = "kafka")]
            SystemOptions::Kafka(o) => crate::kafka::bare::KafkaBare::start(o, plan)
                .await
                .map(|b| boxed(Box::new(b)))
                .map_err(setup),
            #[cfg(feature = "queen")]
            SystemOptions::Queen(o) => crate::queen::bare::QueenBare::start(o, plan)
                .await
                .map(|b| boxed(Box::new(b)))
                .map_err(setup),
            #[cfg(feature = "nats")]
            SystemOptions::Nats(o) => crate::nats::bare::NatsBare::start(o, plan)
                .await
                .map(|b| boxed(Box::new(b)))
                .map_err(setup),
            #[cfg(feature = "redis")]
            SystemOptions::Redis(o) => crate::redis::bare::RedisBare::start(o, plan)
                .await
                .map(|b| boxed(Box::new(b)))
                .map_err(setup),
            // bare_check refused every other system.
            _ => {
                let _ = (plan, setup, boxed);
                Err(crate::bare::BareError::Unsupported {
                    name,
                    why: "no bare loop in this build".into(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_follow_the_enum_and_names_round_trip() {
        for (i, e) in ENTRIES.iter().enumerate() {
            assert_eq!(e.system as usize, i, "{}", e.name);
            assert_eq!(System::from_name(e.name), Some(e.system));
            assert_eq!(SystemOptions::defaults(e.system).system(), e.system);
            let json = serde_json::to_value(e.system).unwrap();
            assert_eq!(json, serde_json::Value::String(e.name.into()));
            // The section serialises under the system's name.
            let sec = serde_json::to_value(SystemOptions::defaults(e.system)).unwrap();
            assert!(sec.get(e.name).is_some(), "{sec}");
            assert!(
                SystemOptions::defaults(e.system).validate().is_ok(),
                "{}",
                e.name
            );
        }
        assert_eq!(System::from_name("nats"), Some(System::Nats));
        assert_eq!(System::from_name("redis"), Some(System::Redis));
        assert_eq!(System::from_name("acme"), None);
    }

    #[test]
    fn a_section_is_read_for_its_system_only() {
        let v = serde_json::json!({"readers": 3});
        let o = SystemOptions::deserialize_for(System::Pgmq, v.clone()).unwrap();
        assert!(matches!(&o, SystemOptions::Pgmq(p) if p.readers == 3));
        assert!(!o.is_default());
        let e = SystemOptions::deserialize_for(System::Kafka, v).unwrap_err();
        assert!(e.to_string().contains("readers"), "{e}");
    }

    #[test]
    fn bare_loops_are_asked_for_before_anything_connects() {
        let mem = SystemOptions::defaults(System::Mem)
            .bare_check()
            .unwrap_err();
        assert!(
            matches!(mem, crate::bare::BareError::Unsupported { .. }),
            "{mem}"
        );
        let redis = SystemOptions::defaults(System::Redis).bare_check();
        assert_eq!(redis.is_ok(), cfg!(feature = "redis"), "{redis:?}");
        let queen = SystemOptions::defaults(System::Queen).bare_check();
        assert_eq!(queen.is_ok(), cfg!(feature = "queen"), "{queen:?}");
    }

    #[test]
    fn the_control_broker_is_always_built() {
        let b = SystemOptions::defaults(System::Mem).build(&BuildContext::default());
        assert!(b.is_ok());
        assert!(System::Mem.capabilities().in_process);
        assert!(!System::Pgmq.capabilities().in_process);
    }
}
