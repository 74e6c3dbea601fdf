//! Exclusivity races of a system's bare read path, measured without the adapter.
//!
//! An adapter may guard its read path (pgmq's per-stream in-flight key set defers a
//! row whose key another reader still holds), so a race in the system's own grouped
//! read never reaches the checker. A system whose adapter has such a guard offers an
//! [`ExclusivityProbe`] ([`crate::Broker::exclusivity_probe`]): concurrent readers
//! call the system's read path directly, with no guard, against a queue of many keys
//! with a backlog kept topped up; each reader holds what it read for a short
//! processing time, then deletes it. The [`Ledger`] counts what the guard would have
//! seen: a read that hands a reader rows of a key another reader still holds.
//!
//! A *breach* is one (read, key) where the key is held by another reader whose rows
//! are read, not yet expired (their visibility timeout), and whose delete has not yet
//! been sent: both readers then hold rows of the key at once, and the system promised
//! otherwise. A conflict with a holder whose delete is on the wire is *ambiguous*
//! (the delete may have committed before the read's snapshot: a legitimate hand-over)
//! and counted apart, never as a breach. Every conflicting row, breach or ambiguous,
//! is a row the adapter's guard would have deferred (`deferred_rows`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Serialize;

/// What one probe run does.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RacePlan {
    /// The read function (one of [`ExclusivityProbe::read_fns`]).
    pub read_fn: String,
    /// Concurrent readers.
    pub readers: usize,
    /// The measured window.
    pub window: Duration,
    /// Distinct keys (groups) in the queue.
    pub keys: u64,
    /// Rows kept waiting in the queue (topped up every few ms).
    pub backlog: u64,
    /// Rows asked for per read.
    pub read_qty: u32,
    /// How long a reader holds what it read before deleting it.
    pub hold: Duration,
    /// The visibility timeout of a read, whole seconds (>= 1).
    pub visibility_timeout_s: u32,
    /// The queue's name prefix (a fresh queue per run, dropped afterwards).
    pub queue_prefix: String,
}

impl RacePlan {
    /// Refuses a plan no run can honour (bounds keep a run finite and the server's
    /// connections sufficient).
    pub fn validate(&self) -> Result<(), RaceError> {
        let bad = |m: String| Err(RaceError::Plan(m));
        if !(1..=128).contains(&self.readers) {
            return bad(format!("readers {}: give 1 to 128", self.readers));
        }
        if self.window.is_zero() || self.window > Duration::from_secs(3600) {
            return bad(format!("window {:?}: give 1 s to 1 h", self.window));
        }
        if !(1..=1_000_000).contains(&self.keys) {
            return bad(format!("keys {}: give 1 to 1 000 000", self.keys));
        }
        if !(1..=10_000_000).contains(&self.backlog) {
            return bad(format!("backlog {}: give 1 to 10 000 000", self.backlog));
        }
        if !(1..=10_000).contains(&self.read_qty) {
            return bad(format!("read_qty {}: give 1 to 10 000", self.read_qty));
        }
        if self.hold > Duration::from_secs(10) {
            return bad(format!("hold {:?}: at most 10 s", self.hold));
        }
        if self.visibility_timeout_s == 0 {
            return bad("visibility timeout: at least 1 s".into());
        }
        if self.queue_prefix.is_empty()
            || !self
                .queue_prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return bad(format!(
                "queue prefix {:?}: [a-z0-9_]+ only",
                self.queue_prefix
            ));
        }
        Ok(())
    }
}

/// What one probe run saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RaceReport {
    pub read_fn: String,
    pub readers: usize,
    /// The measured window, seconds (as run).
    pub window_s: f64,
    /// Read calls, and those that returned no row.
    pub reads: u64,
    pub empty_reads: u64,
    /// Rows handed out, and rows deleted.
    pub rows_read: u64,
    pub rows_deleted: u64,
    /// Rows the system handed out again (its read count > 1).
    pub rows_redelivered: u64,
    /// Reads that handed a reader rows of a key another reader held (see the module).
    pub breaches: u64,
    /// Distinct keys with at least one breach.
    pub breached_keys: u64,
    /// Conflicts with a holder whose delete was on the wire (not breaches).
    pub ambiguous: u64,
    /// Rows of every conflict: what an in-flight key guard would have deferred.
    pub deferred_rows: u64,
    /// Failed calls (read, delete, top-up), each retried after a pause.
    pub errors: u64,
    /// The queue's depth at the end of the window.
    pub depth_end: u64,
}

impl RaceReport {
    /// Breaches per 90 s (the seed's window), scaled linearly from this window.
    pub fn breaches_per_90s(&self) -> f64 {
        if self.window_s > 0.0 {
            self.breaches as f64 * 90.0 / self.window_s
        } else {
            0.0
        }
    }

    /// Rows read per second of the window.
    pub fn rows_per_s(&self) -> f64 {
        if self.window_s > 0.0 {
            self.rows_read as f64 / self.window_s
        } else {
            0.0
        }
    }
}

