//! Adapter errors, and the classes they are counted by.

use serde::Serialize;
use thiserror::Error;

/// The class of a [`BrokerError`]: what counters and records key errors by. Every
/// class is listed in [`ErrorClass::ALL`], so a per-class table (a `report.csv`
/// column per class, a `push_by_class` map) never misses one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    Config,
    Connection,
    Refused,
    TopologyRefused,
    Timeout,
    UnknownTopic,
    Other,
}

impl ErrorClass {
    /// Every class, in the order of tables and columns.
    pub const ALL: [ErrorClass; 7] = [
        ErrorClass::Config,
        ErrorClass::Connection,
        ErrorClass::Refused,
        ErrorClass::TopologyRefused,
        ErrorClass::Timeout,
        ErrorClass::UnknownTopic,
        ErrorClass::Other,
    ];

    /// The class's name in counters, columns and records (`snake_case`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Config => "config",
            ErrorClass::Connection => "connection",
            ErrorClass::Refused => "refused",
            ErrorClass::TopologyRefused => "topology_refused",
            ErrorClass::Timeout => "timeout",
            ErrorClass::UnknownTopic => "unknown_topic",
            ErrorClass::Other => "other",
        }
    }

    /// Position in [`ErrorClass::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

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
    /// True when the request certainly had no effect: the system said no (refused, unknown
    /// topic, bad configuration). A timeout, a lost connection or anything unexplained
    /// leaves the outcome unknown (Jepsen's *indeterminate*): the write may have landed.
    /// Adapters keep this honest by classifying only a system's explicit refusal as
    /// [`BrokerError::Refused`].
    pub fn is_definite(&self) -> bool {
        matches!(
            self,
            BrokerError::Config { .. }
                | BrokerError::Refused(_)
                | BrokerError::TopologyRefused { .. }
                | BrokerError::UnknownTopic(_)
        )
    }

    /// The error's class (counter keys, `errors_by_class`).
    pub fn class(&self) -> ErrorClass {
        match self {
            BrokerError::Config { .. } => ErrorClass::Config,
            BrokerError::Connection(_) => ErrorClass::Connection,
            BrokerError::Refused(_) => ErrorClass::Refused,
            BrokerError::TopologyRefused { .. } => ErrorClass::TopologyRefused,
            BrokerError::Timeout(_) => ErrorClass::Timeout,
            BrokerError::UnknownTopic(_) => ErrorClass::UnknownTopic,
            BrokerError::Other(_) => ErrorClass::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_class_in_index_order() {
        for (i, c) in ErrorClass::ALL.iter().enumerate() {
            assert_eq!(c.index(), i, "{c}");
        }
        let e = BrokerError::TopologyRefused {
            what: "x".into(),
            answer: "y".into(),
        };
        assert_eq!(e.class().name(), "topology_refused");
        assert!(e.is_definite());
        assert!(!BrokerError::Timeout("t".into()).is_definite());
        assert!(!BrokerError::Connection("c".into()).is_definite());
        assert!(!BrokerError::Other("o".into()).is_definite());
        assert_eq!(
            serde_json::to_string(&ErrorClass::UnknownTopic).unwrap(),
            "\"unknown_topic\""
        );
    }
}
