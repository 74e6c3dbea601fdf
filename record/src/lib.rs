//! The cell record, owned in one place: how a cell ended ([`Outcome`]), the held rule's
//! default thresholds ([`held`]), and the typed reader of `result.json`
//! ([`result::CellResult`], schema_version 1, docs/record.md) that every reader of a
//! record uses: the report's tables, comparisons and findings, the campaign's resume,
//! the ceiling search and the gate.
//!
//! Nothing outside this crate is meant to look a record's field up by string, nor to
//! compare an outcome by its name: an outcome this crate does not know is an error when
//! a record is read, never a default.

pub mod error;
pub mod held;
pub mod outcome;
pub mod paths;
pub mod resources;
pub mod result;

pub use error::RecordError;
pub use outcome::Outcome;
pub use result::CellResult;
