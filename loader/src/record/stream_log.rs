//! Stream logs: one `<key>,<seq>` line per processed message, per consumer stream,
//! in processing order. The checker reads them against `produced.meta`. A loader of
//! a cell of several loaders writes `<key>,<seq>,<loader>,<t>` instead: its index and
//! the instant the line was committed (µs on its cell clock), so `crossbench merge`
//! can interleave the loaders' logs of one stream (checker/FORMAT.md).
//!
//! A handler never touches a file. Each stream has a buffer in memory; a handler
//! formats its batch's lines straight into its stream's buffer, under that buffer's
//! lock for the time of the copy (no allocation, no channel, no wake-up of another
//! thread). One writer thread per cell swaps every buffer for an empty one and
//! appends what it took to the stream's file: when a buffer has reached
//! [`WAKE_BYTES`] (the append that gets it there wakes the writer, once per pass), and
//! at the latest every [`WRITER_PERIOD`]. The writer's wake-ups follow the volume of
//! lines, not the clock: on this project's 2-core VM a thread's wake-up costs tens of
//! µs of CPU, and the fixed 2 ms period this replaced cost a NATS or Redis cell at
//! 2000 msg/s 6–8 µs per delivery (docs/performance.md, "The harness tax per
//! adapter"). A buffer holds at most [`BUFFER_LIMIT`] bytes: a handler that finds its
//! stream's buffer full waits until the writer has emptied it, so a slow disk slows
//! the handlers instead of growing memory.
//! A stream's lines reach its file in the order they were appended, so a key's lines
//! keep the order its batches were processed in.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::Notify;

/// The most bytes one stream's lines may wait for the writer (about 800 000 lines).
pub const BUFFER_LIMIT: usize = 8 << 20;
/// The longest the writer sleeps between two passes: no line waits longer in memory
/// (unless the disk is slower than the appends).
pub const WRITER_PERIOD: std::time::Duration = std::time::Duration::from_millis(100);
/// A buffer this full wakes the writer before its period is up: a pass moves at
/// least this much, and a buffer reaches [`BUFFER_LIMIT`] only when the disk is slower
/// than the appends.
pub const WAKE_BYTES: usize = 256 << 10;

