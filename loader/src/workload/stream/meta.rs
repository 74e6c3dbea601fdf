//! `produced.meta` of a stream cell: the checker's v1 format with one flow (`S`),
//! one `# stream` line per group, and a data line per partition that received an
//! acknowledged push (`S <partition> <maxSeq>`). Seqs start at 1 (base 1).

use std::fmt::Write as _;

use crate::measure::outcomes::Outcomes;
use crate::workload::stream::ledger::SeqMax;
use crate::workload::stream::payload::FLOW;

#[derive(Debug)]
pub struct PartitionMeta<'a> {
    pub system: &'a str,
    pub partitions: u64,
    pub rate: u64,
    pub drain: &'a str,
    pub delivery: &'a str,
    /// (stream name `<topic>_<group>`, ack errors, reconnects).
    pub streams: Vec<(String, u64, u64)>,
    pub acked: &'a SeqMax,
    /// Given-up pushes (`# failed` / `# indeterminate`).
    pub outcomes: &'a Outcomes,
    /// Why this cell's tier may lose acknowledged writes, if it may.
    pub loss_allowed: Option<String>,
}

impl PartitionMeta<'_> {
    pub fn render(&self) -> String {
        let total_ack: u64 = self.streams.iter().map(|s| s.1).sum();
        let mut s = String::with_capacity(256 + 16 * self.acked.len() as usize);
        let _ = writeln!(s, "# crossbench produced.meta v1");
        let _ = writeln!(
            s,
            "# ackErr={total_ack} base=1 system={} properties={} rate={} drain={} delivery={}",
            self.system, self.partitions, self.rate, self.drain, self.delivery
        );
        if let Some(why) = &self.loss_allowed {
            let why: String = why
                .chars()
                .map(|c| if c.is_whitespace() { '-' } else { c })
                .collect();
            let _ = writeln!(s, "# loss_allowed={why}");
        }
        let _ = writeln!(s, "# workload kind=stream partitions={}", self.partitions);
        let flow = FLOW as char;
        for (name, ack, reconnects) in &self.streams {
            let _ = write!(s, "# stream name={name} flow={flow} ackErr={ack}");
            if *reconnects > 0 {
                let _ = write!(s, " reconnects={reconnects}");
            }
            s.push('\n');
        }
        self.outcomes.render(flow, &mut s);
        let mut a = itoa::Buffer::new();
        let mut b = itoa::Buffer::new();
        for p in 0..self.acked.len() {
            let m = self.acked.get(p);
            if m >= 1 {
                s.push(flow);
                s.push(' ');
                s.push_str(a.format(p));
                s.push(' ');
                s.push_str(b.format(m));
                s.push('\n');
            }
        }
        s
    }
}
