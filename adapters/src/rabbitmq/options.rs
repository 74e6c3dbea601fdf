//! Scenario section `rabbitmq`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RabbitOptions {
    /// AMQP URL (its password is redacted in every file the harness writes).
    pub url: String,
}

impl Default for RabbitOptions {
    fn default() -> Self {
        RabbitOptions {
            url: "amqp://guest:guest@127.0.0.1:5672/%2f".into(),
        }
    }
}
