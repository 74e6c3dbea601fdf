//! crossbench checker: proves, per stream and per property, that nothing was lost, reordered,
//! duplicated or invented.
//!
//! Inputs are the stream logs `<dir>/<topic>_<group>.log` (`<prop>,<seq>` per processed message,
//! in processing order) and `<dir>/produced.meta` (highest acknowledged seq per flow and
//! property). See `FORMAT.md` for the formats and the verdict JSON.
//!
//! Every log is read once, streaming, one file per worker thread. The per-(stream, property)
//! state is 16 bytes on the clean path; only anomalous properties get an exact seq set.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

mod intervals;
mod lost;
mod meta;
mod scan;
pub mod synth;

pub use lost::{union_len, Range};
pub use meta::{
    parse_produced, read_produced, reference_streams, Failed, Indeterminate, MetaFormat, Produced,
    ProducedFlow,
};
pub use scan::PropState;

use scan::{FlowTable, ScanOutput, Scanner, StreamCounts, MAX_MALFORMED_EXAMPLES};

/// Outcome of scanning one log (`None`: file absent).
type ScanResult = Result<Option<ScanOutput>, CheckError>;

/// Version of the [`Verdict`] JSON shape.
pub const SCHEMA_VERSION: u32 = 1;

/// One consumer stream: log file `<dir>/<name>.log`, judged against produced map `flow`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamSpec {
    /// `<topic>_<group>`.
    pub name: String,
    /// Flow whose produced map applies ("A", "B", "S", …).
    pub flow: String,
}

impl StreamSpec {
    pub fn new(name: impl Into<String>, flow: impl Into<String>) -> Self {
        StreamSpec {
            name: name.into(),
            flow: flow.into(),
        }
    }
}

/// How the drain phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DrainOutcome {
    /// Every consumer reached the produced frontier.
    CaughtUp,
    /// The grace period ran out with no progress: whatever is missing is lost.
    Grace,
    /// The run was stopped before the drain could finish: missing tails are in flight.
    CutShort,
}

impl DrainOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            DrainOutcome::CaughtUp => "caught-up",
            DrainOutcome::Grace => "grace",
            DrainOutcome::CutShort => "cut-short",
        }
    }
}

/// Options for [`verify`] / [`verify_dir`].
#[derive(Debug, Clone, Default)]
pub struct VerifyOptions {
    /// The scenario declared at-least-once acceptable: duplicates are counted but do not fail.
    pub allow_duplicates: bool,
    /// Worker threads (files are read in parallel); 0 = available parallelism.
    pub threads: usize,
    /// Prefix prepended to topic names of the reference's 12 streams (legacy directories).
    pub legacy_prefix: String,
    /// Legacy directories: number of properties; a delivered property at or above it is a
    /// phantom even when the meta has no data lines. Defaults to `properties=` of the header.
    pub legacy_properties: Option<u64>,
}

/// Input errors (the CLI exits 2 on these).
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}:{line}: {message}", path.display())]
    BadMeta {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("no streams to verify")]
    NoStreams,
    #[error("stream {0} declared twice")]
    DuplicateStream(String),
    /// Neither a crossbench cell (no `produced.meta`) nor a reference-harness log
    /// directory (none of its stream logs under the given prefix).
    #[error(
        "{}: not a cell directory: it has no produced.meta (the record `crossbench run` writes) and none of the reference harness's 12 stream logs ({}); give the directory `crossbench run` wrote, or --prefix P when the reference run's topics carry a prefix",
        path.display(),
        expected.join(", ")
    )]
    NotACell {
        path: PathBuf,
        expected: Vec<String>,
    },
}

/// One malformed log line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Malformed {
    /// Log file name (relative to the verified directory).
    pub file: String,
    /// 1-based line number.
    pub line: u64,
    /// First 80 bytes of the line (lossy UTF-8).
    pub snippet: String,
}

