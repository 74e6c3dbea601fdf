//! crossbench adapters: one [`Broker`] trait, one folder per system, and the
//! [`registry`] that lists them.
//!
//! Every adapter but the in-process control broker (`mem`) sits behind a cargo
//! feature of the same name, so a build needs only the client libraries it uses.
//! Everything outside this crate asks the [`registry`] about systems; none names one.

pub mod bare;
pub mod broker;
pub mod counter;
pub mod duration_text;
pub mod error;
pub mod lanes;
pub mod nap;
pub mod options;
pub mod percent;
#[cfg(feature = "postgres")]
pub mod pg_settings;
pub mod placement;
pub mod provenance;
pub mod race;
pub mod redact;
pub mod registry;
pub mod tls;

pub use bare::{BareClient, BareCounters, BareError, BarePlan};
pub use broker::{
    BatchHandler, Broker, ConsumeOptions, Delivery, DeliveryGuarantee, Description, Disposition,
    Durability, FanOut, Held, KeyBatch, Sharing, StreamCounters, TopicSpec, Topology,
};
pub use counter::Counter;
pub use error::{BrokerError, ErrorClass};
pub use options::{OptionsError, Section};
pub use placement::Placement;
pub use provenance::Provenance;
pub use registry::{
    BuildContext, BuildError, Capabilities, SharedConsumers, System, SystemOptions,
};
// Each system's folder (`adapters::pgmq`, …), declared in the registry.
pub use registry::systems::*;
