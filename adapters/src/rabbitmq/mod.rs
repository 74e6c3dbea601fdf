//! RabbitMQ adapter. Options are always compiled so scenario files parse in every
//! build; the adapter itself needs the `rabbitmq` feature.

pub mod options;
pub use options::RabbitOptions;

#[cfg(feature = "rabbitmq")]
mod adapter;
#[cfg(feature = "rabbitmq")]
pub use adapter::RabbitBroker;
