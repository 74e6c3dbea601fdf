//! The PostgreSQL settings a record states for every system stored in PostgreSQL
//! (pgmq, and Queen's store): read in one query, written in one form, so both say
//! the same thing the same way, and the server's own version for the record's
//! provenance.

use sqlx::PgConnection;

use crate::provenance::Provenance;

/// `fsync`, `synchronous_commit`, `autovacuum` and `shared_buffers`, and the
/// server's version (`server_version`, `version()`), as the server has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSettings {
    pub fsync: String,
    pub synchronous_commit: String,
    pub autovacuum: String,
    pub shared_buffers: String,
    /// `SHOW server_version`: "15.20 (Debian 15.20-0+deb12u1)".
    pub server_version: String,
    /// `SELECT version()`: the build line ("PostgreSQL 15.20 (Debian …) on x86_64-pc-linux-gnu, compiled by …").
    pub version: String,
}

impl ServerSettings {
    /// Read them in one round trip.
    pub async fn read(conn: &mut PgConnection) -> Result<ServerSettings, sqlx::Error> {
        let (fsync, synchronous_commit, autovacuum, shared_buffers, server_version, version) =
            sqlx::query_as(
                "SELECT current_setting('fsync'), current_setting('synchronous_commit'), current_setting('autovacuum'), \
                 current_setting('shared_buffers'), current_setting('server_version'), version()",
            )
            .fetch_one(conn)
            .await?;
        Ok(ServerSettings {
            fsync,
            synchronous_commit,
            autovacuum,
            shared_buffers,
            server_version,
            version,
        })
    }

    /// The PostgreSQL server's provenance: its version and build line, and the four
    /// settings, each key prefixed with `prefix` (`""`, or `"store."` for a system
    /// that keeps its data in this server).
    pub fn provenance(&self, prefix: &str) -> Provenance {
        let mut p = Provenance::new(
            "PostgreSQL",
            "SHOW server_version, SELECT version(), current_setting(…)",
        )
        .with_version(&self.server_version)
        .with_build(&self.version);
        self.settings_into(&mut p, prefix);
        p
    }

    /// The four settings into `p`'s settings, keys prefixed with `prefix`.
    pub fn settings_into(&self, p: &mut Provenance, prefix: &str) {
        for (k, v) in [
            ("fsync", &self.fsync),
            ("synchronous_commit", &self.synchronous_commit),
            ("autovacuum", &self.autovacuum),
            ("shared_buffers", &self.shared_buffers),
        ] {
            p.setting(format!("{prefix}{k}"), v.clone());
        }
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
            shared_buffers: "128MB".into(),
            server_version: "15.20 (Debian 15.20-0+deb12u1)".into(),
            version: "PostgreSQL 15.20 (Debian 15.20-0+deb12u1) on x86_64-pc-linux-gnu".into(),
        };
        let p = s.provenance("store.");
        assert_eq!(p.product, "PostgreSQL");
        assert_eq!(p.version.as_deref(), Some("15.20 (Debian 15.20-0+deb12u1)"));
        assert_eq!(p.settings["store.shared_buffers"], "128MB");
        assert_eq!(p.settings.len(), 4);
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
