//! Lost messages counted once: the distinct (property, seq) pairs of a flow that were
//! acknowledged and never delivered to at least one of its streams.
//!
//! A stream's `lost_acked` counts seqs missing from that stream. A message lost on a
//! flow's first hop is missing from every stream after it too (the next hop never
//! published it to its groups), so the sum over streams counts one lost message once
//! per stream it never reached: the pipeline's fan-out of five turns 2 lost messages
//! into 12 lost seqs. Within a flow a message keeps its (property, seq) on every hop,
//! so the union of the streams' missing ranges counts each lost message once.
//!
//! Each stream keeps its missing ranges, gaps and lost tail, up to [`MAX_RANGES`]; past
//! that the count is not known exactly and is given as none, never as a guess.

use std::collections::BTreeMap;

/// Ranges kept per stream: 24 bytes each, about 5 MiB a stream at most.
pub const MAX_RANGES: usize = 200_000;

/// One stream's missing seqs as `(property, from, to)` closed ranges, up to
/// [`MAX_RANGES`].
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct LostRanges {
    v: Vec<Range>,
    overflow: bool,
}

impl LostRanges {
    /// Keep `from..=to` of `prop`; false once the stream has more ranges than are kept.
    pub(crate) fn push(&mut self, prop: u64, from: i64, to: i64) -> bool {
        if from > to {
            return !self.overflow;
        }
        if self.v.len() >= MAX_RANGES {
            self.overflow = true;
            return false;
        }
        self.v.push((prop, from, to));
        true
    }
}

/// `(property, from, to)`: seqs `from..=to` of a property.
pub type Range = (u64, i64, i64);

/// The missing ranges of every stream of each flow (and whether a stream had more
/// than are kept), and the distinct count they give.
#[derive(Debug, Default)]
pub(crate) struct FlowLosses<'a> {
    flows: BTreeMap<&'a str, (Vec<Range>, bool)>,
}

impl<'a> FlowLosses<'a> {
    /// Add a stream's ranges to its flow's.
    pub(crate) fn add(&mut self, flow: &'a str, ranges: &LostRanges) {
        let (v, overflow) = self.flows.entry(flow).or_default();
        *overflow |= ranges.overflow;
        if !*overflow {
            v.extend_from_slice(&ranges.v);
        }
    }

    /// Distinct (flow, property, seq) missing from at least one stream; `None` when a
    /// stream had more ranges than are kept.
    pub(crate) fn distinct(mut self) -> Option<u64> {
        let mut total = 0u64;
        for (v, overflow) in self.flows.values_mut() {
            if *overflow {
                return None;
            }
            total = total.saturating_add(union_len(v));
        }
        Some(total)
    }
}

/// The number of distinct (property, seq) in the union of closed ranges (sorts `v`).
pub fn union_len(v: &mut [Range]) -> u64 {
    v.sort_unstable();
    let mut total = 0u64;
    let mut cur: Option<Range> = None;
    for &(p, a, b) in v.iter() {
        match cur {
            Some((cp, ca, cb)) if cp == p && a <= cb.saturating_add(1) => {
                cur = Some((cp, ca, cb.max(b)));
            }
            _ => {
                if let Some((_, ca, cb)) = cur {
                    total = total.saturating_add(span(ca, cb));
                }
                cur = Some((p, a, b));
            }
        }
    }
    if let Some((_, ca, cb)) = cur {
        total = total.saturating_add(span(ca, cb));
    }
    total
}

fn span(a: i64, b: i64) -> u64 {
    (b as i128 - a as i128 + 1).clamp(0, u64::MAX as i128) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_message_lost_on_every_stream_of_its_flow_is_one() {
        let mut first = LostRanges::default();
        first.push(4, 0, 0);
        first.push(7, 0, 0);
        let copies = first.clone();
        let mut other_flow = LostRanges::default();
        other_flow.push(4, 0, 0);
        let mut f = FlowLosses::default();
        f.add("A", &first);
        for _ in 0..5 {
            f.add("A", &copies);
        }
        f.add("B", &other_flow);
        // Flow A: keys 4 and 7, seq 0, each missing from six streams; flow B's key 4 is
        // another message.
        assert_eq!(f.distinct(), Some(3));
    }

    #[test]
    fn a_stream_past_the_limit_gives_no_count() {
        let mut r = LostRanges::default();
        for p in 0..=MAX_RANGES as u64 {
            r.push(p, 1, 1);
        }
        assert!(r.overflow);
        let mut f = FlowLosses::default();
        f.add("A", &r);
        assert_eq!(f.distinct(), None);
    }

    proptest! {
        /// The union's size is the number of distinct pairs, however the ranges overlap.
        #[test]
        fn union_len_counts_each_pair_once(
            ranges in prop::collection::vec((0u64..4, 0i64..40, 0i64..10), 0..30),
        ) {
            let mut v: Vec<(u64, i64, i64)> = ranges.iter().map(|&(p, a, l)| (p, a, a + l)).collect();
            let mut set = std::collections::BTreeSet::new();
            for &(p, a, b) in &v {
                for s in a..=b {
                    set.insert((p, s));
                }
            }
            prop_assert_eq!(union_len(&mut v), set.len() as u64);
        }
    }
}