/// Why a probe run failed.
#[derive(Debug, thiserror::Error)]
pub enum RaceError {
    #[error("race plan: {0}")]
    Plan(String),
    #[error("read function {got:?} unknown here: give one of {known}")]
    UnknownReadFn { got: String, known: String },
    #[error("{0}")]
    Broker(#[from] crate::BrokerError),
}

/// A system's bare read path, driven by concurrent readers without the adapter's
/// guard (the module doc).
#[async_trait]
pub trait ExclusivityProbe: Send + Sync {
    /// The read functions it can drive, the grouped ones first; the last may be an
    /// ungrouped control that promises no exclusivity at all.
    fn read_fns(&self) -> Vec<&'static str>;
    /// What the probe talks to, for the report (its endpoint, passwords redacted).
    fn describe(&self) -> String;
    /// The server's product and version, and the queue extension's (for the record).
    async fn versions(&self) -> Result<Vec<(String, String)>, RaceError>;
    /// One run: a fresh queue, its backlog, `plan.readers` readers for `plan.window`,
    /// the queue dropped afterwards.
    async fn run(&self, plan: &RacePlan) -> Result<RaceReport, RaceError>;
}

/// One reader's hold on a key.
#[derive(Debug, Clone)]
struct Hold {
    reader: usize,
    rows: u64,
    expires: Instant,
    deleting: bool,
}

/// Who holds which key: what the readers share. A reader calls [`Ledger::read`]
/// as soon as a read returns, [`Ledger::deleting`] just before it sends the delete
/// and [`Ledger::release`] once the delete has returned.
#[derive(Debug, Default)]
pub struct Ledger {
    held: HashMap<String, Vec<Hold>>,
    breached: std::collections::HashSet<String>,
    pub breaches: u64,
    pub ambiguous: u64,
    pub deferred_rows: u64,
}

impl Ledger {
    /// `reader` was handed `rows` rows of `key` at `now`, invisible to others until
    /// `now + vt`. Counts a breach when another reader holds the key, its lease
    /// running and its delete not sent; an ambiguous conflict when its delete is on
    /// the wire. Returns whether this read breached.
    pub fn read(
        &mut self,
        reader: usize,
        key: &str,
        rows: u64,
        now: Instant,
        vt: Duration,
    ) -> bool {
        let holds = self.held.entry(key.to_string()).or_default();
        holds.retain(|h| h.expires > now);
        let mut breach = false;
        let mut conflict = false;
        for h in holds.iter().filter(|h| h.reader != reader) {
            conflict = true;
            breach |= !h.deleting;
        }
        if conflict {
            self.deferred_rows += rows;
            if breach {
                self.breaches += 1;
                self.breached.insert(key.to_string());
            } else {
                self.ambiguous += 1;
            }
        }
        holds.push(Hold {
            reader,
            rows,
            expires: now + vt,
            deleting: false,
        });
        breach
    }

    /// `reader` is about to send the delete of its rows of `key`.
    pub fn deleting(&mut self, reader: usize, key: &str) {
        if let Some(hs) = self.held.get_mut(key) {
            for h in hs.iter_mut().filter(|h| h.reader == reader) {
                h.deleting = true;
            }
        }
    }

    /// `reader`'s delete of its rows of `key` returned: it holds the key no more.
    pub fn release(&mut self, reader: usize, key: &str) {
        if let Some(hs) = self.held.get_mut(key) {
            hs.retain(|h| h.reader != reader);
            if hs.is_empty() {
                self.held.remove(key);
            }
        }
    }

    /// Distinct keys that breached.
    pub fn breached_keys(&self) -> u64 {
        self.breached.len() as u64
    }

    /// Rows held right now, by any reader (a check: 0 once every reader stopped).
    pub fn rows_held(&self) -> u64 {
        self.held.values().flatten().map(|h| h.rows).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VT: Duration = Duration::from_secs(30);

    #[test]
    fn two_readers_holding_one_key_is_one_breach() {
        let mut l = Ledger::default();
        let t = Instant::now();
        assert!(!l.read(0, "k1", 2, t, VT));
        assert!(!l.read(1, "k2", 1, t, VT), "another key is no conflict");
        assert!(
            l.read(1, "k1", 3, t, VT),
            "reader 1 takes k1 while 0 holds it"
        );
        assert_eq!((l.breaches, l.ambiguous, l.deferred_rows), (1, 0, 3));
        assert_eq!(l.breached_keys(), 1);
        assert_eq!(l.rows_held(), 6);
    }

    #[test]
    fn a_released_key_is_free_and_a_delete_on_the_wire_is_ambiguous() {
        let mut l = Ledger::default();
        let t = Instant::now();
        l.read(0, "k", 1, t, VT);
        l.deleting(0, "k");
        assert!(
            !l.read(1, "k", 1, t, VT),
            "0's delete may have committed first"
        );
        assert_eq!((l.breaches, l.ambiguous, l.deferred_rows), (0, 1, 1));
        l.release(0, "k");
        l.release(1, "k");
        assert!(!l.read(2, "k", 1, t, VT), "nobody holds k");
        assert_eq!(l.breaches, 0);
        l.release(2, "k");
        assert_eq!(l.rows_held(), 0);
    }

    #[test]
    fn an_expired_lease_is_a_redelivery_not_a_breach() {
        let mut l = Ledger::default();
        let t = Instant::now();
        l.read(0, "k", 1, t, Duration::from_secs(1));
        assert!(!l.read(1, "k", 1, t + Duration::from_secs(2), VT));
        assert_eq!((l.breaches, l.ambiguous), (0, 0));
    }

    #[test]
    fn plans_out_of_bounds_are_refused() {
        let ok = RacePlan {
            read_fn: "f".into(),
            readers: 4,
            window: Duration::from_secs(5),
            keys: 100,
            backlog: 1000,
            read_qty: 10,
            hold: Duration::from_millis(5),
            visibility_timeout_s: 30,
            queue_prefix: "cbf3_".into(),
        };
        assert!(ok.validate().is_ok());
        for bad in [
            RacePlan {
                readers: 0,
                ..ok.clone()
            },
            RacePlan {
                readers: 1000,
                ..ok.clone()
            },
            RacePlan {
                window: Duration::ZERO,
                ..ok.clone()
            },
            RacePlan {
                read_qty: 0,
                ..ok.clone()
            },
            RacePlan {
                queue_prefix: "x; drop".into(),
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
