//! Several loaders, one cell (SPEC.md §10).
//!
//! A cell one loader machine cannot offer is run by `N` cooperating `crossbench run`
//! processes, each started with its index `J` (`--loader-index`, or the Kubernetes
//! Indexed Job's `JOB_COMPLETION_INDEX`) and the count (`--loader-count` or
//! `loaders.count`). The cell is split **by key**, never by iteration, so the
//! per-key proof survives: loader `J` owns the properties `p` with `p mod N = J`
//! ([`share`]) and paces only them, at their part of the rate, from one start instant
//! every loader reaches on its own clock. Its stamps carry its index, so every
//! message's origin is known, and its stream logs carry the loader and the delivery
//! time of every line, so `crossbench merge` ([`crate::cell::merge`]) can interleave them.
//!
//! Two topologies: `shared` (loader 0 sets the topology up; every loader attaches
//! to it and consumes every stream, so the system sees one consumer group with `N`×
//! the members) and `partitioned` (each loader sets up a namespace of its own, and
//! the cell is the union). The loaders meet at loader 0's [`rendezvous`], an HTTP
//! barrier: once every loader has joined with the same scenario, once loader 0's
//! topology is up (shared), and once every loader is ready to pace. A loader that
//! fails tells the rendezvous, a loader that falls silent is noticed by it, and the
//! cell is abandoned by all; each record says which loader failed and why.
//!
//! One loader's record is a record of its share: in a `shared` cell its logs hold
//! whichever keys the system handed it, so the verdict is the merge's. [`clock`]
//! records each loader's host and clock-offset bound; cross-host end-to-end latency
//! is reported apart from same-host latency, and marked untrusted when the bound is
//! unknown or above [`CLOCK_TRUST_US`].

pub mod abandoned;
pub mod clock;
pub mod frontier;
pub mod hlog;
pub mod http;
pub mod member;
pub mod rendezvous;
pub mod share;
pub mod totals;

use std::net::SocketAddr;
use std::time::Duration;

use serde::Serialize;

pub use member::Member;
pub use share::Share;

use crate::scenario::{FleetTopology, Scenario, WorkloadKind};

/// A clock-offset bound at or below this (µs) makes cross-host latency trusted.
pub const CLOCK_TRUST_US: u64 = 1000;

/// How this loader takes part in its cell.
#[derive(Debug, Clone)]
pub struct FleetSpec {
    pub share: Share,
    pub topology: FleetTopology,
    /// Loader 0's rendezvous, `http://host:port` (empty with one loader).
    pub rendezvous: String,
    /// Where loader 0 listens (default: the rendezvous address).
    pub listen: Option<SocketAddr>,
    pub barrier_timeout: Duration,
    /// The digest of the cell's resolved scenario, before this loader's namespace is
    /// applied: the same on every loader of the cell.
    pub digest: String,
    /// The cell's properties, and this loader's part of each flow's rate.
    pub properties: u64,
    pub rate_fraction: f64,
}

/// The loader flags of `crossbench run`.
#[derive(Debug, Clone, Default)]
pub struct LoaderFlags {
    pub index: Option<u64>,
    pub count: Option<u64>,
    pub rendezvous: Option<String>,
    pub listen: Option<String>,
}

impl LoaderFlags {
    /// Whether this run is one loader of a cell: a loader flag was given, the
    /// scenario has a `loaders` section, or the Job gave an index.
    pub fn any(&self, s: &Scenario) -> bool {
        self.index.is_some()
            || self.count.is_some()
            || self.rendezvous.is_some()
            || self.listen.is_some()
            || !s.loaders.is_default()
    }

    /// The `--set` overrides the flags stand for (count and rendezvous are the
    /// cell's, so they belong to the scenario every loader must share).
    pub fn sets(&self) -> Vec<String> {
        let mut v = Vec::new();
        if let Some(n) = self.count {
            v.push(format!("loaders.count={n}"));
        }
        if let Some(r) = &self.rendezvous {
            v.push(format!("loaders.rendezvous={r}"));
        }
        v
    }
}

/// Bad loader flags or a `loaders` section that cannot run (exit 2): the field and
/// the fix.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FleetError {
    pub field: String,
    pub message: String,
}

fn bad(field: &str, message: impl Into<String>) -> FleetError {
    FleetError {
        field: field.into(),
        message: message.into(),
    }
}

