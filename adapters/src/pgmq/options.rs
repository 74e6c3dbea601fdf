//! Scenario section `pgmq`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PgmqOptions {
    /// PostgreSQL DSN (its password is redacted in every file the harness writes).
    pub dsn: String,
}

impl Default for PgmqOptions {
    fn default() -> Self {
        PgmqOptions {
            dsn: "postgres://postgres@127.0.0.1:5432/postgres".into(),
        }
    }
}
