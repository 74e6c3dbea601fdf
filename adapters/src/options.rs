//! What every system's scenario section has in common: defaults, a serde form that
//! refuses unknown fields, one way to check its knobs, and the sampler targets the
//! system is measured by when a scenario names none.

use std::fmt::Debug;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::BrokerError;

/// A knob out of range: the field by its dotted scenario path (`pgmq.readers`) and
/// what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct OptionsError {
    pub field: String,
    pub message: String,
}

impl OptionsError {
    /// The field `<section>.<field>` is wrong: `message` says how to fix it.
    pub fn new(section: &str, field: &str, message: impl Into<String>) -> Self {
        OptionsError {
            field: if field.is_empty() {
                section.to_string()
            } else {
                format!("{section}.{field}")
            },
            message: message.into(),
        }
    }
}

impl From<OptionsError> for BrokerError {
    fn from(e: OptionsError) -> Self {
        BrokerError::Config {
            field: e.field,
            message: e.message,
        }
    }
}

/// One system's scenario section (`mem:`, `pgmq:`, …).
pub trait Section:
    Default + Clone + PartialEq + Debug + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// Check every knob before anything starts; the error names the field and the fix.
    fn validate(&self) -> Result<(), OptionsError>;

    /// Sampler targets of the system under test, `(label, spec)`, when the scenario
    /// names none. Empty for a system that runs inside the loader.
    fn sample_targets(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}
