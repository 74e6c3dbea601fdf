//! `campaign.json` (schema_version 1, docs/campaigns.md): the resolved arms, the
//! order and its seed, every cell's status, outcome and directory, the build, the
//! host, and the start and end. Rewritten (atomically) after every cell, so it is
//! consistent whenever the campaign stops.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::record::host::Host;
use crate::record::result::BuildInfo;

pub const CAMPAIGN_SCHEMA_VERSION: u32 = 1;

/// Where a cell stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CellStatus {
    /// Not run yet.
    Pending,
    /// Ran to its end; `outcome` says how (PASS, FAIL, VOID, REFUSED).
    Done,
    /// The harness failed on it (`error` says why); the campaign went on.
    Failed,
    /// Its arm does not run here (`error` says why).
    NotRun,
    /// A signal cut it short (a second Ctrl-C, or SIGTERM), or it is running now;
    /// `--resume` runs it again.
    Interrupted,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellEntry {
    /// `<arm id>#<repeat>`.
    pub id: String,
    pub arm: String,
    pub repeat: u32,
    /// Relative to the campaign directory.
    pub dir: PathBuf,
    pub status: CellStatus,
    pub outcome: Option<crate::cell::Outcome>,
    pub exit: Option<u8>,
    pub error: Option<String>,
    pub started_utc: Option<String>,
    pub ended_utc: Option<String>,
    pub seconds: Option<f64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ArmEntry {
    pub id: String,
    pub slug: String,
    pub group: String,
    pub system: String,
    pub scenario: PathBuf,
    pub sets: Vec<String>,
    pub point: std::collections::BTreeMap<String, String>,
    pub not_run: Option<String>,
    /// Cells of this arm (absent in records written before groups could set their
    /// own: the campaign's `repeats`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CampaignRecord {
    pub schema_version: u32,
    pub kind: String,
    pub campaign: String,
    pub description: String,
    /// The campaign file as given.
    pub file: PathBuf,
    pub crossbench: BuildInfoRecord,
    pub host: serde_json::Value,
    pub repeats: u32,
    pub seed: u64,
    /// `running`, `complete` (every cell has ended) or `interrupted`.
    pub status: String,
    pub started_utc: String,
    pub ended_utc: Option<String>,
    pub arms: Vec<ArmEntry>,
    /// Cell ids in the order they run.
    pub order: Vec<String>,
    /// The cells, in that order.
    pub cells: Vec<CellEntry>,
    /// What the host probe saw before each sitting's first cell
    /// (`crate::record::host_stalls`; absent in records written before it, and when
    /// every sitting skipped it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_probes: Vec<crate::record::host_stalls::StallProbe>,
    /// Every sitting that ran cells into this directory (the first run, then each
    /// `--resume`), with its machine, its build and its times: the top-level `host`
    /// and `crossbench` are the first sitting's only (added 2026-12; absent in records
    /// written before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sittings: Vec<SittingEntry>,
}

/// One sitting of a campaign: one run of `crossbench campaign` (or `--resume`) on one
/// machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SittingEntry {
    pub started_utc: String,
    pub ended_utc: Option<String>,
    /// `CPU model, N cores`, and the hostname.
    pub machine: String,
    pub hostname: String,
    pub crossbench: BuildInfoRecord,
    /// The build had uncommitted changes: no commit in the history is it.
    pub dirty: bool,
    /// Cells this sitting ran to their end.
    pub cells_run: usize,
}

impl SittingEntry {
    /// A sitting starting now, on this machine, with this build.
    pub fn now() -> SittingEntry {
        let h = Host::probe();
        let b = BuildInfo::current();
        SittingEntry {
            started_utc: crate::record::invocation::utc(std::time::SystemTime::now()),
            ended_utc: None,
            machine: format!("{}, {} cores", h.cpu_model, h.cores),
            hostname: h.hostname.clone(),
            dirty: b.dirty(),
            crossbench: b.into(),
            cells_run: 0,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildInfoRecord {
    pub version: String,
    pub git_commit: String,
}

impl From<BuildInfo> for BuildInfoRecord {
    fn from(b: BuildInfo) -> Self {
        BuildInfoRecord {
            version: b.version,
            git_commit: b.git_commit,
        }
    }
}

impl CampaignRecord {
    pub fn new_host() -> serde_json::Value {
        serde_json::to_value(Host::probe()).unwrap_or_default()
    }

    /// Write `dir/campaign.json` through a temporary file and a rename, secrets
    /// redacted.
    pub fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let mut text = serde_json::to_string_pretty(self).context("serialising campaign.json")?;
        text.push('\n');
        let text = crate::record::redact::redact(&text);
        let tmp = dir.join(".campaign.json.tmp");
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, dir.join("campaign.json"))
            .with_context(|| format!("writing {}", dir.join("campaign.json").display()))
    }

    pub fn read(dir: &Path) -> anyhow::Result<CampaignRecord> {
        let p = dir.join("campaign.json");
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        let r: CampaignRecord =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", p.display()))?;
        anyhow::ensure!(
            r.schema_version == CAMPAIGN_SCHEMA_VERSION,
            "{}: schema_version {} is not {CAMPAIGN_SCHEMA_VERSION}",
            p.display(),
            r.schema_version
        );
        Ok(r)
    }
}
