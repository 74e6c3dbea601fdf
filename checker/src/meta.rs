//! Parser for `produced.meta` (crossbench v1, the reference Go harness header and the
//! older goload July header).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{CheckError, DrainOutcome, StreamSpec};

/// Which dialect a `produced.meta` was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetaFormat {
    /// `# crossbench produced.meta v1` (per-stream ack errors, drain outcome).
    CrossbenchV1,
    /// Reference Go harness header (`# ackErr=… base=… system=…`), global ack errors only.
    Reference,
    /// Older goload header (`# ackErr=… producedA=… producedB=… base=… ts=…`).
    GoloadJuly,
    /// No `produced.meta` at all (legacy directory): base 1, ackErr 0, nothing produced known.
    Missing,
}

/// Highest acknowledged seq per property for one flow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducedFlow {
    /// `(prop, max_seq)` sorted by prop, one entry per property, `max_seq >= base`.
    pub max_seq: Vec<(u64, i64)>,
}

impl ProducedFlow {
    /// Highest acknowledged seq of `prop`, if the property was produced.
    pub fn get(&self, prop: u64) -> Option<i64> {
        self.max_seq
            .binary_search_by_key(&prop, |&(p, _)| p)
            .ok()
            .map(|i| self.max_seq[i].1)
    }
}

/// Publishes whose outcome is unknown (timed out, connection lost before an answer): seqs
/// `seq..=to` of `prop`. Delivering one is `recovered`, not a phantom; never delivering one is
/// `unseen_at_end`, not a loss.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Indeterminate {
    pub flow: String,
    pub prop: u64,
    pub seq: i64,
    /// Last seq of the range (`seq` for one publish).
    pub to: i64,
}

/// Publishes the system definitely refused (or that were dropped unsent at their deadline):
/// seqs `seq..=to` of `prop`. Never required; delivering one is an `aborted_read` (FAIL).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failed {
    pub flow: String,
    pub prop: u64,
    pub seq: i64,
    /// Last seq of the range.
    pub to: i64,
}

/// Parsed `produced.meta`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Produced {
    pub format: MetaFormat,
    /// First seq of every property (0 with warm-up, else 1).
    pub base: i64,
    /// Flow name ("A", "B", "S", …) to produced maxima.
    pub flows: BTreeMap<String, ProducedFlow>,
    /// Ack errors per stream name (crossbench v1 only).
    pub stream_ack_errors: BTreeMap<String, u64>,
    /// Run-wide ack errors (`ackErr=` in the header).
    pub total_ack_errors: u64,
    pub drain: Option<DrainOutcome>,
    /// Streams declared by `# stream` lines, in order (empty for legacy dialects).
    pub streams: Vec<StreamSpec>,
    /// `delivery=` (exactly-once | at-least-once | at-most-once).
    pub delivery: Option<String>,
    /// Every `k=v` header token. Tokens on a line that starts with a bare word
    /// (`# invariants deliveries=…`) are keyed `<word>.<k>`.
    pub header: BTreeMap<String, String>,
    pub indeterminate: Vec<Indeterminate>,
    pub failed: Vec<Failed>,
    /// Consumer reconnects or rebalances per stream name (`reconnects=` of `# stream`):
    /// order violations of such a stream are reported apart.
    pub stream_reconnects: BTreeMap<String, u64>,
}

impl Produced {
    /// What a directory without `produced.meta` implies: base 1, no ack errors, nothing known.
    pub fn missing() -> Self {
        Produced {
            format: MetaFormat::Missing,
            base: 1,
            flows: BTreeMap::new(),
            stream_ack_errors: BTreeMap::new(),
            total_ack_errors: 0,
            drain: None,
            streams: Vec::new(),
            delivery: None,
            header: BTreeMap::new(),
            indeterminate: Vec::new(),
            failed: Vec::new(),
            stream_reconnects: BTreeMap::new(),
        }
    }

    /// `properties=` from the header, if present and numeric.
    pub fn properties(&self) -> Option<u64> {
        self.header.get("properties").and_then(|v| v.parse().ok())
    }

    /// True when ack errors are known per stream (crossbench v1), so the order excuse can be
    /// applied per stream rather than globally.
    pub fn per_stream_ack_errors(&self) -> bool {
        self.format == MetaFormat::CrossbenchV1
    }
}

const V1_MARKER: &str = "crossbench produced.meta";

fn bad(path: &Path, line: usize, message: impl Into<String>) -> CheckError {
    CheckError::BadMeta {
        path: path.to_path_buf(),
        line,
        message: message.into(),
    }
}

