//! Target specifications as given on the command line.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// What to sample. See [`TargetSpec::from_str`] for the textual forms.
#[derive(Clone, PartialEq, Eq)]
pub enum TargetSpec {
    /// A cgroup v2 directory. A relative path is taken below the first cgroup2 mount.
    CgroupPath(PathBuf),
    /// Every cgroup v2 directory whose path matches a glob (`*`, `?` per path
    /// component; relative patterns are matched below each cgroup2 mount).
    /// All matches are summed; re-resolved every few seconds.
    CgroupGlob(String),
    /// A container by id, id prefix or (through `docker inspect`) name.
    Container(String),
    /// A process and its descendants.
    Pid(u32),
    /// The process whose pid is the first line of a pid file (read again at every
    /// resolution: a restarted server is followed), and its descendants.
    PidFile(PathBuf),
    /// Every process whose command line contains the pattern (or matches it as
    /// a glob when it contains `*` or `?`), with their descendants.
    ProcessPattern(String),
    /// The whole host.
    Host,
    /// The current process (the loader) and its descendants.
    Loader,
    /// PostgreSQL internals over a DSN (feature `postgres`).
    Postgres { dsn: String },
}

impl fmt::Debug for TargetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Display already redacts the DSN password.
        write!(f, "TargetSpec({self})")
    }
}

impl fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetSpec::CgroupPath(p) => write!(f, "cgroup:{}", p.display()),
            TargetSpec::CgroupGlob(g) => write!(f, "cgroup-glob:{g}"),
            TargetSpec::Container(c) => write!(f, "container:{c}"),
            TargetSpec::Pid(p) => write!(f, "pid:{p}"),
            TargetSpec::PidFile(p) => write!(f, "pidfile:{}", p.display()),
            TargetSpec::ProcessPattern(p) => write!(f, "proc:{p}"),
            TargetSpec::Host => f.write_str("host"),
            TargetSpec::Loader => f.write_str("loader"),
            TargetSpec::Postgres { dsn } => write!(f, "postgres:{}", redact_dsn(dsn)),
        }
    }
}

/// The accepted textual forms, for error messages and `--help`.
pub const TARGET_FORMS: &str =
    "cgroup:<path>, cgroup-glob:<glob>, container:<id|name>, pid:<n>, pidfile:<path>, \
     proc:<cmdline substring or glob>, host, loader, postgres:<dsn>";

impl FromStr for TargetSpec {
    type Err = crate::SamplerError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| crate::SamplerError::BadTarget {
            spec: redact_dsn(s),
            why: why.to_string(),
        };
        let s = s.trim();
        match s {
            "host" => return Ok(TargetSpec::Host),
            "loader" => return Ok(TargetSpec::Loader),
            _ => {}
        }
        let Some((kind, rest)) = s.split_once(':') else {
            return Err(bad("unknown form"));
        };
        if rest.is_empty() {
            return Err(bad("empty value after ':'"));
        }
        Ok(match kind {
            "cgroup" => TargetSpec::CgroupPath(PathBuf::from(rest)),
            "cgroup-glob" => TargetSpec::CgroupGlob(rest.to_string()),
            "container" => TargetSpec::Container(rest.to_string()),
            "pid" => TargetSpec::Pid(rest.parse().map_err(|_| bad("pid is not a number"))?),
            "pidfile" => TargetSpec::PidFile(PathBuf::from(rest)),
            "proc" => TargetSpec::ProcessPattern(rest.to_string()),
            "postgres" => TargetSpec::Postgres {
                dsn: rest.to_string(),
            },
            _ => return Err(bad("unknown kind")),
        })
    }
}

impl TargetSpec {
    /// The kind written in the `kind` column.
    pub fn kind(&self) -> TargetKind {
        match self {
            TargetSpec::CgroupPath(_) | TargetSpec::CgroupGlob(_) | TargetSpec::Container(_) => {
                TargetKind::Cgroup
            }
            TargetSpec::Pid(_) | TargetSpec::PidFile(_) | TargetSpec::ProcessPattern(_) => {
                TargetKind::Process
            }
            TargetSpec::Host => TargetKind::Host,
            TargetSpec::Loader => TargetKind::Loader,
            TargetSpec::Postgres { .. } => TargetKind::Postgres,
        }
    }
}

/// The `kind` column of samples.csv.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TargetKind {
    Cgroup,
    Process,
    Host,
    Loader,
    Postgres,
}

