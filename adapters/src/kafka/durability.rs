//! What the record says about the durability tier: what was requested, and what the
//! broker reports back (DescribeConfigs of every topic), never more. A broker that
//! reports the flush configs has stored them; whether it honours them the protocol
//! cannot show (tansu 0.6.0 stores them and never reads them: compose/kafka/README.md).

use super::topics::Admin;
use crate::broker::Durability;

/// The configs of the `fsync` tier, as the adapter sets them on every topic.
pub(super) const FSYNC_CONFIGS: [(&str, &str); 2] = [("flush.messages", "1"), ("flush.ms", "0")];

/// The `durability:` note of the description, after the topics were created.
pub(super) async fn tier_note(admin: &Admin, topics: &[String], tier: Durability) -> String {
    if tier != Durability::Fsync {
        return "durability: default tier: the broker's default flush policy (Apache Kafka: page cache, replication for durability; acks=all)".into();
    }
    let mut differ = Vec::new();
    for t in topics {
        for (k, want) in FSYNC_CONFIGS {
            let got = admin.topic_config(t, k).await;
            if got.as_deref() != Some(want) {
                differ.push(format!(
                    "{k}={} on {t}",
                    got.as_deref().unwrap_or("<not reported>")
                ));
            }
        }
    }
    if differ.is_empty() {
        format!(
            "durability: fsync requested (flush.messages=1, flush.ms=0) and reported back by the broker on all {} topics (DescribeConfigs); a stored config, not shown to be honoured (tansu 0.6.0 stores these without honouring them: compose/kafka/README.md)",
            topics.len()
        )
    } else {
        format!(
            "durability: fsync requested, not confirmed by the broker: it reports {}",
            differ.join(", ")
        )
    }
}
