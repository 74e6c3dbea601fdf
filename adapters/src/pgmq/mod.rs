//! pgmq (PostgreSQL message queue) adapter. Options are always compiled so scenario
//! files parse in every build; the adapter itself needs the `pgmq` feature.

pub mod options;
pub mod system;
pub use options::PgmqOptions;

#[cfg(feature = "pgmq")]
mod adapter;
#[cfg(feature = "pgmq")]
pub use adapter::PgmqBroker;
#[cfg(feature = "pgmq")]
pub mod bare;
#[cfg(feature = "pgmq")]
pub mod race;