/// Verdict for one stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamVerdict {
    pub name: String,
    pub flow: String,
    /// The log file was absent.
    pub missing: bool,
    /// Ack errors of this stream (`None`: legacy meta, only a run-wide count exists).
    pub ack_errors: Option<u64>,
    /// Well-formed lines (deliveries).
    pub delivered: u64,
    /// Distinct (property, seq) pairs delivered.
    pub unique: u64,
    /// Deliveries of an already delivered (property, seq): `delivered - unique`.
    pub duplicates: u64,
    pub properties_seen: u64,
    /// Produced seqs at or below the delivered frontier of their property never delivered.
    pub gaps: u64,
    /// First deliveries of a seq lower than one already delivered (same property).
    pub order_violations: u64,
    /// Order violations are excused (ack errors in this stream, or legacy global excuse).
    pub excused_order_violations: bool,
    /// Produced seqs above the delivered frontier, drain caught up or timed out: lost.
    pub lost_tail: u64,
    /// Produced seqs above the delivered frontier, run cut short / drain unknown: not judged.
    pub in_flight: u64,
    /// Whether the tail was judged (drain caught-up/grace and produced data for the flow).
    pub tail_judged: bool,
    /// Distinct delivered seqs never produced (above max, below base, or of a phantom property).
    pub phantoms: u64,
    /// Delivered properties the meta never produced for this flow.
    pub phantom_properties: u64,
    /// Produced properties with no delivery at all (their whole range is in the tail figure).
    pub never_delivered_properties: u64,
    pub malformed_lines: u64,
    /// Acknowledged, never delivered: `gaps + lost_tail` (Jepsen's lost writes). Fails
    /// unless the meta says the tier allowed loss (`loss_allowed`).
    #[serde(default)]
    pub lost_acked: u64,
    /// Indeterminate publishes (timed out, connection lost) that were delivered.
    #[serde(default)]
    pub recovered: u64,
    /// Indeterminate publishes never delivered: not loss.
    #[serde(default)]
    pub unseen_at_end: u64,
    /// Of `recovered`, those first delivered after a later seq of their property: the
    /// loader had given up on them (timed out, connection lost) and published their
    /// successors, so their late arrival is no reorder by the system. Not order
    /// violations; reported apart.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub late_indeterminate: u64,
    /// Publishes the system refused, yet delivered. Always fails.
    #[serde(default)]
    pub aborted_reads: u64,
    /// Consumer reconnects or rebalances the stream logged (`reconnects=`).
    #[serde(default)]
    pub reconnects: u64,
    /// Order violations of a stream that reconnected: reported apart, not failing.
    #[serde(default)]
    pub order_violations_at_reconnect: u64,
    /// A merged log of several loaders: consecutive deliveries of one property by two
    /// loaders.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub handoffs: u64,
    /// Of `order_violations`, those at a hand-off. They fail like any other when the
    /// loaders' clocks are trusted (one host, or a known offset bound ≤ 1 ms), and are
    /// reported apart when the meta says `clocks=untrusted`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub order_violations_at_handoff: u64,
    pub pass: bool,
    /// `PASS`, `PASS(dups)`, `PASS(excused)`, `PASS(in-flight)`, `FAIL`, `FAIL(empty)`,
    /// `FAIL(missing)`.
    pub label: String,
    /// Failing causes in words (empty when passing).
    pub causes: Vec<String>,
    /// The first gaps (at most 20 a stream): which seqs of which property were
    /// acknowledged and never delivered, while later ones were.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gap_examples: Vec<GapRange>,
}

/// Seqs `from..=to` of property `prop`, missing from a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GapRange {
    pub prop: u64,
    pub from: i64,
    pub to: i64,
}

impl std::fmt::Display for GapRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.from == self.to {
            write!(f, "key {} seq {}", self.prop, self.from)
        } else {
            write!(f, "key {} seqs {}-{}", self.prop, self.from, self.to)
        }
    }
}

