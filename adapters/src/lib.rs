//! crossbench adapters: one [`Broker`] trait, one module per system.
//!
//! Every adapter but the in-process control broker (`mem`) sits behind a cargo
//! feature of the same name, so a build needs only the client libraries it uses.

pub mod broker;
pub mod duration_text;
pub mod error;
pub mod kafka;
pub mod lanes;
pub mod mem;
pub mod pgmq;
pub mod queen;
pub mod rabbitmq;
pub mod redact;

pub use broker::{
    BatchHandler, Broker, ConsumeOptions, Delivery, DeliveryGuarantee, Description, Disposition,
    Durability, FanOut, KeyBatch, StreamCounters, TopicSpec, Topology,
};
pub use error::BrokerError;
