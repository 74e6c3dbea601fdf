//! One streaming pass over one stream log.
//!
//! State per (stream, property) is [`PropState`]: 16 bytes, in a flat vector indexed by
//! property (grown on demand up to a bound, a hash map beyond it). A property whose seqs arrive
//! as `base, base+1, base+2, …` only ever touches that struct (one compare, two stores per
//! line). The first seq that breaks that pattern (a skip, a repeat, a late or out-of-range seq)
//! moves the property to a [`Tracker`] in a side map, which keeps the exact set of delivered
//! seqs as intervals, so that duplicates and late fills are told apart exactly.

use std::collections::HashMap;
use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::Path;

use crate::intervals::{
    contains, count_in, count_overlap, max_in, max_in_minus, range_len, IntervalSet,
};
use crate::lost::LostRanges;
use crate::meta::Produced;
use crate::{CheckError, GapRange, Malformed};

/// Bit of `PropState::lines` set when the property lives in the tracker map.
const TRACKED: u64 = 1 << 63;
/// Properties below this index always use the flat vector (16 MiB of state at most per
/// stream from this bound; larger bounds are taken from the produced map).
const MIN_DENSE_LIMIT: u64 = 1 << 20;
/// Hard cap for the flat vector (256 MiB at 16 bytes); beyond it a hash map is used.
const MAX_DENSE_LIMIT: u64 = 1 << 24;
/// Read size.
const BUF_SIZE: usize = 1 << 20;
/// Malformed examples kept per file (the verdict keeps at most this many overall).
pub(crate) const MAX_MALFORMED_EXAMPLES: usize = 100;
const SNIPPET_LEN: usize = 80;

/// Per (stream, property) state on the clean path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PropState {
    /// Clean path: highest seq so far (`base - 1` before the first line); every seq in
    /// `[base, max_seen]` was delivered exactly once, in order.
    pub max_seen: i64,
    /// Lines delivered for this property; bit 63 = tracked (exact set in the side map).
    pub lines: u64,
}

/// Exact state of an anomalous property.
#[derive(Debug)]
struct Tracker {
    seen: IntervalSet,
    /// Highest legitimately produced seq first-seen so far (phantoms excluded).
    order_max: i64,
    violations: u64,
    /// First deliveries, below `order_max`, of seqs whose publish was indeterminate:
    /// the loader gave up waiting for them and went on to their successors, so their
    /// late arrival is not a reorder by the system (not counted in `violations`).
    late_indeterminate: u64,
}

/// What the produced map says about one property of the stream's flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProdInfo {
    /// The meta has no data lines for this flow: the tail cannot be judged.
    Unknown,
    /// The flow has data but never produced this property: every delivery is a phantom.
    Absent,
    /// Highest acknowledged seq.
    Max(i64),
}

/// Produced map of one flow, arranged for O(1) lookups.
#[derive(Debug, Default)]
pub(crate) struct FlowTable {
    pub(crate) has_data: bool,
    dense: Vec<i64>,
    sparse: HashMap<u64, i64>,
    /// Indeterminate and failed publishes per property.
    exempt: HashMap<u64, Exempt>,
    /// Legacy: properties at or above this bound are phantoms even without data lines.
    legacy_bound: Option<u64>,
}

const ABSENT: i64 = i64::MIN;

/// The publishes of one property whose seqs are not required: sorted, merged, disjoint
/// interval lists (a seq named both ways counts as indeterminate, the weaker claim).
#[derive(Debug, Default)]
pub(crate) struct Exempt {
    /// Outcome unknown: delivered = recovered, not delivered = unseen at end.
    pub(crate) indet: Vec<(i64, i64)>,
    /// Definitely refused or dropped unsent: delivered = aborted read.
    pub(crate) failed: Vec<(i64, i64)>,
}

const NO_EXEMPT: &Exempt = &Exempt {
    indet: Vec::new(),
    failed: Vec::new(),
};

