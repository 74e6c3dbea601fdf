//! Adapter errors.

use thiserror::Error;

/// An adapter failure, classified so the loader can count errors by class.
#[derive(Debug, Error)]
pub enum BrokerError {
    /// The scenario asked for something this adapter cannot do; names the field and the fix.
    #[error("invalid configuration: {field}: {message}")]
    Config { field: String, message: String },
    /// Could not reach or talk to the system.
    #[error("connection: {0}")]
    Connection(String),
    /// The system refused the request (policy, limits, unknown topic...).
    #[error("refused by the system: {0}")]
    Refused(String),
    /// The system refused the topology setup asked for (e.g. a partition count); `answer`
    /// is the system's own words. The loader records it as the cell's result.
    #[error("the system refused {what}: {answer}")]
    TopologyRefused { what: String, answer: String },
    /// A request timed out; its effect is unknown.
    #[error("timed out: {0}")]
    Timeout(String),
    /// The topic / key named does not exist in the topology.
    #[error("unknown topic {0:?}")]
    UnknownTopic(String),
    /// Anything else the system said.
    #[error("{0}")]
    Other(String),
}

impl BrokerError {
    /// Short class name used as a counter key (`errors_by_class`).
    pub fn class(&self) -> &'static str {
        match self {
            BrokerError::Config { .. } => "config",
            BrokerError::Connection(_) => "connection",
            BrokerError::Refused(_) => "refused",
            BrokerError::TopologyRefused { .. } => "topology_refused",
            BrokerError::Timeout(_) => "timeout",
            BrokerError::UnknownTopic(_) => "unknown_topic",
            BrokerError::Other(_) => "other",
        }
    }
}
