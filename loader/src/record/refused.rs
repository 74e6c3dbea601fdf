//! `result.json` of a cell the system refused at setup (for instance a partition count
//! above the broker's limit). The refusal *is* the cell's result, as the reference's
//! partition wall was: it is recorded with the system's own answer, never dropped.
//! Same `schema_version` as a measured cell; `outcome` is `REFUSED` and there are no
//! figures (docs/record.md).

use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::record::host::Host;
use crate::record::invocation::{build_id, utc};
use crate::record::result::{BuildInfo, SCHEMA_VERSION};
use crate::scenario::Scenario;

/// What the system refused, in its own words.
#[derive(Debug, Serialize)]
pub struct Refusal {
    /// What was asked (e.g. "topic cb_ingress_a with 20000 partitions").
    pub what: String,
    /// The system's answer, verbatim.
    pub answer: String,
}

#[derive(Debug, Serialize)]
struct RefusedResult<'a> {
    schema_version: u32,
    crossbench: BuildInfo,
    cell: &'a str,
    /// Always `REFUSED`.
    outcome: crate::cell::Outcome,
    system: &'static str,
    workload: RefusedShape,
    durability: adapters::Durability,
    started_utc: String,
    ended_utc: String,
    host: &'a Host,
    refused: Refusal,
}

/// The shape that was asked for: enough to place the refusal in a table.
#[derive(Debug, Serialize)]
struct RefusedShape {
    kind: &'static str,
    rate: u64,
    properties: u64,
    lanes: u64,
}

/// Record a refused cell: write `dir/result.json`; the summary to print and the
/// record as written.
pub fn record(
    dir: &Path,
    s: &Scenario,
    host: &Host,
    started: SystemTime,
    lanes: u64,
    refusal: Refusal,
) -> Result<(String, cell_record::CellResult)> {
    let summary = summary(s, &refusal);
    let record = write(dir, s, host, started, lanes, refusal)?;
    Ok((summary, record))
}

/// Write `dir/result.json` for a refused cell.
fn write(
    dir: &Path,
    s: &Scenario,
    host: &Host,
    started: SystemTime,
    lanes: u64,
    refusal: Refusal,
) -> Result<cell_record::CellResult> {
    let (version, git_commit) = build_id();
    let r = RefusedResult {
        schema_version: SCHEMA_VERSION,
        crossbench: BuildInfo {
            version,
            git_commit,
        },
        cell: &s.name,
        outcome: crate::cell::Outcome::Refused,
        system: s.system.name(),
        workload: RefusedShape {
            kind: s.workload.name(),
            rate: s.rate,
            properties: s.properties,
            lanes,
        },
        durability: s.durability,
        started_utc: utc(started),
        ended_utc: utc(SystemTime::now()),
        host,
        refused: refusal,
    };
    crate::record::result::write_record(dir, &r).context("the refused result")
}

/// The summary line printed for a refused cell.
fn summary(s: &Scenario, refusal: &Refusal) -> String {
    format!(
        "\nOUTCOME: REFUSED  {} refused {}: {}\n",
        s.system.name(),
        refusal.what,
        refusal.answer
    )
}