/// Sort and merge overlapping or adjacent intervals.
fn normalize(v: &mut Vec<(i64, i64)>) {
    v.sort_unstable();
    let mut out: Vec<(i64, i64)> = Vec::with_capacity(v.len());
    for &(s, e) in v.iter() {
        match out.last_mut() {
            Some(last) if s <= last.1.saturating_add(1) => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    *v = out;
}

/// `a` minus `b` (both normalized).
fn subtract(a: &[(i64, i64)], b: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::with_capacity(a.len());
    for &(s, e) in a {
        // i128: `be + 1` of the last interval may pass i64::MAX.
        let mut lo = s as i128;
        let start = b.partition_point(|&(_, be)| be < s);
        for &(bs, be) in &b[start..] {
            if bs > e {
                break;
            }
            if bs as i128 > lo {
                out.push((lo as i64, bs - 1));
            }
            lo = lo.max(be as i128 + 1);
        }
        if lo <= e as i128 {
            out.push((lo as i64, e));
        }
    }
    out
}

impl FlowTable {
    pub(crate) fn build(produced: &Produced, flow: &str, legacy_bound: Option<u64>) -> Self {
        let mut t = FlowTable {
            legacy_bound,
            ..Default::default()
        };
        if let Some(pf) = produced.flows.get(flow) {
            t.has_data = !pf.max_seq.is_empty();
            // An Indeterminate or failed line also says what was produced: nothing acked.
            let dense_len = pf
                .max_seq
                .iter()
                .map(|&(p, _)| p)
                .filter(|&p| p < MAX_DENSE_LIMIT)
                .max()
                .map_or(0, |p| p + 1);
            t.dense = vec![ABSENT; dense_len as usize];
            for &(p, m) in &pf.max_seq {
                if p < dense_len {
                    t.dense[p as usize] = m;
                } else {
                    t.sparse.insert(p, m);
                }
            }
        }
        for ind in produced.indeterminate.iter().filter(|i| i.flow == flow) {
            let e = t.exempt.entry(ind.prop).or_default();
            e.indet.push((ind.seq, ind.to));
        }
        for f in produced.failed.iter().filter(|f| f.flow == flow) {
            let e = t.exempt.entry(f.prop).or_default();
            e.failed.push((f.seq, f.to));
        }
        for e in t.exempt.values_mut() {
            normalize(&mut e.indet);
            normalize(&mut e.failed);
            if !e.indet.is_empty() && !e.failed.is_empty() {
                e.failed = subtract(&e.failed, &e.indet);
            }
        }
        t.has_data |= !t.exempt.is_empty();
        t
    }

    fn max_of(&self, prop: u64) -> Option<i64> {
        let m = if prop < self.dense.len() as u64 {
            self.dense[prop as usize]
        } else {
            *self.sparse.get(&prop)?
        };
        (m != ABSENT).then_some(m)
    }

    fn has_exempt(&self) -> bool {
        !self.exempt.is_empty()
    }

    pub(crate) fn exempt(&self, prop: u64) -> &Exempt {
        if self.exempt.is_empty() {
            return NO_EXEMPT;
        }
        self.exempt.get(&prop).unwrap_or(NO_EXEMPT)
    }

    pub(crate) fn info(&self, prop: u64, base: i64) -> ProdInfo {
        if !self.has_data {
            return match self.legacy_bound {
                Some(b) if prop >= b => ProdInfo::Absent,
                _ => ProdInfo::Unknown,
            };
        }
        match self.max_of(prop) {
            Some(m) => ProdInfo::Max(m),
            // Only indeterminate or failed publishes for this property: none required.
            None if self.exempt.contains_key(&prop) => ProdInfo::Max(base - 1),
            None => ProdInfo::Absent,
        }
    }

    /// A seq that counts for order: produced (acknowledged) or indeterminate. Phantoms and
    /// refused publishes (aborted reads) do not.
    fn is_legit(&self, prop: u64, seq: i64, base: i64) -> bool {
        if seq < base {
            return false;
        }
        match self.info(prop, base) {
            ProdInfo::Unknown => true,
            ProdInfo::Absent => false,
            ProdInfo::Max(m) => {
                let e = self.exempt(prop);
                if contains(&e.indet, seq) {
                    return true;
                }
                seq <= m && !contains(&e.failed, seq)
            }
        }
    }

    /// Largest member of `seen` that counts for order (see [`FlowTable::is_legit`]).
    fn legit_max(&self, prop: u64, seen: &[(i64, i64)], base: i64) -> Option<i64> {
        match self.info(prop, base) {
            ProdInfo::Unknown => max_in(seen, base, i64::MAX),
            ProdInfo::Absent => None,
            ProdInfo::Max(m) => {
                let e = self.exempt(prop);
                let a = if e.failed.is_empty() {
                    max_in(seen, base, m)
                } else {
                    max_in_minus(seen, base, m, &e.failed)
                };
                // The highest delivered indeterminate seq above the acknowledged max.
                let b = e
                    .indet
                    .iter()
                    .rev()
                    .take_while(|&&(_, hi)| hi > m)
                    .find_map(|&(lo, hi)| max_in(seen, lo.max(m.saturating_add(1)), hi));
                a.max(b)
            }
        }
    }
}

/// Counts for one stream, before classification into lost tail vs in flight.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct StreamCounts {
    pub lines: u64,
    pub unique: u64,
    pub duplicates: u64,
    pub properties_seen: u64,
    pub gaps: u64,
    pub order_violations: u64,
    /// Seqs above the delivered frontier up to produced max (lost tail or in flight).
    pub tail: u64,
    pub never_delivered_properties: u64,
    pub phantoms: u64,
    pub phantom_properties: u64,
    pub malformed_lines: u64,
    /// Indeterminate seqs delivered.
    pub recovered: u64,
    /// Indeterminate seqs never delivered.
    pub unseen_at_end: u64,
    /// Refused (failed) seqs delivered.
    pub aborted_reads: u64,
    /// Indeterminate seqs first delivered after a later seq of their property (not
    /// order violations: the loader did not wait for their outcome).
    pub late_indeterminate: u64,
    /// The first gaps found, at most [`MAX_GAP_EXAMPLES`] per stream.
    pub gap_examples: Vec<GapRange>,
    /// Every gap, as ranges (up to [`crate::lost::MAX_RANGES`]).
    pub gap_ranges: LostRanges,
    /// Every seq above the delivered frontier, as ranges: lost or in flight, as the
    /// drain decides.
    pub tail_ranges: LostRanges,
    /// Lines of a merged log (`<prop>,<seq>,<loader>,<t>`): consecutive deliveries of
    /// one property by two different loaders.
    pub handoffs: u64,
    /// Of `order_violations`, those whose line came from another loader than the
    /// property's line before it.
    pub order_violations_at_handoff: u64,
}

/// Gap ranges kept per stream as examples.
pub const MAX_GAP_EXAMPLES: usize = 20;

/// Record the gaps of `prop`, the ranges of `[lo, hi]` in none of `sets` (each sorted,
/// disjoint, closed intervals), in one pass: every one in `c.gap_ranges`, the first
/// [`MAX_GAP_EXAMPLES`] of the stream in `c.gap_examples`.
fn note_gaps(prop: u64, lo: i64, hi: i64, sets: &[&[(i64, i64)]], c: &mut StreamCounts) {
    let (examples, ranges) = (&mut c.gap_examples, &mut c.gap_ranges);
    for_missing(lo, hi, sets, |from, to| {
        if examples.len() < MAX_GAP_EXAMPLES {
            examples.push(GapRange { prop, from, to });
        }
        ranges.push(prop, from, to)
    });
}

/// Call `f` with each range of `[lo, hi]` in none of `sets` (each sorted, disjoint,
/// closed intervals), in order, until it returns false.
fn for_missing(lo: i64, hi: i64, sets: &[&[(i64, i64)]], mut f: impl FnMut(i64, i64) -> bool) {
    if lo > hi {
        return;
    }
    let mut covered: Vec<(i64, i64)> = sets
        .iter()
        .flat_map(|s| s.iter().copied())
        .filter(|&(a, b)| b >= lo && a <= hi)
        .collect();
    covered.sort_unstable();
    let mut next = lo; // lowest seq not yet known to be covered
    for (a, b) in covered {
        if a > next && !f(next, (a - 1).min(hi)) {
            return;
        }
        match b.checked_add(1) {
            Some(n) => next = next.max(n),
            None => return,
        }
        if next > hi {
            return;
        }
    }
    if next <= hi {
        f(next, hi);
    }
}

#[derive(Debug, Default)]
pub(crate) struct ScanOutput {
    pub counts: StreamCounts,
    pub malformed: Vec<Malformed>,
}

/// Reusable per-worker scanning state.
#[derive(Debug)]
pub(crate) struct Scanner {
    dense: Vec<PropState>,
    dense_limit: u64,
    sparse: HashMap<u64, PropState>,
    trackers: HashMap<u64, Tracker>,
    buf: Vec<u8>,
    base: i64,
    /// The loader of each property's last line (merged logs only).
    last_loader: HashMap<u64, u32>,
    handoffs: u64,
    at_handoff: u64,
}

impl Scanner {
    pub(crate) fn new() -> Self {
        Scanner {
            dense: Vec::new(),
            dense_limit: MIN_DENSE_LIMIT,
            sparse: HashMap::new(),
            trackers: HashMap::new(),
            buf: vec![0; BUF_SIZE],
            base: 1,
            last_loader: HashMap::new(),
            handoffs: 0,
            at_handoff: 0,
        }
    }

    fn reset(&mut self, base: i64, table: &FlowTable) {
        self.base = base;
        let init = PropState {
            max_seen: base - 1,
            lines: 0,
        };
        let keep = self.dense.len();
        self.dense.clear();
        self.dense.resize(keep, init);
        self.dense_limit = (table.dense.len() as u64).clamp(MIN_DENSE_LIMIT, MAX_DENSE_LIMIT);
        self.sparse.clear();
        self.trackers.clear();
        self.last_loader.clear();
        self.handoffs = 0;
        self.at_handoff = 0;
    }

    /// A line of a merged log: the delivery, then whether it changed hands.
    #[cold]
    fn on_loader_line(&mut self, prop: u64, seq: i64, loader: u32, table: &FlowTable) {
        let before = self.trackers.get(&prop).map_or(0, |t| t.violations);
        self.on_line(prop, seq, table);
        let after = self.trackers.get(&prop).map_or(0, |t| t.violations);
        if let Some(last) = self.last_loader.insert(prop, loader) {
            if last != loader {
                self.handoffs += 1;
                if after > before {
                    self.at_handoff += 1;
                }
            }
        }
    }

    /// A line the fast path did not take: a loader's line, a plain one, or malformed.
    fn on_slow_line(
        &mut self,
        line: &[u8],
        table: &FlowTable,
        out: &mut ScanOutput,
        file_label: &str,
        lineno: u64,
    ) {
        match parse_line_ext(line) {
            Some((p, s, None)) => self.on_line(p, s, table),
            Some((p, s, Some(l))) => self.on_loader_line(p, s, l, table),
            None => note_malformed(out, file_label, lineno, line),
        }
    }

    #[inline(always)]
    fn state_mut(&mut self, prop: u64) -> &mut PropState {
        if prop < self.dense_limit {
            let i = prop as usize;
            if i >= self.dense.len() {
                self.grow(i);
            }
            &mut self.dense[i]
        } else {
            let init = PropState {
                max_seen: self.base - 1,
                lines: 0,
            };
            self.sparse.entry(prop).or_insert(init)
        }
    }

    #[cold]
    fn grow(&mut self, i: usize) {
        let init = PropState {
            max_seen: self.base - 1,
            lines: 0,
        };
        let want = (i + 1)
            .max(self.dense.len() * 2)
            .min(self.dense_limit as usize);
        self.dense.resize(want.max(i + 1), init);
    }

    #[inline(always)]
    fn on_line(&mut self, prop: u64, seq: i64, table: &FlowTable) {
        let st = self.state_mut(prop);
        // seq >= 0, so seq - 1 cannot overflow; TRACKED keeps tracked properties off this path.
        if st.lines & TRACKED == 0 && seq - 1 == st.max_seen {
            st.max_seen = seq;
            st.lines += 1;
            return;
        }
        self.on_anomaly(prop, seq, table);
    }

    #[cold]
    #[inline(never)]
    fn on_anomaly(&mut self, prop: u64, seq: i64, table: &FlowTable) {
        let base = self.base;
        let st = *self.state_mut(prop);
        if st.lines & TRACKED == 0 {
            let seen = IntervalSet::from_range(base, st.max_seen);
            let order_max = table
                .legit_max(prop, seen.as_slice(), base)
                .unwrap_or(i64::MIN);
            self.trackers.insert(
                prop,
                Tracker {
                    seen,
                    order_max,
                    violations: 0,
                    late_indeterminate: 0,
                },
            );
        }
        {
            let s = self.state_mut(prop);
            s.lines = (s.lines + 1) | TRACKED;
            s.max_seen = s.max_seen.max(seq);
        }
        let t = self.trackers.get_mut(&prop).expect("tracked property");
        if t.seen.insert(seq) && table.is_legit(prop, seq, base) {
            if seq < t.order_max {
                if contains(&table.exempt(prop).indet, seq) {
                    t.late_indeterminate += 1;
                } else {
                    t.violations += 1;
                }
            } else {
                t.order_max = seq;
            }
        }
    }

    /// Scan `path`. `Ok(None)` when the file does not exist.
    pub(crate) fn scan_file(
        &mut self,
        path: &Path,
        file_label: &str,
        base: i64,
        table: &FlowTable,
        produced_props: &[(u64, i64)],
    ) -> Result<Option<ScanOutput>, CheckError> {
        let io_err = |source| CheckError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(e)),
        };
        self.reset(base, table);
        let mut out = ScanOutput::default();
        let mut buf = std::mem::take(&mut self.buf);
        let mut filled = 0usize; // bytes of an unfinished line at the front of buf
        let mut lineno: u64 = 0;
        let mut skipping = false; // inside an over-long line
        loop {
            let n = match file.read(&mut buf[filled..]) {
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.buf = buf;
                    return Err(io_err(e));
                }
            };
            if n == 0 {
                if filled > 0 {
                    // Last line without a trailing newline.
                    lineno += 1;
                    if skipping {
                        // Already reported when it overflowed the buffer.
                    } else {
                        let line = buf[..filled].to_vec();
                        self.on_slow_line(&line, table, &mut out, file_label, lineno);
                    }
                }
                break;
            }
            let end = filled + n;
            let mut pos = 0usize;
            if skipping {
                match memchr::memchr(b'\n', &buf[filled..end]) {
                    Some(off) => {
                        skipping = false;
                        pos = filled + off + 1;
                    }
                    None => {
                        filled = 0;
                        continue;
                    }
                }
            }
            let data = &buf[..end];
            loop {
                // One pass over the bytes for well-formed lines; memchr only for the others.
                if let Some((p, s, next)) = parse_fast(data, pos) {
                    lineno += 1;
                    self.on_line(p, s, table);
                    pos = next;
                    continue;
                }
                let Some(off) = memchr::memchr(b'\n', &data[pos..]) else {
                    break;
                };
                lineno += 1;
                let line = &data[pos..pos + off];
                match parse_line(line) {
                    Some((p, s)) => self.on_line(p, s, table),
                    None => {
                        let line = line.to_vec();
                        self.on_slow_line(&line, table, &mut out, file_label, lineno);
                    }
                }
                pos += off + 1;
            }
            buf.copy_within(pos..end, 0);
            filled = end - pos;
            if filled == buf.len() {
                // A single line longer than the buffer: malformed, skip to its end.
                lineno += 1;
                note_malformed(&mut out, file_label, lineno, &buf[..filled]);
                // The line is counted now; a trailing fragment at EOF must not count again.
                skipping = true;
                filled = 0;
            }
        }
        self.buf = buf;
        self.judge(table, produced_props, &mut out.counts);
        out.counts.handoffs = self.handoffs;
        out.counts.order_violations_at_handoff = self.at_handoff;
        Ok(Some(out))
    }

    fn judge(&self, table: &FlowTable, produced_props: &[(u64, i64)], c: &mut StreamCounts) {
        let base = self.base;
        let mut visit = |prop: u64, st: &PropState| {
            let lines = st.lines & !TRACKED;
            if lines == 0 {
                return;
            }
            c.properties_seen += 1;
            c.lines += lines;
            if st.lines & TRACKED == 0 && !table.has_exempt() {
                // Clean property: exactly [base, max_seen] delivered once each, in order.
                c.unique += lines;
                match table.info(prop, base) {
                    ProdInfo::Max(m) => {
                        // Counts of seq ranges saturate: a meta may claim maxSeq = i64::MAX.
                        if let Some(lo) = m.max(base - 1).checked_add(1) {
                            c.phantoms = c.phantoms.saturating_add(range_len(lo, st.max_seen));
                        }
                        if let Some(lo) = st.max_seen.checked_add(1) {
                            c.tail = c.tail.saturating_add(range_len(lo, m));
                            c.tail_ranges.push(prop, lo, m);
                        }
                    }
                    ProdInfo::Absent => {
                        c.phantom_properties += 1;
                        c.phantoms += lines;
                    }
                    ProdInfo::Unknown => {}
                }
                return;
            }
            let clean;
            let (violations, late);
            let seen: &[(i64, i64)] = if st.lines & TRACKED != 0 {
                let t = &self.trackers[&prop];
                (violations, late) = (t.violations, t.late_indeterminate);
                t.seen.as_slice()
            } else {
                (violations, late) = (0, 0);
                clean = [(base, st.max_seen)];
                &clean
            };
            c.order_violations += violations;
            c.late_indeterminate += late;
            judge_prop(prop, seen, lines, table, base, c);
        };
        for (prop, st) in self.dense.iter().enumerate() {
            visit(prop as u64, st);
        }
        for (&prop, st) in &self.sparse {
            visit(prop, st);
        }
        // Produced properties with no line at all in this stream.
        for &(prop, max) in produced_props {
            let delivered = if prop < self.dense_limit {
                self.dense.get(prop as usize).is_some_and(|s| s.lines != 0)
            } else {
                self.sparse.get(&prop).is_some_and(|s| s.lines != 0)
            };
            if !delivered {
                c.never_delivered_properties += 1;
                let e = table.exempt(prop);
                let excused = count_in(&e.indet, base, max) + count_in(&e.failed, base, max);
                let tail = range_len(base, max).saturating_sub(excused);
                c.tail = c.tail.saturating_add(tail);
                if tail > 0 {
                    let r = &mut c.tail_ranges;
                    for_missing(base, max, &[&e.indet, &e.failed], |a, b| r.push(prop, a, b));
                }
                let unseen = count_in(&e.indet, base, i64::MAX);
                c.unseen_at_end = c.unseen_at_end.saturating_add(unseen);
            }
        }
        // Properties with only indeterminate or failed publishes, never delivered.
        for (&prop, e) in &table.exempt {
            if table.max_of(prop).is_some() {
                continue; // counted above
            }
            let delivered = if prop < self.dense_limit {
                self.dense.get(prop as usize).is_some_and(|s| s.lines != 0)
            } else {
                self.sparse.get(&prop).is_some_and(|s| s.lines != 0)
            };
            if !delivered {
                let unseen = count_in(&e.indet, base, i64::MAX);
                c.unseen_at_end = c.unseen_at_end.saturating_add(unseen);
            }
        }
    }
}

