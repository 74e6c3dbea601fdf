//! Stream logs: one `<key>,<seq>` line per processed message, per consumer stream,
//! in processing order. The checker reads them against `produced.meta`.
//!
//! A handler never touches a file: it formats its batch's lines and queues them, and
//! one writer thread per cell appends them to the right file. The queue is bounded
//! ([`QUEUE_BATCHES`]); a handler waits only when the writer is that far behind. The
//! writer drains the queue every [`WRITER_PERIOD`] instead of being woken per batch,
//! so queueing a batch costs no wake-up of another thread.
//! A stream's lines reach its file in the order they were queued, so a key's lines
//! keep the order its batches were processed in.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;

/// Batches of lines that may wait for the writer, all streams together.
pub const QUEUE_BATCHES: usize = 4096;
/// How often the writer drains the queue when it found it empty.
pub const WRITER_PERIOD: std::time::Duration = std::time::Duration::from_millis(2);

enum Msg {
    Lines(usize, Vec<u8>),
    Close,
}

struct Shared {
    tx: mpsc::Sender<Msg>,
    closed: AtomicBool,
    writer: Mutex<Option<std::thread::JoinHandle<std::io::Result<()>>>>,
    paths: Vec<PathBuf>,
}

/// The logs of one cell, and their writer thread.
#[derive(Clone)]
pub struct StreamLogs {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StreamLogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamLogs")
            .field("paths", &self.shared.paths)
            .finish_non_exhaustive()
    }
}

/// The log of one consumer stream.
#[derive(Debug, Clone)]
pub struct StreamLog {
    logs: StreamLogs,
    index: usize,
}

impl StreamLogs {
    /// Create `<dir>/<name>.log` for every name, and start the writer.
    pub fn create(dir: &Path, names: &[String]) -> std::io::Result<StreamLogs> {
        let mut files = Vec::with_capacity(names.len());
        let mut paths = Vec::with_capacity(names.len());
        for n in names {
            let p = dir.join(format!("{n}.log"));
            let f = File::create(&p)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
            files.push(BufWriter::with_capacity(1 << 20, f));
            paths.push(p);
        }
        let (tx, mut rx) = mpsc::channel::<Msg>(QUEUE_BATCHES);
        let writer = std::thread::Builder::new()
            .name("stream-logs".into())
            .spawn(move || -> std::io::Result<()> {
                let mut failed: Option<std::io::Error> = None;
                loop {
                    let m = match rx.try_recv() {
                        Ok(m) => m,
                        Err(mpsc::error::TryRecvError::Empty) => {
                            std::thread::sleep(WRITER_PERIOD);
                            continue;
                        }
                        Err(mpsc::error::TryRecvError::Disconnected) => break,
                    };
                    match m {
                        Msg::Lines(i, bytes) => {
                            if failed.is_none() {
                                if let Err(e) = files[i].write_all(&bytes) {
                                    failed = Some(e);
                                }
                            }
                        }
                        Msg::Close => break,
                    }
                }
                rx.close();
                if let Some(e) = failed {
                    return Err(e);
                }
                for f in &mut files {
                    f.flush()?;
                    f.get_ref().sync_all()?;
                }
                Ok(())
            })?;
        Ok(StreamLogs {
            shared: Arc::new(Shared {
                tx,
                closed: AtomicBool::new(false),
                writer: Mutex::new(Some(writer)),
                paths,
            }),
        })
    }

    /// The log of stream `index` (the order of the names given to `create`).
    pub fn log(&self, index: usize) -> StreamLog {
        assert!(index < self.shared.paths.len(), "stream log {index}");
        StreamLog {
            logs: self.clone(),
            index,
        }
    }

    pub fn paths(&self) -> &[PathBuf] {
        &self.shared.paths
    }

    /// Write what is queued, flush and sync every file, stop the writer. Call it once
    /// every handler has stopped: later appends fail.
    pub async fn close(&self) -> std::io::Result<()> {
        if self.shared.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        let _ = self.shared.tx.send(Msg::Close).await;
        let writer = self.shared.writer.lock().take();
        match writer {
            Some(h) => tokio::task::spawn_blocking(move || h.join())
                .await
                .map_err(std::io::Error::other)?
                .map_err(|_| std::io::Error::other("the stream log writer panicked"))?,
            None => Ok(()),
        }
    }
}

impl StreamLog {
    /// Queue one line per (key, seq), in order. Fails once the logs are closed (the
    /// run is over): the caller must then not acknowledge what it did not record.
    pub async fn append(&self, entries: impl Iterator<Item = (u64, i64)>) -> std::io::Result<()> {
        let shared = &self.logs.shared;
        if shared.closed.load(Ordering::SeqCst) {
            return Err(std::io::Error::other("stream log already closed"));
        }
        let mut a = itoa::Buffer::new();
        let mut b = itoa::Buffer::new();
        let mut bytes = Vec::with_capacity(16 * entries.size_hint().0);
        for (k, s) in entries {
            bytes.extend_from_slice(a.format(k).as_bytes());
            bytes.push(b',');
            bytes.extend_from_slice(b.format(s).as_bytes());
            bytes.push(b'\n');
        }
        shared
            .tx
            .send(Msg::Lines(self.index, bytes))
            .await
            .map_err(|_| std::io::Error::other("stream log already closed"))
    }

    pub fn path(&self) -> &Path {
        &self.logs.shared.paths[self.index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_reach_their_file_in_order_and_close_refuses_more() {
        let dir = tempfile::tempdir().unwrap();
        let logs = StreamLogs::create(dir.path(), &["a".into(), "b".into()]).unwrap();
        let (a, b) = (logs.log(0), logs.log(1));
        for seq in 0..1000 {
            a.append([(1, seq)].into_iter()).await.unwrap();
            b.append([(2, seq), (3, seq)].into_iter()).await.unwrap();
        }
        logs.close().await.unwrap();
        assert!(a.append([(1, 1)].into_iter()).await.is_err());
        let text = std::fs::read_to_string(dir.path().join("a.log")).unwrap();
        let want: String = (0..1000).map(|s| format!("1,{s}\n")).collect();
        assert_eq!(text, want);
        let text = std::fs::read_to_string(dir.path().join("b.log")).unwrap();
        assert_eq!(text.lines().count(), 2000);
        assert!(text.starts_with("2,0\n3,0\n2,1\n"));
        assert_eq!(a.path(), dir.path().join("a.log"));
    }
}
