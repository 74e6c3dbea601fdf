//! RabbitMQ adapter. Options are always compiled so scenario files parse in every
//! build; the adapter itself needs the `rabbitmq` feature. The cost snapshot
//! (`rabbitmqctl`) needs no client library and is always compiled.

pub mod cost;
pub mod options;
pub mod system;
pub use options::{Idiom, QueueType, RabbitOptions};

#[cfg(feature = "rabbitmq")]
mod adapter;
#[cfg(feature = "rabbitmq")]
pub mod bare;
#[cfg(feature = "rabbitmq")]
mod dial;
#[cfg(feature = "rabbitmq")]
pub mod handshake;
#[cfg(feature = "rabbitmq")]
mod management;
#[cfg(feature = "rabbitmq")]
mod refusal;
#[cfg(feature = "rabbitmq")]
pub use adapter::RabbitBroker;