/// Classify one delivered property: phantoms, gaps, tail.
fn judge_prop(
    prop: u64,
    seen: &[(i64, i64)],
    lines: u64,
    table: &FlowTable,
    base: i64,
    c: &mut StreamCounts,
) {
    let distinct = count_in(seen, i64::MIN, i64::MAX);
    c.unique += distinct;
    c.duplicates += lines - distinct;
    let below = count_in(seen, i64::MIN, base - 1);
    match table.info(prop, base) {
        ProdInfo::Absent => {
            c.phantom_properties += 1;
            c.phantoms += distinct;
        }
        ProdInfo::Unknown => {
            c.phantoms += below;
            if let Some(f) = max_in(seen, base, i64::MAX) {
                let gaps = range_len(base, f) - count_in(seen, base, f);
                c.gaps = c.gaps.saturating_add(gaps);
                if gaps > 0 {
                    note_gaps(prop, base, f, &[seen], c);
                }
            }
        }
        ProdInfo::Max(m) => {
            let e = table.exempt(prop);
            let (ind, fail) = (e.indet.as_slice(), e.failed.as_slice());
            let top = m.saturating_add(1);
            let above = count_in(seen, top, i64::MAX);
            let above_exempt =
                count_overlap(seen, ind, top, i64::MAX) + count_overlap(seen, fail, top, i64::MAX);
            c.phantoms += below + above.saturating_sub(above_exempt);
            let recovered = count_overlap(seen, ind, base, i64::MAX);
            c.recovered += recovered;
            let unseen = count_in(ind, base, i64::MAX).saturating_sub(recovered);
            c.unseen_at_end = c.unseen_at_end.saturating_add(unseen);
            c.aborted_reads += count_overlap(seen, fail, base, i64::MAX);
            // Frontier: highest delivered seq that was produced (or indeterminate).
            let frontier = table.legit_max(prop, seen, base).unwrap_or(base - 1);
            let hi = frontier.min(m);
            // Required seqs in [base, hi] not delivered; indeterminate and failed excused.
            let exempt_in = |lo: i64, hi: i64| count_in(ind, lo, hi) + count_in(fail, lo, hi);
            let req = range_len(base, hi).saturating_sub(exempt_in(base, hi));
            let got = count_in(seen, base, hi).saturating_sub(
                count_overlap(seen, ind, base, hi) + count_overlap(seen, fail, base, hi),
            );
            c.gaps = c.gaps.saturating_add(req.saturating_sub(got));
            if req > got {
                note_gaps(prop, base, hi, &[seen, ind, fail], c);
            }
            // No tail above a frontier of i64::MAX.
            if let Some(tail_lo) = hi.max(base - 1).checked_add(1) {
                let tail = range_len(tail_lo, m).saturating_sub(exempt_in(tail_lo, m));
                c.tail = c.tail.saturating_add(tail);
                if tail > 0 {
                    let r = &mut c.tail_ranges;
                    for_missing(tail_lo, m, &[ind, fail], |a, b| r.push(prop, a, b));
                }
            }
        }
    }
}

