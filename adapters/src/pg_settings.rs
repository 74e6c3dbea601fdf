//! The PostgreSQL settings a record states for every system stored in PostgreSQL
//! (pgmq, and Queen's store): read in one query, written in one form, so both say
//! the same thing the same way.

use sqlx::PgConnection;

/// `fsync`, `synchronous_commit` and `autovacuum`, as the server has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    pub fsync: String,
    pub synchronous_commit: String,
    pub autovacuum: String,
}

impl ServerSettings {
    /// Read them in one round trip.
    pub async fn read(conn: &mut PgConnection) -> Result<ServerSettings, sqlx::Error> {
        let (fsync, synchronous_commit, autovacuum) = sqlx::query_as(
            "SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('autovacuum')",
        )
        .fetch_one(conn)
        .await?;
        Ok(ServerSettings {
            fsync,
            synchronous_commit,
            autovacuum,
        })
    }

    /// "server fsync=on, synchronous_commit=on, autovacuum=off".
    pub fn describe(&self) -> String {
        format!(
            "server fsync={}, synchronous_commit={}, autovacuum={}",
            self.fsync, self.synchronous_commit, self.autovacuum
        )
    }

    /// Whether the server vacuums by itself; when it does not, the dead row version
    /// every update or delete leaves stays until a manual VACUUM.
    pub fn autovacuums(&self) -> bool {
        self.autovacuum == "on"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_all_three_and_knows_when_the_server_does_not_vacuum() {
        let s = ServerSettings {
            fsync: "on".into(),
            synchronous_commit: "off".into(),
            autovacuum: "off".into(),
        };
        assert_eq!(
            s.describe(),
            "server fsync=on, synchronous_commit=off, autovacuum=off"
        );
        assert!(!s.autovacuums());
        assert!(ServerSettings {
            autovacuum: "on".into(),
            ..s
        }
        .autovacuums());
    }
}