struct Shared {
    /// Each stream's lines not yet taken by the writer.
    buffers: Vec<Mutex<Vec<u8>>>,
    /// Set by `close`: appends fail from then on (checked under a buffer's lock, so
    /// an append either lands before the writer's last pass or fails).
    closed: AtomicBool,
    /// An append has woken the writer since its last pass (so only one does).
    woken: AtomicBool,
    /// The writer emptied the buffers (wakes handlers waiting for room).
    drained: Notify,
    writer: Mutex<Option<std::thread::JoinHandle<std::io::Result<()>>>>,
    writer_thread: std::thread::Thread,
    paths: Vec<PathBuf>,
    /// The writer's longest sleep ([`WRITER_PERIOD`]; a test lengthens it).
    period: std::time::Duration,
    /// Passes the writer has made (tests watch it).
    passes: std::sync::atomic::AtomicU64,
    /// The loader index every line carries (cells of several loaders).
    loader: Option<u32>,
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

/// The writer thread: empty every buffer into its file each period; after `closed`,
/// one last pass, then flush and sync every file.
fn write_loop(shared: &Shared, mut files: Vec<BufWriter<File>>) -> std::io::Result<()> {
    let mut taken: Vec<Vec<u8>> = vec![Vec::new(); files.len()];
    let mut failed: Option<std::io::Error> = None;
    loop {
        // Read before the pass: a close seen here has its last appends in the buffers.
        let last = shared.closed.load(Ordering::SeqCst);
        // Cleared before the buffers are taken: an append that fills one after this
        // point wakes the writer again.
        shared.woken.store(false, Ordering::SeqCst);
        for (i, t) in taken.iter_mut().enumerate() {
            std::mem::swap(&mut *shared.buffers[i].lock(), t);
            if !t.is_empty() && failed.is_none() {
                if let Err(e) = files[i].write_all(t) {
                    failed = Some(e);
                }
            }
            t.clear();
        }
        shared.passes.fetch_add(1, Ordering::Relaxed);
        shared.drained.notify_waiters();
        if last {
            break;
        }
        std::thread::park_timeout(shared.period);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    for f in &mut files {
        f.flush()?;
        f.get_ref().sync_all()?;
    }
    Ok(())
}

impl StreamLogs {
    /// Create `<dir>/<name>.log` for every name, and start the writer.
    pub fn create(dir: &Path, names: &[String]) -> std::io::Result<StreamLogs> {
        Self::create_for(dir, names, None)
    }

    /// The same, for loader `loader` of a cell of several loaders (lines of four
    /// fields when appended with [`StreamLog::append_at`]).
    pub fn create_for(
        dir: &Path,
        names: &[String],
        loader: Option<u32>,
    ) -> std::io::Result<StreamLogs> {
        Self::create_with_period(dir, names, loader, WRITER_PERIOD)
    }

    fn create_with_period(
        dir: &Path,
        names: &[String],
        loader: Option<u32>,
        period: std::time::Duration,
    ) -> std::io::Result<StreamLogs> {
        let mut files = Vec::with_capacity(names.len());
        let mut paths = Vec::with_capacity(names.len());
        for n in names {
            let p = dir.join(format!("{n}.log"));
            let f = File::create(&p)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", p.display())))?;
            files.push(BufWriter::with_capacity(1 << 20, f));
            paths.push(p);
        }
        // The writer needs the shared state, and the state names the writer's thread:
        // start it parked until the state exists.
        let (tx, rx) = std::sync::mpsc::sync_channel::<Arc<Shared>>(1);
        let writer = std::thread::Builder::new()
            .name("stream-logs".into())
            .spawn(move || -> std::io::Result<()> {
                let Ok(shared) = rx.recv() else {
                    return Ok(());
                };
                write_loop(&shared, files)
            })?;
        let shared = Arc::new(Shared {
            buffers: (0..paths.len()).map(|_| Mutex::new(Vec::new())).collect(),
            closed: AtomicBool::new(false),
            woken: AtomicBool::new(false),
            drained: Notify::new(),
            writer_thread: writer.thread().clone(),
            writer: Mutex::new(Some(writer)),
            paths,
            period,
            passes: std::sync::atomic::AtomicU64::new(0),
            loader,
        });
        tx.send(shared.clone())
            .map_err(|_| std::io::Error::other("the stream log writer did not start"))?;
        Ok(StreamLogs { shared })
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

    /// Write what is buffered, flush and sync every file, stop the writer. Call it once
    /// every handler has stopped: later appends fail.
    pub async fn close(&self) -> std::io::Result<()> {
        if self.shared.closed.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        self.shared.writer_thread.unpark();
        // Handlers waiting for room fail now instead of waiting for a writer that stops.
        self.shared.drained.notify_waiters();
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

fn closed_error() -> std::io::Error {
    std::io::Error::other("stream log already closed")
}

impl StreamLog {
    /// Append one line per (key, seq), in order. Waits while the stream's buffer is
    /// full. Fails once the logs are closed (the run is over): the caller must then
    /// not acknowledge what it did not record.
    pub async fn append(
        &self,
        entries: impl Iterator<Item = (u64, i64)> + Clone,
    ) -> std::io::Result<()> {
        self.append_inner(entries, None).await
    }

    /// The same, committed at `t_us`: in a loader of several, every line carries the
    /// loader's index and `t_us`; otherwise it is [`StreamLog::append`].
    pub async fn append_at(
        &self,
        entries: impl Iterator<Item = (u64, i64)> + Clone,
        t_us: i64,
    ) -> std::io::Result<()> {
        self.append_inner(entries, Some(t_us)).await
    }

    async fn append_inner(
        &self,
        entries: impl Iterator<Item = (u64, i64)> + Clone,
        t_us: Option<i64>,
    ) -> std::io::Result<()> {
        let shared = &self.logs.shared;
        loop {
            if self.try_append(entries.clone(), t_us)? {
                return Ok(());
            }
            // Full: wait for the writer's next pass, registered before looking again
            // so a pass between the look and the wait is not missed.
            let drained = shared.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.try_append(entries.clone(), t_us)? {
                return Ok(());
            }
            shared.writer_thread.unpark();
            drained.await;
        }
    }

    /// Append when the buffer has room: Ok(false) when it is full.
    fn try_append(
        &self,
        entries: impl Iterator<Item = (u64, i64)>,
        t_us: Option<i64>,
    ) -> std::io::Result<bool> {
        let shared = &self.logs.shared;
        let mut buf = shared.buffers[self.index].lock();
        if shared.closed.load(Ordering::SeqCst) {
            return Err(closed_error());
        }
        if buf.len() >= BUFFER_LIMIT {
            return Ok(false);
        }
        // The append that takes the buffer to `WAKE_BYTES` wakes the writer (after
        // the lock); the next ones until its pass do not.
        let below = buf.len() < WAKE_BYTES;
        let mut a = itoa::Buffer::new();
        let mut b = itoa::Buffer::new();
        // The tail of a loader's line: `,<loader>,<t>`, the same for the whole batch.
        let mut tail = Vec::new();
        if let (Some(l), Some(t)) = (shared.loader, t_us) {
            tail.push(b',');
            tail.extend_from_slice(a.format(l).as_bytes());
            tail.push(b',');
            tail.extend_from_slice(a.format(t).as_bytes());
        }
        for (k, s) in entries {
            buf.extend_from_slice(a.format(k).as_bytes());
            buf.push(b',');
            buf.extend_from_slice(b.format(s).as_bytes());
            buf.extend_from_slice(&tail);
            buf.push(b'\n');
        }
        let wake = below && buf.len() >= WAKE_BYTES;
        drop(buf);
        if wake && !shared.woken.swap(true, Ordering::SeqCst) {
            shared.writer_thread.unpark();
        }
        Ok(true)
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

    #[tokio::test]
    async fn a_loaders_lines_carry_its_index_and_the_commit_time() {
        let dir = tempfile::tempdir().unwrap();
        let logs = StreamLogs::create_for(dir.path(), &["a".into()], Some(3)).unwrap();
        let a = logs.log(0);
        a.append_at([(1, 0), (1, 1)].into_iter(), 1_700_000_000_000_123)
            .await
            .unwrap();
        a.append([(2, 0)].into_iter()).await.unwrap();
        logs.close().await.unwrap();
        let text = std::fs::read_to_string(dir.path().join("a.log")).unwrap();
        assert_eq!(
            text,
            "1,0,3,1700000000000123\n1,1,3,1700000000000123\n2,0\n"
        );
        // One loader: `append_at` writes the plain line.
        let logs = StreamLogs::create(dir.path(), &["b".into()]).unwrap();
        logs.log(0)
            .append_at([(5, 2)].into_iter(), 9)
            .await
            .unwrap();
        logs.close().await.unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join("b.log")).unwrap(),
            "5,2\n"
        );
    }

    #[tokio::test]
    async fn a_buffer_that_reaches_wake_bytes_wakes_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        // A writer that would sleep for an hour: only a wake-up brings another pass.
        let logs = StreamLogs::create_with_period(
            dir.path(),
            &["a".into()],
            None,
            std::time::Duration::from_secs(3600),
        )
        .unwrap();
        let a = logs.log(0);
        let passes = || logs.shared.passes.load(Ordering::Relaxed);
        // The writer's first pass, at its start, must not take the lines below.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while passes() == 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        assert!(passes() > 0, "the writer's first pass");
        // Lines of 13 bytes (`1000,1NNNNNN` and the newline), just short of WAKE_BYTES.
        let n = (WAKE_BYTES / 13 - 1) as i64;
        a.append((0..n).map(|s| (1000, 1_000_000 + s)))
            .await
            .unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let before = passes();
        // Ten more lines take the buffer past WAKE_BYTES: that append wakes the writer.
        a.append((n..n + 10).map(|s| (1000, 1_000_000 + s)))
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while passes() == before && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert!(
            passes() > before,
            "10 s after a buffer reached WAKE_BYTES the writer has not made a pass"
        );
        logs.close().await.unwrap();
        let text = std::fs::read_to_string(dir.path().join("a.log")).unwrap();
        assert_eq!(text.lines().count() as i64, n + 10);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_passes_of_the_writer_keep_a_streams_lines_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let logs = StreamLogs::create(dir.path(), &["a".into()]).unwrap();
        let a = logs.log(0);
        // Batches of 1000 lines of ~16 bytes: 2.5 buffers' worth in all.
        let batches = (BUFFER_LIMIT * 5 / 2) / 16_000 + 1;
        for n in 0..batches as i64 {
            a.append((0..1000).map(|i| (1_000_000_000, n * 1000 + i)))
                .await
                .unwrap();
        }
        logs.close().await.unwrap();
        let text = std::fs::read_to_string(dir.path().join("a.log")).unwrap();
        let mut want = 0i64;
        for line in text.lines() {
            assert_eq!(line, format!("1000000000,{want}"));
            want += 1;
        }
        assert_eq!(want, batches as i64 * 1000);
    }
}
