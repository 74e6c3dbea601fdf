//! The channel-manager pipeline: four topics, twelve consumer streams, two flows.

use adapters::{TopicSpec, Topology};

/// One of the pipeline's two flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Flow {
    /// Availability: cm-avail → cm-db → cm-ota-sync → five OTA groups.
    A,
    /// Prices: cm-prices → cm-cal → cm-ota-prices → five OTA groups.
    B,
}

impl Flow {
    pub const ALL: [Flow; 2] = [Flow::A, Flow::B];

    /// The letter a stamp, `produced.meta` and the record use.
    pub fn letter(self) -> u8 {
        match self {
            Flow::A => b'A',
            Flow::B => b'B',
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Flow::A => "A",
            Flow::B => "B",
        }
    }

    /// The flow a stamp's letter names.
    pub fn of_letter(letter: u8) -> Option<Flow> {
        match letter {
            b'A' => Some(Flow::A),
            b'B' => Some(Flow::B),
            _ => None,
        }
    }

    /// Position in per-flow arrays.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The topics, before any prefix.
pub const AVAIL: &str = "cm-avail";
pub const PRICES: &str = "cm-prices";
pub const OTA_SYNC: &str = "cm-ota-sync";
pub const OTA_PRICES: &str = "cm-ota-prices";

/// One consumer stream (a (topic, group) pair) and what its stage does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamDef {
    pub topic: String,
    pub group: String,
    pub flow: Flow,
    /// Simulated work per message, uniform integer milliseconds in [min, max].
    pub work_min_ms: u64,
    pub work_max_ms: u64,
    /// Where the stage re-publishes (intermediate stages), `None` for terminal ones.
    pub out_topic: Option<String>,
}

impl StreamDef {
    /// `<topic>_<group>`: the stream's name and the stem of its log file.
    pub fn name(&self) -> String {
        format!("{}_{}", self.topic, self.group)
    }
    pub fn avg_work_ms(&self) -> f64 {
        (self.work_min_ms + self.work_max_ms) as f64 / 2.0
    }
    pub fn is_terminal(&self) -> bool {
        self.out_topic.is_none()
    }
}

/// The twelve streams, in the fixed order of logs, tables and result.json.
pub fn pipeline_streams(prefix: &str) -> Vec<StreamDef> {
    let t = |n: &str| format!("{prefix}{n}");
    let mut v = vec![
        StreamDef {
            topic: t(AVAIL),
            group: "cm-db".into(),
            flow: Flow::A,
            work_min_ms: 10,
            work_max_ms: 20,
            out_topic: Some(t(OTA_SYNC)),
        },
        StreamDef {
            topic: t(PRICES),
            group: "cm-cal".into(),
            flow: Flow::B,
            work_min_ms: 10,
            work_max_ms: 10,
            out_topic: Some(t(OTA_PRICES)),
        },
    ];
    for i in 1..=5 {
        v.push(StreamDef {
            topic: t(OTA_SYNC),
            group: format!("ota-{i}"),
            flow: Flow::A,
            work_min_ms: 30,
            work_max_ms: 30,
            out_topic: None,
        });
    }
    for i in 1..=5 {
        v.push(StreamDef {
            topic: t(OTA_PRICES),
            group: format!("otap-{i}"),
            flow: Flow::B,
            work_min_ms: 30,
            work_max_ms: 30,
            out_topic: None,
        });
    }
    v
}

/// Consumer streams per flow: what one ingress event reaches (6).
pub fn streams_per_flow(streams: &[StreamDef]) -> u64 {
    (streams.len() / Flow::ALL.len()) as u64
}

/// Topics one ingress event passes through (2: its ingress and its derived topic).
pub fn topics_per_flow(streams: &[StreamDef]) -> u64 {
    (topics_of(streams).len() / Flow::ALL.len()) as u64
}

/// Group the streams into the topology the adapters set up (topic order of first appearance).
pub fn topics_of(streams: &[StreamDef]) -> Vec<TopicSpec> {
    let mut topics: Vec<TopicSpec> = Vec::new();
    // Ingress topics first, then derived, as the reference creates them.
    for s in streams {
        match topics.iter_mut().find(|t| t.name == s.topic) {
            Some(t) => t.groups.push(s.group.clone()),
            None => topics.push(TopicSpec {
                name: s.topic.clone(),
                groups: vec![s.group.clone()],
            }),
        }
    }
    topics
}

/// Convenience: the full topology value.
pub fn topology(
    streams: &[StreamDef],
    keys: u64,
    lanes: u64,
    durability: adapters::Durability,
    dedup_window_sec: u64,
    reset: bool,
) -> Topology {
    Topology {
        topics: topics_of(streams),
        keys,
        lanes,
        durability,
        dedup_window_sec,
        reset,
        sharing: adapters::Sharing::ALONE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twelve_streams_four_topics() {
        let s = pipeline_streams("");
        assert_eq!(s.len(), 12);
        assert_eq!(s.iter().filter(|x| x.is_terminal()).count(), 10);
        let t = topics_of(&s);
        assert_eq!(t.len(), 4);
        assert_eq!(t[2].name, OTA_SYNC);
        assert_eq!(t[2].groups.len(), 5);
        assert_eq!(s[0].name(), "cm-avail_cm-db");
        assert_eq!(streams_per_flow(&s), 6);
        assert_eq!(topics_per_flow(&s), 2);
    }

    #[test]
    fn prefix_applies_to_topics_and_out_topics() {
        let s = pipeline_streams("x-");
        assert_eq!(s[0].topic, "x-cm-avail");
        assert_eq!(s[0].out_topic.as_deref(), Some("x-cm-ota-sync"));
    }
}