impl FleetSpec {
    /// This loader's part in the cell `s`, from the scenario's `loaders` section and
    /// the flags; `job_index` is `JOB_COMPLETION_INDEX` when set.
    pub fn resolve(
        s: &Scenario,
        flags: &LoaderFlags,
        job_index: Option<&str>,
    ) -> Result<FleetSpec, FleetError> {
        let l = &s.loaders;
        let count = l.count;
        if count == 0 || count > 1024 {
            return Err(bad(
                "--loader-count (loaders.count)",
                "must be between 1 and 1024",
            ));
        }
        let index = match (flags.index, job_index) {
            (Some(i), _) => i,
            (None, Some(j)) => j.trim().parse::<u64>().map_err(|_| {
                bad(
                    "JOB_COMPLETION_INDEX",
                    format!("{j:?} is not a loader index; give --loader-index J"),
                )
            })?,
            (None, None) if count == 1 => 0,
            (None, None) => {
                return Err(bad(
                    "--loader-index",
                    format!("{count} loaders need each loader's index: --loader-index J (0..{}) or JOB_COMPLETION_INDEX", count - 1),
                ))
            }
        };
        if index >= count {
            return Err(bad(
                "--loader-index",
                format!(
                    "{index} is not below the loader count {count}: indices run 0..{}",
                    count - 1
                ),
            ));
        }
        let listen = match &flags.listen {
            None => None,
            Some(a) => Some(a.parse::<SocketAddr>().map_err(|_| {
                bad(
                    "--rendezvous-listen",
                    format!("{a:?} is not host:port, e.g. 0.0.0.0:7070 or 127.0.0.1:7070"),
                )
            })?),
        };
        if count > 1 {
            if http::host_port(&l.rendezvous).is_none() {
                return Err(bad(
                    "--rendezvous (loaders.rendezvous)",
                    if l.rendezvous.is_empty() {
                        format!("{count} loaders meet at loader 0's rendezvous: give --rendezvous http://<loader 0's host>:<port>, the same on every loader")
                    } else {
                        format!("{:?} is not http://host:port", l.rendezvous)
                    },
                ));
            }
            if s.workload == WorkloadKind::Stream {
                return Err(bad(
                    "workload",
                    "several loaders run the pipeline workload; a stream cell runs on one loader (--loader-count 1)",
                ));
            }
            if !s.faults.is_empty() || s.proxy.is_some() {
                return Err(bad(
                    "faults",
                    "faults and the harness's proxy run in a single-loader cell: remove them or run with one loader",
                ));
            }
            if s.properties < count {
                return Err(bad(
                    "--loader-count (loaders.count)",
                    format!(
                        "{count} loaders for {} properties: each loader owns the properties p with p mod N = J, so N must not exceed properties",
                        s.properties
                    ),
                ));
            }
            if l.topology == FleetTopology::Shared {
                if let adapters::SharedConsumers::No(why) = s.system.capabilities().shared_consumers
                {
                    return Err(bad(
                        "loaders.topology",
                        format!(
                            "{} cannot be shared by several loaders' consumers ({why}); use loaders.topology: partitioned",
                            s.system
                        ),
                    ));
                }
            }
        }
        if l.barrier_timeout.0 < Duration::from_secs(1)
            || l.barrier_timeout.0 > Duration::from_secs(3600)
        {
            return Err(bad("loaders.barrier_timeout", "must be between 1s and 1h"));
        }
        let share = Share::new(index, count);
        Ok(FleetSpec {
            share,
            topology: l.topology,
            rendezvous: l.rendezvous.clone(),
            listen,
            barrier_timeout: l.barrier_timeout.0,
            digest: digest(s),
            properties: s.properties,
            rate_fraction: share.rate_fraction(s.properties, s.hot.props, s.hot.factor),
        })
    }

    /// One loader: no rendezvous, the ordinary cell with a `loaders` section.
    pub fn alone(&self) -> bool {
        self.share.count == 1
    }

    /// Whether this loader's own logs hold all of its keys' deliveries, so that the
    /// checker can judge its record alone: in a `partitioned` cell, or when it is the
    /// only loader.
    pub fn verifies_alone(&self) -> bool {
        self.alone() || self.topology == FleetTopology::Partitioned
    }

    /// Whether this loader sets the topology up (and resets it): every loader in a
    /// `partitioned` cell (its namespace), only loader 0 in a `shared` one.
    pub fn sets_up(&self) -> bool {
        self.topology == FleetTopology::Partitioned || self.share.index == 0
    }

    /// The prefix of this loader's namespace in a `partitioned` cell (`l<J>-`).
    pub fn namespace(&self) -> Option<String> {
        (self.topology == FleetTopology::Partitioned && !self.alone())
            .then(|| format!("l{}-", self.share.index))
    }

    pub fn rendezvous_host_port(&self) -> Option<&str> {
        http::host_port(&self.rendezvous)
    }

    /// How long a joined loader may go unheard before the cell is abandoned.
    pub fn silence(&self) -> Duration {
        self.barrier_timeout.min(Duration::from_secs(10))
    }

    /// The adapters' view of how the topology is shared.
    pub fn sharing(&self) -> adapters::Sharing {
        if self.topology == FleetTopology::Shared {
            adapters::Sharing {
                processes: self.share.count,
                index: self.share.index,
            }
        } else {
            adapters::Sharing::ALONE
        }
    }
}

