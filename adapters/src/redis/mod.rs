//! Redis Streams adapter. Options are always compiled so scenario files parse in every
//! build; the adapter itself needs the `redis` feature (the `redis` crate, tokio
//! connection manager).

pub mod options;
pub mod system;
pub use options::RedisOptions;

#[cfg(feature = "redis")]
mod adapter;
#[cfg(feature = "redis")]
pub mod bare;
#[cfg(feature = "redis")]
mod dial;
#[cfg(feature = "redis")]
pub use adapter::{server_tier, RedisBroker};
