//! Stream logs: one `<prop>,<seq>` line per processed message, in processing order.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

/// The log of one stream, appended under a mutex in whole batches.
#[derive(Debug)]
pub struct StreamLog {
    path: PathBuf,
    out: Mutex<Option<BufWriter<File>>>,
}

impl StreamLog {
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let f = File::create(path)?;
        Ok(StreamLog {
            path: path.to_path_buf(),
            out: Mutex::new(Some(BufWriter::with_capacity(1 << 20, f))),
        })
    }

    /// Append one line per (prop, seq), in order.
    pub fn append(&self, entries: impl Iterator<Item = (u64, i64)>) -> std::io::Result<()> {
        let mut a = itoa::Buffer::new();
        let mut b = itoa::Buffer::new();
        let mut guard = self.out.lock();
        let Some(w) = guard.as_mut() else {
            return Err(std::io::Error::other("stream log already closed"));
        };
        for (p, s) in entries {
            w.write_all(a.format(p).as_bytes())?;
            w.write_all(b",")?;
            w.write_all(b.format(s).as_bytes())?;
            w.write_all(b"\n")?;
        }
        Ok(())
    }

    /// Flush and close; later appends fail.
    pub fn close(&self) -> std::io::Result<()> {
        if let Some(mut w) = self.out.lock().take() {
            w.flush()?;
            w.get_ref().sync_all()?;
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}
