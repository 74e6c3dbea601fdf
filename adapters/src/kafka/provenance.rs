//! What the Kafka protocol says about the broker, for the record's provenance: the
//! brokers metadata lists (id and address) and the flush configs DescribeConfigs
//! reports for the broker and for a topic of the cell. The protocol carries no
//! product name or version (ApiVersions answers API ranges only, and rdkafka does not
//! hand them out), so the record says "not reported" and the scenario's
//! `system_build` states the build.

use super::topics::Admin;
use crate::provenance::Provenance;

/// The broker flush configs asked of the first broker.
const BROKER_FLUSH: [&str; 2] = ["log.flush.interval.messages", "log.flush.interval.ms"];
/// The topic flush configs asked of the cell's first topic.
const TOPIC_FLUSH: [&str; 2] = ["flush.messages", "flush.ms"];

/// Read it: `brokers` as metadata listed them (id, `host:port`), `topic` one of the
/// cell's topics (already created).
pub(super) async fn read(
    admin: &Admin,
    brokers: &[(i32, String)],
    topic: Option<&String>,
) -> Provenance {
    let mut p = Provenance::new(
        "a Kafka-protocol broker",
        "metadata (broker ids and addresses); DescribeConfigs of the first broker and of the cell's first topic",
    );
    p.not_reported(
        "product and version",
        "the Kafka protocol carries neither (ApiVersions answers API version ranges only, which rdkafka does not expose); state the build with the scenario's system_build",
    );
    p.report(
        "brokers",
        brokers
            .iter()
            .map(|(id, a)| format!("{id}@{a}"))
            .collect::<Vec<_>>()
            .join(", "),
    );
    match brokers.first() {
        None => p.not_reported("broker flush configs", "metadata listed no broker"),
        Some((id, _)) => match admin.broker_configs(*id, &BROKER_FLUSH).await {
            Ok(values) => {
                for (k, v) in values {
                    match v {
                        Some(v) => p.setting(format!("broker.{k}"), v),
                        None => p.not_reported(
                            &format!("broker.{k}"),
                            format!("broker {id} listed no such config"),
                        ),
                    }
                }
            }
            Err(e) => p.not_reported(
                "broker flush configs",
                format!("DescribeConfigs of broker {id}: {e}"),
            ),
        },
    }
    match topic {
        None => p.not_reported("topic flush configs", "the cell has no topic"),
        Some(t) => {
            for k in TOPIC_FLUSH {
                match admin.topic_config(t, k).await {
                    Some(v) => p.setting(format!("topic.{k}"), v),
                    None => p.not_reported(
                        &format!("topic.{k}"),
                        format!("DescribeConfigs of topic {t} reported none"),
                    ),
                }
            }
        }
    }
    p
}