/// Sums over streams.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Totals {
    pub streams: u64,
    pub failing_streams: u64,
    pub missing_streams: u64,
    pub empty_streams: u64,
    pub delivered: u64,
    pub unique: u64,
    pub duplicates: u64,
    pub properties_seen: u64,
    pub gaps: u64,
    pub order_violations: u64,
    pub excused_order_violations: u64,
    pub lost_tail: u64,
    pub in_flight: u64,
    pub phantoms: u64,
    pub phantom_properties: u64,
    pub never_delivered_properties: u64,
    pub malformed_lines: u64,
    #[serde(default)]
    pub lost_acked: u64,
    /// Lost messages counted once: the distinct (flow, property, seq) acknowledged and
    /// never delivered to at least one stream, where `lost_acked` counts each once per
    /// stream that misses it (a message lost on a first hop is missing from every
    /// stream after it). `None`: a stream had too many missing ranges to count exactly,
    /// or the verdict predates the count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_messages: Option<u64>,
    #[serde(default)]
    pub recovered: u64,
    #[serde(default)]
    pub unseen_at_end: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub late_indeterminate: u64,
    #[serde(default)]
    pub aborted_reads: u64,
    #[serde(default)]
    pub order_violations_at_reconnect: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub handoffs: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub order_violations_at_handoff: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The checker's verdict (embedded into result.json under `"verdict"`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub schema_version: u32,
    pub pass: bool,
    /// The meta says the drain was cut short: missing tails are in flight, not loss.
    pub cut_short: bool,
    pub dir: String,
    pub meta_format: MetaFormat,
    pub base: i64,
    pub drain: Option<DrainOutcome>,
    pub delivery: Option<String>,
    pub duplicates_allowed: bool,
    /// Run-wide ack errors from the meta header.
    pub total_ack_errors: u64,
    /// Why acknowledged writes may be lost in this cell (`loss_allowed=` of the meta: the
    /// tier promises less than the fault injected). `None`: every loss fails.
    #[serde(default)]
    pub loss_allowed: Option<String>,
    /// Failing causes first (`"<stream>: 1 gap, 2 order violations"`, `"malformed lines: …"`),
    /// then caveats prefixed `note: `.
    pub reasons: Vec<String>,
    pub streams: Vec<StreamVerdict>,
    pub totals: Totals,
    /// At most 100 examples.
    pub malformed: Vec<Malformed>,
    /// All malformed lines, including those without an example.
    pub malformed_count: u64,
}

/// Read `dir/produced.meta` (absent → legacy defaults) and verify the declared streams (the
/// reference's 12 when the meta declares none).
pub fn verify_dir(dir: &Path, opts: &VerifyOptions) -> Result<Verdict, CheckError> {
    let md = std::fs::metadata(dir).map_err(|source| CheckError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    if !md.is_dir() {
        return Err(CheckError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a directory"),
        });
    }
    let meta_path = dir.join("produced.meta");
    let produced = if meta_path.exists() {
        read_produced(&meta_path)?
    } else {
        Produced::missing()
    };
    let streams = if produced.streams.is_empty() {
        reference_streams(&opts.legacy_prefix)
    } else {
        produced.streams.clone()
    };
    if produced.format == MetaFormat::Missing
        && !streams
            .iter()
            .any(|s| dir.join(format!("{}.log", s.name)).exists())
    {
        return Err(CheckError::NotACell {
            path: dir.to_path_buf(),
            expected: streams.iter().map(|s| format!("{}.log", s.name)).collect(),
        });
    }
    verify(dir, &produced, &streams, opts)
}

fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Verify `streams` in `dir` against `produced`.
pub fn verify(
    dir: &Path,
    produced: &Produced,
    streams: &[StreamSpec],
    opts: &VerifyOptions,
) -> Result<Verdict, CheckError> {
    if streams.is_empty() {
        return Err(CheckError::NoStreams);
    }
    let mut names = BTreeSet::new();
    for s in streams {
        if !names.insert(s.name.as_str()) {
            return Err(CheckError::DuplicateStream(s.name.clone()));
        }
    }
    let base = produced.base;
    let per_stream_ack = produced.per_stream_ack_errors();
    let duplicates_allowed =
        opts.allow_duplicates || produced.delivery.as_deref() == Some("at-least-once");
    // A merged cell of several loaders whose clocks are not trusted (`# fleet …
    // clocks=untrusted`).
    let clocks_untrusted = produced
        .header
        .get("fleet.clocks")
        .is_some_and(|v| v == "untrusted");
    let drain_judges_tail = matches!(
        produced.drain,
        Some(DrainOutcome::CaughtUp | DrainOutcome::Grace)
    );
    let legacy_bound = if per_stream_ack {
        None
    } else {
        opts.legacy_properties.or_else(|| produced.properties())
    };

    // Produced tables, one per flow used.
    let mut tables: BTreeMap<&str, FlowTable> = BTreeMap::new();
    for s in streams {
        tables
            .entry(s.flow.as_str())
            .or_insert_with(|| FlowTable::build(produced, &s.flow, legacy_bound));
    }
    let empty: Vec<(u64, i64)> = Vec::new();

    // Scan files in parallel: each worker takes the next unscanned file.
    let threads = match opts.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    }
    .clamp(1, streams.len());
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<ScanResult>>> =
        Mutex::new((0..streams.len()).map(|_| None).collect());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut scanner = Scanner::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= streams.len() {
                        break;
                    }
                    let s = &streams[i];
                    let file = format!("{}.log", s.name);
                    let props = produced.flows.get(&s.flow).map_or(&empty, |f| &f.max_seq);
                    let r = scanner.scan_file(
                        &dir.join(&file),
                        &file,
                        base,
                        &tables[s.flow.as_str()],
                        props,
                    );
                    results.lock().expect("results lock")[i] = Some(r);
                }
            });
        }
    });
    let results = results.into_inner().expect("results lock");

    let mut verdict = Verdict {
        schema_version: SCHEMA_VERSION,
        pass: true,
        cut_short: produced.drain == Some(DrainOutcome::CutShort),
        dir: dir.display().to_string(),
        meta_format: produced.format,
        base,
        drain: produced.drain,
        delivery: produced.delivery.clone(),
        duplicates_allowed,
        total_ack_errors: produced.total_ack_errors,
        loss_allowed: produced.header.get("loss_allowed").cloned(),
        reasons: Vec::new(),
        streams: Vec::with_capacity(streams.len()),
        totals: Totals::default(),
        malformed: Vec::new(),
        malformed_count: 0,
    };
    let mut notes: Vec<String> = Vec::new();
    let mut malformed_files = 0u64;
    let mut losses = lost::FlowLosses::default();

    for (s, r) in streams.iter().zip(results) {
        let out = r.expect("every stream scanned")?;
        let table = &tables[s.flow.as_str()];
        let ack_errors = if per_stream_ack {
            Some(
                produced
                    .stream_ack_errors
                    .get(&s.name)
                    .copied()
                    .unwrap_or(0),
            )
        } else {
            None
        };
        let excuse = ack_errors.unwrap_or(produced.total_ack_errors) > 0;
        let reconnects = produced
            .stream_reconnects
            .get(&s.name)
            .copied()
            .unwrap_or(0);
        let at_reconnect = !excuse && reconnects > 0;
        // A merged log whose loaders' clocks are not trusted: the order across a
        // hand-off is not known, so violations there are reported apart.
        let handoff_apart = if clocks_untrusted && !excuse && !at_reconnect {
            out.as_ref()
                .map_or(0, |o| o.counts.order_violations_at_handoff)
        } else {
            0
        };
        let loss_allowed = verdict.loss_allowed.is_some();
        let tail_judged = drain_judges_tail && table.has_data;
        let (missing, c) = match out {
            None => (true, StreamCounts::default()),
            Some(o) => {
                if o.counts.malformed_lines > 0 {
                    malformed_files += 1;
                }
                verdict.malformed_count += o.counts.malformed_lines;
                for m in o.malformed {
                    if verdict.malformed.len() < MAX_MALFORMED_EXAMPLES {
                        verdict.malformed.push(m);
                    }
                }
                (false, o.counts)
            }
        };
        let (lost_tail, in_flight) = if tail_judged {
            (c.tail, 0)
        } else {
            (0, c.tail)
        };
        let empty_fails = !missing && c.lines == 0 && (table.has_data || !per_stream_ack);
        losses.add(s.flow.as_str(), &c.gap_ranges);
        if tail_judged {
            losses.add(s.flow.as_str(), &c.tail_ranges);
        }

        let mut causes = Vec::new();
        if missing {
            causes.push("missing log".to_string());
        }
        if empty_fails {
            causes.push("empty (0 lines)".to_string());
        }
        if c.gaps > 0 && !loss_allowed {
            causes.push(plural(c.gaps, "gap", "gaps"));
        }
        if c.aborted_reads > 0 {
            causes.push(format!(
                "{} (refused by the system, yet delivered)",
                plural(c.aborted_reads, "aborted read", "aborted reads")
            ));
        }
        let failing_violations = c.order_violations - handoff_apart;
        if failing_violations > 0 && !excuse && !at_reconnect {
            causes.push(plural(
                failing_violations,
                "order violation",
                "order violations",
            ));
        }
        if c.duplicates > 0 && !duplicates_allowed {
            causes.push(plural(c.duplicates, "duplicate", "duplicates"));
        }
        if lost_tail > 0 && !loss_allowed {
            let mut t = format!("{lost_tail} lost in tail");
            if c.never_delivered_properties > 0 {
                let _ = write!(
                    t,
                    " ({} never delivered)",
                    plural(c.never_delivered_properties, "property", "properties")
                );
            }
            causes.push(t);
        }
        if c.phantoms > 0 {
            let mut t = plural(c.phantoms, "phantom", "phantoms");
            if c.phantom_properties > 0 {
                let _ = write!(
                    t,
                    " ({})",
                    plural(
                        c.phantom_properties,
                        "phantom property",
                        "phantom properties"
                    )
                );
            }
            causes.push(t);
        }
        if c.malformed_lines > 0 {
            causes.push(plural(
                c.malformed_lines,
                "malformed line",
                "malformed lines",
            ));
        }
        let pass = causes.is_empty();
        let label = if missing {
            "FAIL(missing)"
        } else if empty_fails {
            "FAIL(empty)"
        } else if !pass {
            "FAIL"
        } else if c.gaps > 0 || lost_tail > 0 {
            "PASS(loss-allowed)"
        } else if c.order_violations > 0 {
            "PASS(excused)"
        } else if c.duplicates > 0 {
            "PASS(dups)"
        } else if in_flight > 0 {
            "PASS(in-flight)"
        } else {
            "PASS"
        };
        if handoff_apart > 0 {
            notes.push(format!(
                "note: {}: {} at hand-offs between loaders reported apart (the loaders' clocks are not trusted, so the order across a hand-off is not known)",
                s.name,
                plural(handoff_apart, "order violation", "order violations"),
            ));
        }
        if c.order_violations > 0 && at_reconnect {
            notes.push(format!(
                "note: {}: {} reported apart ({} in this stream)",
                s.name,
                plural(c.order_violations, "order violation", "order violations"),
                plural(reconnects, "reconnect", "reconnects")
            ));
        }
        if c.order_violations > 0 && excuse {
            if let Some(a) = ack_errors {
                notes.push(format!(
                    "note: {}: {} excused ({} in this stream)",
                    s.name,
                    plural(c.order_violations, "order violation", "order violations"),
                    plural(a, "ack error", "ack errors")
                ));
            }
        }
        if !pass {
            verdict
                .reasons
                .push(format!("{}: {}", s.name, causes.join(", ")));
        }
        let gap_examples = c.gap_examples.clone();
        if !gap_examples.is_empty() {
            let shown: Vec<String> = gap_examples.iter().take(5).map(|g| g.to_string()).collect();
            notes.push(format!(
                "note: {}: first gaps: {}{}",
                s.name,
                shown.join(", "),
                if gap_examples.len() > shown.len() {
                    ", …"
                } else {
                    ""
                }
            ));
        }

        let t = &mut verdict.totals;
        t.streams += 1;
        t.failing_streams += u64::from(!pass);
        t.missing_streams += u64::from(missing);
        t.empty_streams += u64::from(empty_fails);
        t.delivered += c.lines;
        t.unique += c.unique;
        t.duplicates += c.duplicates;
        t.properties_seen += c.properties_seen;
        // Seq-range counts may be near u64::MAX (a meta claiming maxSeq = i64::MAX): saturate.
        t.gaps = t.gaps.saturating_add(c.gaps);
        t.order_violations += c.order_violations;
        if excuse {
            t.excused_order_violations += c.order_violations;
        }
        t.lost_tail = t.lost_tail.saturating_add(lost_tail);
        t.in_flight = t.in_flight.saturating_add(in_flight);
        t.phantoms = t.phantoms.saturating_add(c.phantoms);
        t.phantom_properties += c.phantom_properties;
        t.never_delivered_properties += c.never_delivered_properties;
        t.malformed_lines += c.malformed_lines;
        let lost_acked = c.gaps.saturating_add(lost_tail);
        t.lost_acked = t.lost_acked.saturating_add(lost_acked);
        t.recovered += c.recovered;
        t.unseen_at_end = t.unseen_at_end.saturating_add(c.unseen_at_end);
        t.late_indeterminate += c.late_indeterminate;
        t.aborted_reads += c.aborted_reads;
        let at_reconnect_violations = if at_reconnect { c.order_violations } else { 0 };
        t.order_violations_at_reconnect += at_reconnect_violations;
        t.handoffs += c.handoffs;
        t.order_violations_at_handoff += c.order_violations_at_handoff;

        verdict.streams.push(StreamVerdict {
            name: s.name.clone(),
            flow: s.flow.clone(),
            missing,
            ack_errors,
            delivered: c.lines,
            unique: c.unique,
            duplicates: c.duplicates,
            properties_seen: c.properties_seen,
            gaps: c.gaps,
            order_violations: c.order_violations,
            excused_order_violations: c.order_violations > 0 && excuse,
            lost_tail,
            in_flight,
            tail_judged,
            phantoms: c.phantoms,
            phantom_properties: c.phantom_properties,
            never_delivered_properties: c.never_delivered_properties,
            malformed_lines: c.malformed_lines,
            lost_acked,
            recovered: c.recovered,
            unseen_at_end: c.unseen_at_end,
            late_indeterminate: c.late_indeterminate,
            aborted_reads: c.aborted_reads,
            reconnects,
            order_violations_at_reconnect: at_reconnect_violations,
            handoffs: c.handoffs,
            order_violations_at_handoff: c.order_violations_at_handoff,
            pass,
            label: label.to_string(),
            causes,
            gap_examples,
        });
    }

    if verdict.malformed_count > 0 {
        let first = &verdict.malformed[0];
        verdict.reasons.push(format!(
            "malformed lines: {} in {} (first: {}:{})",
            verdict.malformed_count,
            plural(malformed_files, "file", "files"),
            first.file,
            first.line
        ));
    }
    verdict.pass = verdict.streams.iter().all(|s| s.pass) && verdict.malformed_count == 0;
    verdict.totals.lost_messages = losses.distinct();

    // Caveats.
    let t = &verdict.totals;
    if produced.format == MetaFormat::Missing {
        notes.push(
            "note: no produced.meta: base 1 and ackErr 0 assumed; lost tail cannot be judged"
                .to_string(),
        );
    } else {
        let no_data: BTreeSet<&str> = streams
            .iter()
            .filter(|s| !tables[s.flow.as_str()].has_data)
            .map(|s| s.flow.as_str())
            .collect();
        for f in no_data {
            notes.push(format!(
                "note: no produced data for flow {f}: lost tail cannot be judged for its streams"
            ));
        }
    }
    match produced.drain {
        Some(DrainOutcome::CutShort) => notes.push(format!(
            "note: run cut short (drain=cut-short): {} not yet delivered counted as in flight, not loss",
            plural(t.in_flight, "seq", "seqs")
        )),
        None => notes.push(format!(
            "note: drain outcome not recorded{}: {} above the delivered frontier counted as in flight, not loss",
            if per_stream_ack { "" } else { " (legacy meta)" },
            plural(t.in_flight, "seq", "seqs")
        )),
        Some(_) => {}
    }
    if !per_stream_ack && produced.total_ack_errors > 0 {
        notes.push(format!(
            "note: legacy meta: ack errors not per stream; excuse applied globally as the reference did (ackErr={}, {} excused)",
            produced.total_ack_errors,
            plural(t.excused_order_violations, "order violation", "order violations")
        ));
    }
    if t.recovered + t.unseen_at_end > 0 {
        notes.push(format!(
            "note: indeterminate publishes (timed out or connection lost before an answer): {} delivered (recovered), {} never delivered (unseen at end; not counted as loss)",
            t.recovered, t.unseen_at_end
        ));
    }
    if t.late_indeterminate > 0 {
        notes.push(format!(
            "note: {} of the recovered arrived after a later seq of their property: the loader had given up on them before publishing that seq, so they are not counted as order violations",
            t.late_indeterminate
        ));
    }
    if let Some(why) = &verdict.loss_allowed {
        if t.lost_acked > 0 {
            notes.push(format!(
                "note: {} acknowledged but never delivered, allowed: {why}",
                plural(t.lost_acked, "seq", "seqs")
            ));
        }
    } else if t.lost_acked > 0 {
        notes.push(format!(
            "note: lost_acked={}{}: the system acknowledged these publishes and never delivered them (a finding about the system under test; the harness counts only acknowledged publishes)",
            t.lost_acked,
            match t.lost_messages {
                Some(n) if n != t.lost_acked => format!(
                    " over the streams, {}",
                    plural(n, "distinct message", "distinct messages")
                ),
                _ => String::new(),
            }
        ));
    }
    if duplicates_allowed && t.duplicates > 0 {
        notes.push(format!(
            "note: duplicates allowed ({}): {}",
            if opts.allow_duplicates {
                "scenario allows at-least-once"
            } else {
                "delivery=at-least-once"
            },
            plural(t.duplicates, "duplicate", "duplicates")
        ));
    }
    verdict.reasons.extend(notes);
    Ok(verdict)
}