fn note_malformed(out: &mut ScanOutput, file: &str, line: u64, bytes: &[u8]) {
    out.counts.malformed_lines += 1;
    if out.malformed.len() < MAX_MALFORMED_EXAMPLES {
        let cut = &bytes[..bytes.len().min(SNIPPET_LEN)];
        let mut snippet = String::from_utf8_lossy(cut).into_owned();
        if bytes.len() > SNIPPET_LEN {
            snippet.push('…');
        }
        out.malformed.push(Malformed {
            file: file.to_string(),
            line,
            snippet,
        });
    }
}

/// Fast path: a well-formed line `<prop>,<seq>\n` (1 to 18 digits each) starting at `pos`.
/// Returns the values and the position after the newline; `None` for anything else
/// (including a line not yet terminated in `data`), which the caller re-examines.
///
/// Numbers of up to 7 digits (every line of a cell below 10 M properties and 10 M messages
/// per property) are read eight bytes at a time ([`swar_digits`]); anything else, and the
/// last bytes of a buffer, go through the byte loop ([`parse_fast_bytes`]), which gives the
/// same answer.
#[inline(always)]
fn parse_fast(data: &[u8], pos: usize) -> Option<(u64, i64, usize)> {
    if let Some(word) = load8(data, pos) {
        let (prop, n) = swar_digits(word);
        // n == 8: the number may go on; n == 0 or no ',' after it: not this fast path's.
        if (1..8).contains(&n) && data[pos + n] == b',' {
            let at = pos + n + 1;
            if let Some(word) = load8(data, at) {
                let (seq, m) = swar_digits(word);
                if (1..8).contains(&m) && data[at + m] == b'\n' {
                    return Some((prop, seq as i64, at + m + 1));
                }
            }
        }
    }
    parse_fast_bytes(data, pos)
}

