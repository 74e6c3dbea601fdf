//! What can go wrong reading a cell record. Every message names the file and what to
//! do about it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a cell record directory (no result.json); give the directory `crossbench run` wrote")]
    NotACell { path: PathBuf },
    #[error("{path}: {message}")]
    BadRecord { path: PathBuf, message: String },
}