/// A digest of the resolved scenario (FNV-1a over its YAML): two loaders with
/// different cells must not meet.
pub fn digest(s: &Scenario) -> String {
    let text = serde_yaml::to_string(s).unwrap_or_default();
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The `loaders` section of a loader's `result.json` (and, merged, of the cell's).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct LoadersRecord {
    /// N.
    pub count: u64,
    /// This loader's index; absent in a merged record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<u64>,
    pub topology: String,
    /// The rendezvous (empty with one loader).
    pub rendezvous: String,
    /// This loader's properties and its part of the rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<ShareRecord>,
    /// The namespace prefix of a partitioned loader.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Whether this record's verdict is the checker's on its own logs (false: the
    /// verdict is the merge's).
    pub verified_alone: bool,
    /// The start instant every loader paced from, Unix µs.
    pub start_unix_us: Option<i64>,
    /// This loader's host and clock-offset bounds at the start and the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<clock::LoaderHost>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_start: Option<clock::ClockBound>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_end: Option<clock::ClockBound>,
    /// Every loader's host, as they joined (index order).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<Option<clock::LoaderHost>>,
    /// Why the cell was abandoned, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub abandoned: Option<rendezvous::Fail>,
    /// In a merged record: each loader's own figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaders: Vec<serde_json::Value>,
}

/// One loader's share, as recorded.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct ShareRecord {
    pub properties_owned: u64,
    pub rate_fraction: f64,
    pub rule: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(extra: &str) -> Scenario {
        let text =
            format!("name: t\nsystem: pgmq\nrate: 100\nproperties: 10\nduration: 5s\n{extra}");
        crate::scenario::parse(&text, "test", &[]).unwrap()
    }

    fn flags(index: Option<u64>) -> LoaderFlags {
        LoaderFlags {
            index,
            ..Default::default()
        }
    }

    #[test]
    fn resolves_index_count_and_rendezvous() {
        let s = scenario("loaders: {count: 2, rendezvous: 'http://127.0.0.1:7070'}\n");
        let f = FleetSpec::resolve(&s, &flags(Some(1)), None).unwrap();
        assert_eq!(f.share, Share::new(1, 2));
        assert!(!f.sets_up() && !f.verifies_alone());
        assert_eq!(f.rendezvous_host_port(), Some("127.0.0.1:7070"));
        assert_eq!(
            f.sharing(),
            adapters::Sharing {
                processes: 2,
                index: 1
            }
        );
        // The Job's index when the flag is absent.
        let f = FleetSpec::resolve(&s, &flags(None), Some("0")).unwrap();
        assert_eq!(f.share.index, 0);
        assert!(f.sets_up());
        // One loader needs no index and no rendezvous.
        let f = FleetSpec::resolve(&scenario(""), &flags(None), None).unwrap();
        assert!(f.alone() && f.verifies_alone());
    }

    #[test]
    fn bad_fleets_name_the_field() {
        let two = "loaders: {count: 2, rendezvous: 'http://127.0.0.1:7070'}\n";
        let err = |s: &Scenario, f: &LoaderFlags, job: Option<&str>| {
            FleetSpec::resolve(s, f, job).unwrap_err().to_string()
        };
        assert!(err(&scenario(two), &flags(None), None).starts_with("--loader-index"));
        assert!(err(&scenario(two), &flags(Some(2)), None).contains("not below"));
        assert!(err(&scenario(two), &flags(None), Some("x")).starts_with("JOB_COMPLETION_INDEX"));
        let e = err(&scenario("loaders: {count: 2}\n"), &flags(Some(0)), None);
        assert!(e.starts_with("--rendezvous"), "{e}");
        let e = err(
            &scenario("loaders: {count: 11, rendezvous: 'http://h:1'}\n"),
            &flags(Some(0)),
            None,
        );
        assert!(e.contains("must not exceed properties"), "{e}");
        let s = crate::scenario::parse(
            &format!("name: t\nsystem: mem\nrate: 100\nproperties: 10\nduration: 5s\n{two}"),
            "test",
            &[],
        )
        .unwrap();
        let e = err(&s, &flags(Some(0)), None);
        assert!(
            e.starts_with("loaders.topology") && e.contains("partitioned"),
            "{e}"
        );
        let part =
            "loaders: {count: 2, rendezvous: 'http://127.0.0.1:7070', topology: partitioned}\n";
        let s = crate::scenario::parse(
            &format!("name: t\nsystem: mem\nrate: 100\nproperties: 10\nduration: 5s\n{part}"),
            "test",
            &[],
        )
        .unwrap();
        assert!(FleetSpec::resolve(&s, &flags(Some(1)), None).is_ok());
        let bad_listen = LoaderFlags {
            index: Some(0),
            listen: Some("nowhere".into()),
            ..Default::default()
        };
        assert!(err(&scenario(two), &bad_listen, None).starts_with("--rendezvous-listen"));
    }

    #[test]
    fn digests_tell_cells_apart() {
        assert_eq!(digest(&scenario("")), digest(&scenario("")));
        assert_ne!(digest(&scenario("")), digest(&scenario("seed: 9\n")));
    }
}
