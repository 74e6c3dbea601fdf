//! `result.json` of a loader that gave its cell up before it could pace it: a loader
//! of several failed at setup, fell silent, never reached the rendezvous, or this
//! loader could not join. Like a refused cell it has no figures; `outcome` is
//! `ABANDONED`, `abandoned` says which loader failed, at which stage and why, and
//! `loaders` says which loader this record is (docs/record.md). A loader abandoned
//! after its traffic started writes a full record instead, with the same
//! `abandoned` entry under `loaders`.

use std::path::Path;
use std::time::SystemTime;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::fleet::rendezvous::Fail;
use crate::fleet::LoadersRecord;
use crate::record::host::Host;
use crate::record::invocation::utc;
use crate::record::result::{BuildInfo, SCHEMA_VERSION};
use crate::scenario::Scenario;

#[derive(Debug, Serialize)]
struct AbandonedResult<'a> {
    schema_version: u32,
    crossbench: BuildInfo,
    cell: &'a str,
    /// Always `ABANDONED`.
    outcome: crate::cell::Outcome,
    system: &'static str,
    workload: Shape,
    durability: adapters::Durability,
    started_utc: String,
    ended_utc: String,
    host: &'a Host,
    abandoned: &'a Fail,
    loaders: &'a LoadersRecord,
}

#[derive(Debug, Serialize)]
struct Shape {
    kind: &'static str,
    rate: u64,
    properties: u64,
}

/// Write `dir/result.json` for an abandoned loader; the summary to print and the
/// record as written.
pub fn record(
    dir: &Path,
    s: &Scenario,
    host: &Host,
    started: SystemTime,
    why: &Fail,
    loaders: &LoadersRecord,
) -> Result<(String, cell_record::CellResult)> {
    let r = AbandonedResult {
        schema_version: SCHEMA_VERSION,
        crossbench: BuildInfo::current(),
        cell: &s.name,
        outcome: crate::cell::Outcome::Abandoned,
        system: s.system.name(),
        workload: Shape {
            kind: s.workload.name(),
            rate: s.rate,
            properties: s.properties,
        },
        durability: s.durability,
        started_utc: utc(started),
        ended_utc: utc(SystemTime::now()),
        host,
        abandoned: why,
        loaders,
    };
    let record = crate::record::result::write_record(dir, &r).context("the abandoned result")?;
    Ok((summary(loaders.index, why), record))
}

/// The line printed for an abandoned cell.
pub fn summary(me: Option<u64>, why: &Fail) -> String {
    let me = me.map_or(String::new(), |j| format!("loader {j}: "));
    format!(
        "\nOUTCOME: ABANDONED  {me}the cell was given up: loader {} failed at {}: {}\n",
        why.loader, why.stage, why.why
    )
}