fn parse_kv(tok: &str) -> Option<(&str, &str)> {
    let (k, v) = tok.split_once('=')?;
    if k.is_empty() {
        None
    } else {
        Some((k, v))
    }
}

/// The `flow= prop= seq= [to=]` tokens of an `# indeterminate` or `# failed` line.
fn parse_range<'a>(toks: impl Iterator<Item = &'a str>) -> Option<(String, u64, i64, i64)> {
    let (mut flow, mut prop, mut seq, mut to) = (None, None, None, None);
    for t in toks {
        match parse_kv(t) {
            Some(("flow", v)) => flow = Some(v.to_string()),
            Some(("prop", v)) => prop = Some(v.parse::<u64>().ok()?),
            Some(("seq", v)) => seq = Some(v.parse::<i64>().ok().filter(|s| *s >= 0)?),
            Some(("to", v)) => to = Some(v.parse::<i64>().ok()?),
            _ => {}
        }
    }
    let seq = seq?;
    let to = to.unwrap_or(seq);
    (to >= seq).then_some(())?;
    Some((flow?, prop?, seq, to))
}

/// Parse `produced.meta` text. `path` is only used in error messages.
pub fn parse_produced(text: &str, path: &Path) -> Result<Produced, CheckError> {
    let mut p = Produced::missing();
    p.format = MetaFormat::Reference;
    let mut saw_v1 = false;
    let mut saw_produced_ab = false;
    let mut base_seen = false;
    let mut raw: BTreeMap<String, Vec<(u64, i64, usize)>> = BTreeMap::new();

    for (idx, line) in text.lines().enumerate() {
        let lineno = idx + 1;
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let rest = rest.trim();
            if let Some(ver) = rest.strip_prefix(V1_MARKER) {
                let ver = ver.trim();
                if ver != "v1" {
                    return Err(bad(
                        path,
                        lineno,
                        format!(
                            "unsupported produced.meta version {ver:?} (this checker reads v1)"
                        ),
                    ));
                }
                saw_v1 = true;
                continue;
            }
            let mut toks = rest.split_whitespace().peekable();
            let word = match toks.peek() {
                Some(t) if !t.contains('=') => toks.next(),
                _ => None,
            };
            match word {
                Some("stream") => {
                    let (mut name, mut flow, mut ack, mut reconnects) = (None, None, 0u64, 0u64);
                    for t in toks {
                        match parse_kv(t) {
                            Some(("name", v)) => name = Some(v.to_string()),
                            Some(("flow", v)) => flow = Some(v.to_string()),
                            Some(("ackErr", v)) => {
                                ack = v.parse().map_err(|_| {
                                    bad(path, lineno, format!("stream ackErr {v:?} is not a count"))
                                })?
                            }
                            Some(("reconnects", v)) => {
                                reconnects = v.parse().map_err(|_| {
                                    bad(
                                        path,
                                        lineno,
                                        format!("stream reconnects {v:?} is not a count"),
                                    )
                                })?
                            }
                            _ => {}
                        }
                    }
                    let name =
                        name.ok_or_else(|| bad(path, lineno, "stream line without name="))?;
                    // A stream's log is `<dir>/<name>.log`: a name is a file name, never
                    // a path that leaves the record's directory.
                    if name.is_empty() || name.starts_with('.') || name.contains(['/', '\\', '\0'])
                    {
                        return Err(bad(
                            path,
                            lineno,
                            format!("stream name {name:?} is not a plain file name (no '/', no leading '.')"),
                        ));
                    }
                    let flow =
                        flow.ok_or_else(|| bad(path, lineno, "stream line without flow="))?;
                    if p.streams.iter().any(|s| s.name == name) {
                        return Err(bad(path, lineno, format!("stream {name} declared twice")));
                    }
                    p.stream_ack_errors.insert(name.clone(), ack);
                    if reconnects > 0 {
                        p.stream_reconnects.insert(name.clone(), reconnects);
                    }
                    p.streams.push(StreamSpec { name, flow });
                }
                Some(kind @ ("indeterminate" | "failed")) => {
                    let (flow, prop, seq, to) = parse_range(toks).ok_or_else(|| {
                        bad(
                            path,
                            lineno,
                            format!(
                                "{kind} line needs flow=, prop=<u64> and seq=<i64 >= 0>, \
                                 and to=<i64 >= seq> when it names a range"
                            ),
                        )
                    })?;
                    if kind == "failed" {
                        p.failed.push(Failed {
                            flow,
                            prop,
                            seq,
                            to,
                        });
                    } else {
                        p.indeterminate.push(Indeterminate {
                            flow,
                            prop,
                            seq,
                            to,
                        });
                    }
                }
                _ => {
                    for t in toks {
                        let Some((k, v)) = parse_kv(t) else { continue };
                        match (word, k) {
                            (None, "ackErr") => {
                                p.total_ack_errors = v.parse().map_err(|_| {
                                    bad(path, lineno, format!("ackErr {v:?} is not a count"))
                                })?
                            }
                            (None, "base") => {
                                p.base = v
                                    .parse::<i64>()
                                    .ok()
                                    .filter(|b| *b >= 0)
                                    .ok_or_else(|| bad(path, lineno, format!("base {v:?} invalid")))?;
                                base_seen = true;
                            }
                            (None, "drain") => {
                                p.drain = Some(match v {
                                    "caught-up" => DrainOutcome::CaughtUp,
                                    "grace" => DrainOutcome::Grace,
                                    "cut-short" => DrainOutcome::CutShort,
                                    _ => {
                                        return Err(bad(
                                            path,
                                            lineno,
                                            format!("drain {v:?} is not caught-up|grace|cut-short"),
                                        ))
                                    }
                                })
                            }
                            (None, "delivery") => match v {
                                "exactly-once" | "at-least-once" | "at-most-once" => {
                                    p.delivery = Some(v.to_string())
                                }
                                _ => {
                                    return Err(bad(
                                        path,
                                        lineno,
                                        format!("delivery {v:?} is not exactly-once|at-least-once|at-most-once"),
                                    ))
                                }
                            },
                            (None, "producedA") | (None, "producedB") => saw_produced_ab = true,
                            _ => {}
                        }
                        let key = match word {
                            Some(w) => format!("{w}.{k}"),
                            None => k.to_string(),
                        };
                        p.header.insert(key, v.to_string());
                    }
                }
            }
            continue;
        }
        // Data line: <flow> <prop> <maxSeq>
        let mut f = line.split_whitespace();
        let (Some(flow), Some(prop), Some(max), None) = (f.next(), f.next(), f.next(), f.next())
        else {
            return Err(bad(
                path,
                lineno,
                format!("data line needs 3 fields: {line:?}"),
            ));
        };
        let prop: u64 = prop.parse().map_err(|_| {
            bad(
                path,
                lineno,
                format!("property {prop:?} is not a non-negative integer"),
            )
        })?;
        let max: i64 = max
            .parse()
            .map_err(|_| bad(path, lineno, format!("maxSeq {max:?} is not an integer")))?;
        match raw.get_mut(flow) {
            Some(v) => v.push((prop, max, lineno)),
            None => {
                raw.insert(flow.to_string(), vec![(prop, max, lineno)]);
            }
        }
    }

    if saw_v1 {
        p.format = MetaFormat::CrossbenchV1;
    } else if saw_produced_ab {
        p.format = MetaFormat::GoloadJuly;
    }
    if !base_seen && p.format == MetaFormat::CrossbenchV1 {
        return Err(bad(path, 1, "crossbench v1 meta without base="));
    }
    for (flow, mut v) in raw {
        if !v.is_sorted_by_key(|&(prop, _, _)| prop) {
            v.sort_by_key(|&(prop, _, _)| prop);
        }
        let mut out = Vec::with_capacity(v.len());
        for w in v.windows(2) {
            if w[0].0 == w[1].0 {
                return Err(bad(
                    path,
                    w[1].2,
                    format!("flow {flow} property {} listed twice", w[1].0),
                ));
            }
        }
        for (prop, max, _) in v {
            // A line below base means "nothing produced" (older writers emitted -1/0).
            if max >= p.base {
                out.push((prop, max));
            }
        }
        p.flows.insert(flow, ProducedFlow { max_seq: out });
    }
    Ok(p)
}

/// Read and parse a `produced.meta` file.
pub fn read_produced(path: &Path) -> Result<Produced, CheckError> {
    let text = std::fs::read_to_string(path).map_err(|source| CheckError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_produced(&text, path)
}

/// The fixed 12 streams of the reference harness, in its order, with `prefix` prepended to
/// topic names.
pub fn reference_streams(prefix: &str) -> Vec<StreamSpec> {
    let mut v = vec![
        StreamSpec::new(format!("{prefix}cm-avail_cm-db"), "A"),
        StreamSpec::new(format!("{prefix}cm-prices_cm-cal"), "B"),
    ];
    for i in 1..=5 {
        v.push(StreamSpec::new(format!("{prefix}cm-ota-sync_ota-{i}"), "A"));
    }
    for i in 1..=5 {
        v.push(StreamSpec::new(
            format!("{prefix}cm-ota-prices_otap-{i}"),
            "B",
        ));
    }
    v
}