/// Eight bytes from `i` as a little-endian word (first byte lowest), if there are eight.
#[inline(always)]
fn load8(data: &[u8], i: usize) -> Option<u64> {
    let bytes: [u8; 8] = data.get(i..i + 8)?.try_into().ok()?;
    Some(u64::from_le_bytes(bytes))
}

/// The decimal number at the front of `word` (first byte lowest) and its count of digits
/// (0 to 8). Digits past the count are ignored. Branch-free SWAR: a byte `b` is a digit iff
/// its high nibble is 3 and `b + 6` keeps it 3; the first byte that is not is found with
/// one `trailing_zeros`. A carry out of a non-digit byte can only disturb the bytes after it.
#[inline(always)]
fn swar_digits(word: u64) -> (u64, usize) {
    const HIGH: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    const SIX: u64 = 0x0606_0606_0606_0606;
    const THREES: u64 = 0x3333_3333_3333_3333;
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    const TOP: u64 = 0x8080_8080_8080_8080;
    let class = (word & HIGH) | ((word.wrapping_add(SIX) & HIGH) >> 4);
    let off = class ^ THREES; // zero bytes are digits
    let not_digit = (((off & LOW7).wrapping_add(LOW7)) | off) & TOP;
    let n = (not_digit.trailing_zeros() / 8) as usize;
    if n == 0 {
        return (0, 0);
    }
    // Keep the n digits' values, moved to the top bytes so that zeros lead.
    let mut x = (word & 0x0F0F_0F0F_0F0F_0F0F) << (8 * (8 - n));
    x = (x.wrapping_mul(10) + (x >> 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x.wrapping_mul(100) + (x >> 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x.wrapping_mul(10_000) + (x >> 32)) & 0x0000_0000_FFFF_FFFF;
    (x, n)
}

/// [`parse_fast`] one byte at a time.
#[inline(always)]
fn parse_fast_bytes(data: &[u8], pos: usize) -> Option<(u64, i64, usize)> {
    let mut i = pos;
    let mut prop: u64 = 0;
    loop {
        let d = data.get(i)?.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        prop = prop * 10 + d as u64;
        i += 1;
        if i - pos > 18 {
            return None;
        }
    }
    if i == pos || data[i] != b',' {
        return None;
    }
    i += 1;
    let seq_start = i;
    let mut seq: u64 = 0;
    loop {
        let d = data.get(i)?.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        seq = seq * 10 + d as u64;
        i += 1;
        if i - seq_start > 18 {
            return None;
        }
    }
    if i == seq_start || data[i] != b'\n' {
        return None;
    }
    Some((prop, seq as i64, i + 1))
}

/// Parse `<prop>,<seq>` or a merged log's `<prop>,<seq>,<loader>,<t>` (`t` a
/// non-negative integer, `loader` below 2^32); the loader when there is one.
pub(crate) fn parse_line_ext(line: &[u8]) -> Option<(u64, i64, Option<u32>)> {
    if let Some(pq) = parse_line(line) {
        return Some((pq.0, pq.1, None));
    }
    if line.iter().filter(|&&b| b == b',').count() != 3 {
        return None;
    }
    let second = line
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b',')
        .nth(1)
        .map(|(i, _)| i)?;
    let (p, s) = parse_line(&line[..second])?;
    // `<loader>,<t>` has the shape of `<prop>,<seq>`.
    let (loader, _t) = parse_line(&line[second + 1..])?;
    Some((p, s, Some(u32::try_from(loader).ok()?)))
}

/// Parse `<prop>,<seq>` (both non-negative decimal integers, nothing else on the line).
#[inline(always)]
pub(crate) fn parse_line(line: &[u8]) -> Option<(u64, i64)> {
    let n = line.len();
    let mut i = 0;
    let mut prop: u64 = 0;
    while i < n {
        let d = line[i].wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        prop = prop.wrapping_mul(10).wrapping_add(d as u64);
        i += 1;
    }
    let prop_digits = i;
    if prop_digits == 0 || i >= n || line[i] != b',' {
        return None;
    }
    i += 1;
    let seq_start = i;
    let mut seq: u64 = 0;
    while i < n {
        let d = line[i].wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        seq = seq.wrapping_mul(10).wrapping_add(d as u64);
        i += 1;
    }
    let seq_digits = n - seq_start;
    if seq_digits == 0 {
        return None;
    }
    if prop_digits > 18 || seq_digits > 18 {
        // Possible overflow: redo exactly (rare).
        let s = std::str::from_utf8(line).ok()?;
        let (p, q) = s.split_once(',')?;
        return Some((p.parse().ok()?, q.parse::<i64>().ok()?));
    }
    Some((prop, seq as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_is_small() {
        assert_eq!(std::mem::size_of::<PropState>(), 16);
    }

    #[test]
    fn parse_line_accepts_only_two_integers() {
        assert_eq!(parse_line(b"12,34"), Some((12, 34)));
        assert_eq!(parse_line(b"0,0"), Some((0, 0)));
        assert_eq!(
            parse_line(b"18446744073709551615,9223372036854775807"),
            Some((u64::MAX, i64::MAX))
        );
        for bad in [
            &b""[..],
            b",",
            b"1,",
            b",1",
            b"1",
            b"a,1",
            b"1,a",
            b"1,-1",
            b"-1,1",
            b"1,2,3",
            b" 1,2",
            b"1,2 ",
            b"1,2\r",
            b"18446744073709551616,1",
            b"1,9223372036854775808",
        ] {
            assert_eq!(parse_line(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn a_merged_logs_line_has_four_fields() {
        assert_eq!(parse_line_ext(b"12,34"), Some((12, 34, None)));
        assert_eq!(
            parse_line_ext(b"12,34,1,1700000000000123"),
            Some((12, 34, Some(1)))
        );
        for bad in [
            &b"1,2,3"[..],
            b"1,2,3,4,5",
            b"1,2,,4",
            b"1,2,3,",
            b"1,2,-3,4",
            b"1,2,3,x",
            b"1,2,4294967296,1",
        ] {
            assert_eq!(
                parse_line_ext(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}

/// Fuzzed stream-log lines (issue 17): `parse_line` against a model of FORMAT.md's
/// grammar, and the fast path against `parse_line`, on `CROSSBENCH_FUZZ_CASES`
/// (default 10 000) lines each: arbitrary bytes, digit strings of every length around
/// the u64 / i64 bounds, and well-formed lines with one byte changed.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::RngAlgorithm;

    fn config() -> ProptestConfig {
        let cases = std::env::var("CROSSBENCH_FUZZ_CASES")
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(10_000);
        ProptestConfig {
            cases,
            rng_algorithm: RngAlgorithm::XorShift,
            ..ProptestConfig::default()
        }
    }

    /// FORMAT.md: `<prop>,<seq>`, both non-empty decimal digits only, prop a u64,
    /// seq in the i64 range.
    fn model(line: &[u8]) -> Option<(u64, i64)> {
        let s = std::str::from_utf8(line).ok()?;
        let (p, q) = s.split_once(',')?;
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit());
        if !digits(p) || !digits(q) {
            return None;
        }
        Some((p.parse().ok()?, q.parse().ok()?))
    }

    fn line() -> impl Strategy<Value = Vec<u8>> {
        let edge = prop::sample::select(
            &[
                "0",
                "9223372036854775807",
                "9223372036854775808",
                "18446744073709551615",
                "18446744073709551616",
                "999999999999999999",
                "1000000000000000000",
                "0000000000000000000000001",
            ][..],
        );
        prop_oneof![
            prop::collection::vec(any::<u8>(), 0..40),
            ("[0-9]{0,24}", "[0-9]{0,24}").prop_map(|(a, b)| format!("{a},{b}").into_bytes()),
            (edge.clone(), edge).prop_map(|(a, b)| format!("{a},{b}").into_bytes()),
            (any::<u64>(), any::<i64>()).prop_map(|(p, s)| format!("{p},{s}").into_bytes()),
            (any::<u64>(), 0i64..=i64::MAX, any::<usize>(), any::<u8>()).prop_map(
                |(p, s, at, b)| {
                    let mut l = format!("{p},{s}").into_bytes();
                    let i = at % l.len();
                    l[i] = b;
                    l
                }
            ),
        ]
    }

    proptest! {
        #![proptest_config(config())]

        #[test]
        fn parse_line_follows_the_grammar(l in line()) {
            prop_assert_eq!(parse_line(&l), model(&l));
        }

        #[test]
        fn the_fast_path_agrees_with_parse_line(l in line()) {
            let mut data: Vec<u8> = l.iter().copied().filter(|&c| c != b'\n').collect();
            let expect = parse_line(&data);
            data.push(b'\n');
            if let Some((p, s, next)) = parse_fast(&data, 0) {
                prop_assert_eq!(Some((p, s)), expect);
                prop_assert_eq!(next, data.len());
            }
        }

        /// The eight-bytes-at-a-time reading sees the next line's bytes too; whatever they
        /// are, it answers as the byte loop does.
        #[test]
        fn the_word_path_agrees_with_the_byte_loop(
            l in line(),
            tail in prop::collection::vec(any::<u8>(), 0..20),
        ) {
            let mut data: Vec<u8> = l.iter().copied().filter(|&c| c != b'\n').collect();
            data.push(b'\n');
            data.extend_from_slice(&tail);
            prop_assert_eq!(parse_fast(&data, 0), parse_fast_bytes(&data, 0));
        }

        /// The missing ranges are exactly the seqs of the range in none of the sets.
        #[test]
        fn the_gaps_noted_are_the_complement(
            seen in prop::collection::vec(0i64..60, 0..30),
            other in prop::collection::vec(0i64..60, 0..10),
            lo in 0i64..30,
            len in 0i64..40,
        ) {
            let hi = lo + len;
            let set = |xs: &[i64]| {
                let mut s = crate::intervals::IntervalSet::default();
                let mut v = xs.to_vec();
                v.sort_unstable();
                for x in v {
                    s.insert(x);
                }
                s
            };
            let (a, b) = (set(&seen), set(&other));
            let mut c = StreamCounts::default();
            note_gaps(7, lo, hi, &[a.as_slice(), b.as_slice()], &mut c);
            let out = &c.gap_examples;
            let expect: Vec<i64> = (lo..=hi).filter(|x| !seen.contains(x) && !other.contains(x)).collect();
            let got: Vec<i64> = out.iter().flat_map(|g| { assert_eq!(g.prop, 7); g.from..=g.to }).collect();
            if expect.len() <= 200 && out.len() < MAX_GAP_EXAMPLES {
                prop_assert_eq!(got, expect.clone());
            } else {
                prop_assert!(got.iter().all(|x| expect.contains(x)));
            }
            // The ranges, uncapped, hold every missing seq once.
            let mut losses = crate::lost::FlowLosses::default();
            losses.add("A", &c.gap_ranges);
            prop_assert_eq!(losses.distinct(), Some(expect.len() as u64));
        }

        /// Every byte value after 0 to 8 digits: the count stops at the first non-digit.
        #[test]
        fn swar_digits_counts_and_reads_the_leading_digits(
            digits in "[0-9]{0,8}",
            after in prop::collection::vec(any::<u8>(), 8),
        ) {
            let mut bytes = digits.clone().into_bytes();
            bytes.extend_from_slice(&after);
            let word = load8(&bytes, 0).expect("eight bytes");
            let n = bytes.iter().take(8).take_while(|b| b.is_ascii_digit()).count();
            let value = std::str::from_utf8(&bytes[..n]).expect("digits").parse::<u64>().unwrap_or(0);
            prop_assert_eq!(swar_digits(word), (value, n));
        }
    }
}
