//! The one place that lists the systems crossbench drives, and the one trait each
//! system implements to be listed.
//!
//! Each system's folder, `adapters/src/<system>/`, has a `system.rs` implementing
//! [`SystemDef`]: its [`Entry`] (name, title, cargo feature, [`Capabilities`]), its
//! typed scenario section ([`SystemDef::Options`], a [`crate::options::Section`]), how
//! to build its [`Broker`], and its bare loop if it has one. [`systems!`] below lists
//! them once, and generates the [`System`] enum, [`SystemOptions`], [`ENTRIES`] and
//! every dispatch from that list, each a `match` with one arm per system and no
//! wildcard. So the compiler checks the registry:
//!
//! - a system in the list without its `system.rs`, or whose `system.rs` misses a
//!   piece of the trait, does not build (`the trait bound … is not satisfied`,
//!   `not all trait items implemented`);
//! - a `system.rs` whose system is not in the list does not build either: its
//!   [`Entry`] names `System::<Variant>`, which only the list creates (`no variant …
//!   named …`).
//!
//! A system whose cargo feature is off still has its options (every scenario file
//! parses in every build); its `build` and `bare` answer [`BuildError::NotBuilt`]. The
//! loader, the scenario validator, the workloads and the report ask this module; none
//! of them names a system. adapters/README.md has the recipe for adding one.

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

use crate::bare::{BareClient, BareError, BarePlan};
use crate::broker::Broker;
use crate::error::BrokerError;
use crate::options::{OptionsError, Section};

/// What a system gives the registry: implemented once per system, in
/// `adapters/src/<system>/system.rs`.
pub trait SystemDef {
    /// The system's typed scenario section.
    type Options: Section;
    /// Its entry: name, title, feature, capabilities.
    const ENTRY: Entry;
    /// Build its adapter (in a build without its feature: [`BuildError::NotBuilt`]).
    fn build(o: &Self::Options, ctx: &BuildContext) -> Result<Arc<dyn Broker>, BuildError>;
    /// Whether it has a bare loop in this build ([`crate::bare`]), asked before
    /// anything connects.
    fn bare_check(o: &Self::Options) -> Result<(), BareError>;
    /// Its bare loop for `plan`: its objects built by the adapter's own setup, then
    /// its client library alone.
    fn bare(
        o: &Self::Options,
        plan: &BarePlan,
    ) -> impl std::future::Future<Output = Result<Box<dyn BareClient>, BareError>> + Send;
}

impl Entry {
    /// [`BuildError::NotBuilt`] for this system.
    pub fn not_built(&self) -> BuildError {
        BuildError::NotBuilt {
            name: self.name,
            feature: self.feature.unwrap_or(self.name),
        }
    }
}

/// The list of systems: `Variant => path::to::its::SystemDef`, in the order of
/// [`System`]. It generates the enum, the options, the entries and every dispatch.
macro_rules! systems {
    ($($variant:ident => $def:path),+ $(,)?) => {
        /// A system crossbench can drive, as a scenario names it (`system: pgmq`).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum System {
            $($variant),+
        }

        /// Every system, in the order of [`System`].
        pub static ENTRIES: [Entry; [$(System::$variant),+].len()] = [$(<$def as SystemDef>::ENTRY),+];

        /// The options section of the system a scenario drives, typed. It serialises
        /// as `{<system name>: {…}}`, so flattened into a scenario it is the `pgmq:`
        /// (…) section.
        #[derive(Debug, Clone, PartialEq)]
        pub enum SystemOptions {
            $($variant(<$def as SystemDef>::Options)),+
        }

        /// Apply `$body` to the typed section of any system, with `$d` its
        /// [`SystemDef`] (one arm per system, generated: no wildcard).
        macro_rules! each_section {
            ($options:expr, $o:ident, $d:ident => $body:expr) => {
                match $options {
                    $(SystemOptions::$variant($o) => {
                        #[allow(dead_code)]
                        type $d = $def;
                        $body
                    })+
                }
            };
        }

        impl SystemOptions {
            /// The defaults of `system`'s section (a scenario that omits it).
            pub fn defaults(system: System) -> SystemOptions {
                match system {
                    $(System::$variant => SystemOptions::$variant(Default::default())),+
                }
            }

            /// `system`'s section from any serde form (the scenario's YAML value).
            pub fn deserialize_for<'de, D: Deserializer<'de>>(
                system: System,
                section: D,
            ) -> Result<SystemOptions, D::Error> {
                Ok(match system {
                    $(System::$variant => SystemOptions::$variant(Deserialize::deserialize(section)?)),+
                })
            }

            pub fn system(&self) -> System {
                match self {
                    $(SystemOptions::$variant(_) => System::$variant),+
                }
            }

            /// The same options, connecting to `addr` instead (the proxy's address).
            pub fn routed_to(&self, addr: &str) -> Result<SystemOptions, String> {
                Ok(match self {
                    $(SystemOptions::$variant(o) => SystemOptions::$variant(o.routed_to(addr)?)),+
                })
            }
        }
    };
}

