//! Queen adapter, over Queen's HTTP API. Options are always compiled so scenario files
//! parse in every build; the adapter itself needs the `queen` feature.

pub mod options;
pub mod system;
pub use options::{PopMode, QueenOptions};

#[cfg(feature = "queen")]
mod adapter;
#[cfg(feature = "queen")]
pub mod bare;
#[cfg(feature = "queen")]
mod client;
#[cfg(feature = "queen")]
mod stats;
#[cfg(feature = "queen")]
pub mod store;
#[cfg(feature = "queen")]
mod stream;
#[cfg(feature = "queen")]
mod targeted;
#[cfg(feature = "queen")]
mod wildcard;
#[cfg(feature = "queen")]
mod wire;
#[cfg(feature = "queen")]
pub use adapter::QueenBroker;