impl Verdict {
    /// Human-readable table for stdout.
    pub fn render_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "=== VERIFIER dir={} base={} ackErr={} drain={} delivery={} meta={} ===",
            self.dir,
            self.base,
            self.total_ack_errors,
            self.drain.map_or("unknown", |d| d.as_str()),
            self.delivery.as_deref().unwrap_or("unspecified"),
            serde_json::to_value(self.meta_format)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
        );
        let _ = writeln!(
            s,
            "{:<34}{:>12}{:>12}{:>8}{:>8}{:>8}{:>10}{:>10}{:>8}{:>7}{:>8}  verdict",
            "stream",
            "lines",
            "unique",
            "dups",
            "gaps",
            "viols",
            "lost",
            "inflight",
            "phantom",
            "never",
            "ackErr"
        );
        let row = |s: &mut String, name: &str, v: [u64; 9], ack: Option<u64>, label: &str| {
            let _ = writeln!(
                s,
                "{:<34}{:>12}{:>12}{:>8}{:>8}{:>8}{:>10}{:>10}{:>8}{:>7}{:>8}  {}",
                name,
                v[0],
                v[1],
                v[2],
                v[3],
                v[4],
                v[5],
                v[6],
                v[7],
                v[8],
                ack.map_or("-".to_string(), |a| a.to_string()),
                label
            );
        };
        for st in &self.streams {
            row(
                &mut s,
                &st.name,
                [
                    st.delivered,
                    st.unique,
                    st.duplicates,
                    st.gaps,
                    st.order_violations,
                    st.lost_tail,
                    st.in_flight,
                    st.phantoms,
                    st.never_delivered_properties,
                ],
                st.ack_errors,
                &st.label,
            );
        }
        let t = &self.totals;
        row(
            &mut s,
            "TOTAL",
            [
                t.delivered,
                t.unique,
                t.duplicates,
                t.gaps,
                t.order_violations,
                t.lost_tail,
                t.in_flight,
                t.phantoms,
                t.never_delivered_properties,
            ],
            Some(self.total_ack_errors),
            if self.pass { "PASS" } else { "FAIL" },
        );
        if t.recovered + t.unseen_at_end + t.aborted_reads + t.order_violations_at_reconnect > 0
            || t.lost_acked > 0
        {
            let _ = writeln!(
                s,
                "lost_acked={} recovered={} unseen_at_end={} aborted_reads={} order_violations_at_reconnect={}",
                t.lost_acked,
                t.recovered,
                t.unseen_at_end,
                t.aborted_reads,
                t.order_violations_at_reconnect
            );
        }
        for m in self.malformed.iter().take(10) {
            let _ = writeln!(s, "malformed {}:{}: {:?}", m.file, m.line, m.snippet);
        }
        for r in &self.reasons {
            let _ = writeln!(s, "{r}");
        }
        if self.pass {
            let _ = writeln!(
                s,
                "VERDICT: PASS ({} streams, {} deliveries, 0 gaps, {} order violations excused, {} duplicates, {} in flight)",
                t.streams, t.delivered, t.excused_order_violations, t.duplicates, t.in_flight
            );
        } else {
            let _ = writeln!(
                s,
                "VERDICT: FAIL ({} of {} streams failing; gaps={} order-violations={} duplicates={} lost-tail={} phantoms={} aborted-reads={} malformed={})",
                t.failing_streams,
                t.streams,
                t.gaps,
                t.order_violations - t.excused_order_violations - t.order_violations_at_reconnect,
                t.duplicates,
                t.lost_tail,
                t.phantoms,
                t.aborted_reads,
                self.malformed_count
            );
        }
        s
    }
}
