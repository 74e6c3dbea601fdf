//! NATS JetStream adapter. Options are always compiled so scenario files parse in
//! every build; the adapter itself needs the `nats` feature (the `async-nats` crate).

pub mod options;
pub mod system;
pub use options::NatsOptions;

#[cfg(feature = "nats")]
mod adapter;
#[cfg(feature = "nats")]
pub mod bare;
#[cfg(feature = "nats")]
mod dial;
#[cfg(feature = "nats")]
pub use adapter::{message_id, NatsBroker};
