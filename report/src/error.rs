//! What can go wrong reading records and published cells, and writing outputs.
//! Every message names the file or field and what to do about it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
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
    #[error("{path}: field `{field}`: {message}")]
    BadPublished {
        path: PathBuf,
        field: String,
        message: String,
    },
    #[error("published cell `{id}` not found in {dir}; `crossbench compare --list` shows the ids")]
    UnknownPublished { id: String, dir: PathBuf },
    #[error("pattern `{pattern}` matched no cell directory; check the path (quote globs so the shell leaves them to crossbench)")]
    NoMatch { pattern: String },
    #[error("bad pattern `{pattern}`: {message}")]
    BadPattern { pattern: String, message: String },
    #[error("plot {what}: {message}")]
    Plot { what: String, message: String },
}

impl From<cell_record::RecordError> for ReportError {
    fn from(e: cell_record::RecordError) -> Self {
        use cell_record::RecordError as R;
        match e {
            R::Io { path, source } => ReportError::Io { path, source },
            R::NotACell { path } => ReportError::NotACell { path },
            R::BadRecord { path, message } => ReportError::BadRecord { path, message },
        }
    }
}

impl ReportError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> ReportError {
        ReportError::Io {
            path: path.into(),
            source,
        }
    }

    /// True when the error is the user's input (a path, a pattern, a file's
    /// contents) rather than the harness: the CLI exits 2 for these.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, ReportError::Plot { .. })
    }
}