impl TargetKind {
    pub fn as_str(self) -> &'static str {
        match self {
            TargetKind::Cgroup => "cgroup",
            TargetKind::Process => "process",
            TargetKind::Host => "host",
            TargetKind::Loader => "loader",
            TargetKind::Postgres => "postgres",
        }
    }
}

impl FromStr for TargetKind {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Ok(match s {
            "cgroup" => TargetKind::Cgroup,
            "process" => TargetKind::Process,
            "host" => TargetKind::Host,
            "loader" => TargetKind::Loader,
            "postgres" => TargetKind::Postgres,
            _ => return Err(()),
        })
    }
}

/// Replaces the password of a URL-style DSN with `***`
/// (`postgres://user:secret@host/db` → `postgres://user:***@host/db`), and the
/// value of any `password=` key/value or query parameter.
pub fn redact_dsn(dsn: &str) -> String {
    let mut out = dsn.to_string();
    if let Some(scheme_end) = out.find("://") {
        let auth_start = scheme_end + 3;
        let rest = &out[auth_start..];
        let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
        // The password may itself contain '@'; the userinfo ends at the last '@'.
        if let Some(at) = rest[..auth_end].rfind('@') {
            if let Some(colon) = rest[..at].find(':') {
                out.replace_range(auth_start + colon + 1..auth_start + at, "***");
            }
        }
    }
    // key=value forms: "password=secret" in a query string or libpq conninfo.
    let lower = out.to_ascii_lowercase();
    if let Some(pos) = lower.find("password=") {
        let vstart = pos + "password=".len();
        let vend = out[vstart..]
            .find(['&', ' '])
            .map(|e| vstart + e)
            .unwrap_or(out.len());
        out.replace_range(vstart..vend, "***");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let p = |s: &str| s.parse::<TargetSpec>().unwrap();
        assert_eq!(p("host"), TargetSpec::Host);
        assert_eq!(p("loader"), TargetSpec::Loader);
        assert_eq!(p("pid:123"), TargetSpec::Pid(123));
        assert_eq!(
            p("proc:postgres"),
            TargetSpec::ProcessPattern("postgres".into())
        );
        assert_eq!(
            p("cgroup:/sys/fs/cgroup/x"),
            TargetSpec::CgroupPath("/sys/fs/cgroup/x".into())
        );
        assert_eq!(
            p("cgroup-glob:system.slice/docker-*.scope"),
            TargetSpec::CgroupGlob("system.slice/docker-*.scope".into())
        );
        assert_eq!(p("container:abc"), TargetSpec::Container("abc".into()));
        assert_eq!(
            p("postgres:postgres://u:p@127.0.0.1:5432/db"),
            TargetSpec::Postgres {
                dsn: "postgres://u:p@127.0.0.1:5432/db".into()
            }
        );
    }

    #[test]
    fn errors_name_the_forms_and_hide_passwords() {
        for bad in ["pid:abc", "nope", "disk:sda", "pid:"] {
            let e = bad.parse::<TargetSpec>().unwrap_err().to_string();
            assert!(e.contains("cgroup-glob:<glob>"), "{e}");
            assert!(e.contains(bad.split(':').next().unwrap()), "{e}");
        }
        let e = "pg:postgres://u:hunter2@h/db"
            .parse::<TargetSpec>()
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2"), "{e}");
        let t: TargetSpec = "postgres:postgres://u:hunter2@h/db".parse().unwrap();
        assert!(!format!("{t} {t:?}").contains("hunter2"));
    }

    #[test]
    fn redacts_dsns() {
        assert_eq!(
            redact_dsn("postgres://user:secret@host"),
            "postgres://user:***@host"
        );
        assert_eq!(
            redact_dsn("postgres://user:s3cr@t@host:5432/db?sslmode=disable"),
            "postgres://user:***@host:5432/db?sslmode=disable"
        );
        assert_eq!(
            redact_dsn("postgres://user@host/db"),
            "postgres://user@host/db"
        );
        assert_eq!(
            redact_dsn("postgres://host/db?user=u&password=pw&x=1"),
            "postgres://host/db?user=u&password=***&x=1"
        );
        assert_eq!(
            redact_dsn("host=h user=u password=pw dbname=d"),
            "host=h user=u password=*** dbname=d"
        );
        assert_eq!(redact_dsn("postgres://h:5432/db"), "postgres://h:5432/db");
    }
}