systems! {
    Mem => crate::mem::system::Mem,
    Pgmq => crate::pgmq::system::Pgmq,
    Rabbitmq => crate::rabbitmq::system::Rabbitmq,
    Kafka => crate::kafka::system::Kafka,
    Queen => crate::queen::system::Queen,
    Nats => crate::nats::system::Nats,
    Redis => crate::redis::system::Redis,
}

impl Serialize for SystemOptions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        each_section!(self, o, _D => m.serialize_entry(self.system().name(), o)?);
        m.end()
    }
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

/// No capability beyond the contract; each [`Entry`] starts from it.
pub const PLAIN: Capabilities = Capabilities {
    multi_partition_pop: false,
    in_process: false,
    shared_consumers: SharedConsumers::No("not said"),
};

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

impl SystemOptions {
    /// Check every knob of the section.
    pub fn validate(&self) -> Result<(), OptionsError> {
        each_section!(self, o, _D => o.validate())
    }

    /// The system's sampler targets when the scenario names none.
    pub fn sample_targets(&self) -> Vec<(String, String)> {
        each_section!(self, o, _D => o.sample_targets())
    }

    /// What the console and the record must say about the section (TLS unverified, a
    /// password in the scenario's text).
    pub fn warnings(&self) -> Vec<String> {
        each_section!(self, o, _D => o.warnings())
    }

    /// The section alone (without the system's name around it), as JSON.
    pub fn section_json(&self) -> serde_json::Value {
        each_section!(self, o, _D => serde_json::to_value(o).unwrap_or_default())
    }

    /// The `host:port` the adapter connects to (the harness's proxy's upstream), or why
    /// the system cannot be routed through a proxy.
    pub fn endpoint(&self) -> Result<String, String> {
        each_section!(self, o, _D => o.endpoint())
    }

    /// Whether the section is the system's defaults.
    pub fn is_default(&self) -> bool {
        *self == SystemOptions::defaults(self.system())
    }

    /// Build the adapter.
    pub fn build(&self, ctx: &BuildContext) -> Result<Arc<dyn Broker>, BuildError> {
        each_section!(self, o, D => <D as SystemDef>::build(o, ctx))
    }

    /// Whether this build has the system's bare loop (crate::bare), asked before
    /// anything connects.
    pub fn bare_check(&self) -> Result<(), BareError> {
        each_section!(self, o, D => <D as SystemDef>::bare_check(o))
    }

    /// The system's bare loop for `plan` (crate::bare): its objects built by the
    /// adapter's own setup, then its client library alone.
    pub async fn bare(&self, plan: &BarePlan) -> Result<Box<dyn BareClient>, BareError> {
        self.bare_check()?;
        each_section!(self, o, D => <D as SystemDef>::bare(o, plan).await)
    }
}

impl Default for SystemOptions {
    /// The control broker's defaults: what a value with no system yet holds.
    fn default() -> Self {
        SystemOptions::defaults(System::Mem)
    }
}

/// A `build` error for the configuration the system refused.
pub fn config_error(entry: &'static Entry) -> impl Fn(BrokerError) -> BuildError {
    move |source| BuildError::Config {
        name: entry.name,
        source,
    }
}

/// The answer of a system's bare loop in a build without its feature.
pub fn bare_not_built(entry: &'static Entry) -> BareError {
    entry.not_built().into()
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

    /// Whether this build has cargo feature `f` of this crate.
    fn feature_on(f: &str) -> bool {
        match f {
            "pgmq" => cfg!(feature = "pgmq"),
            "rabbitmq" => cfg!(feature = "rabbitmq"),
            "kafka" => cfg!(feature = "kafka"),
            "queen" => cfg!(feature = "queen"),
            "nats" => cfg!(feature = "nats"),
            "redis" => cfg!(feature = "redis"),
            other => panic!("feature {other} is not one of this crate's"),
        }
    }

    /// The list and the build agree: every listed system says whether this build has
    /// its adapter as its cargo feature does, and building one answers accordingly
    /// (a system the build lacks is a clear `not built`, never a panic or a wildcard).
    /// That a system cannot be left out of the list, nor listed without its
    /// `system.rs`, the compiler checks (the module doc; adapters/README.md quotes it).
    #[test]
    fn the_list_and_the_build_agree() {
        assert_eq!(ENTRIES.len(), System::all().count());
        for e in &ENTRIES {
            let on = e.feature.is_none_or(feature_on);
            assert_eq!(e.built, on, "{}", e.name);
            // Building needs no server: only construction, which connects lazily.
            let built = SystemOptions::defaults(e.system).build(&BuildContext::default());
            match built {
                Err(BuildError::NotBuilt { name, .. }) => {
                    assert!(!on, "{name} is built in but answered not built")
                }
                _ => assert!(on, "{} is not built in but built", e.name),
            }
        }
    }

    #[test]
    fn the_control_broker_is_always_built() {
        let b = SystemOptions::defaults(System::Mem).build(&BuildContext::default());
        assert!(b.is_ok());
        assert!(System::Mem.capabilities().in_process);
        assert!(!System::Pgmq.capabilities().in_process);
    }
}
