//! The Kafka protocol in the registry ([`crate::registry::SystemDef`]): its entry, its
//! options, how its adapter is built (with the `kafka` feature; without it, a clear
//! `not built`), and its bare loop.

use std::sync::Arc;

use crate::bare::{BareClient, BareError, BarePlan};
use crate::broker::Broker;
use crate::kafka::KafkaOptions;
#[cfg(feature = "kafka")]
use crate::registry::config_error;
use crate::registry::{
    bare_not_built, BuildContext, BuildError, Capabilities, Entry, SharedConsumers, System,
    SystemDef, PLAIN,
};

/// The Kafka protocol, as the registry lists it.
#[derive(Debug)]
pub struct Kafka;

impl SystemDef for Kafka {
    type Options = KafkaOptions;

    const ENTRY: Entry = Entry {
            system: System::Kafka,
            name: "kafka",
            title: "Kafka protocol (Apache Kafka, Redpanda, tansu)",
            feature: Some("kafka"),
            built: cfg!(feature = "kafka"),
            capabilities: Capabilities {
                shared_consumers: SharedConsumers::Exclusive(
                    "the consumer group assigns each partition to one member at a time; a rebalance moves partitions between loaders (counted as reconnects)",
                ),
                ..PLAIN
            },
            memory_note: None,
    };

    fn build(o: &KafkaOptions, ctx: &BuildContext) -> Result<Arc<dyn Broker>, BuildError> {
        #[cfg(feature = "kafka")]
        {
            // The build context matters only to pgmq and Queen.
            let _ = ctx;
            crate::kafka::KafkaBroker::new(o.clone())
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(config_error(&Self::ENTRY))
        }
        #[cfg(not(feature = "kafka"))]
        {
            let _ = (o, ctx);
            Err(Self::ENTRY.not_built())
        }
    }

    fn bare_check(o: &KafkaOptions) -> Result<(), BareError> {
        let _ = o;
        match cfg!(feature = "kafka") {
            true => Ok(()),
            false => Err(bare_not_built(&Self::ENTRY)),
        }
    }

    async fn bare(o: &KafkaOptions, plan: &BarePlan) -> Result<Box<dyn BareClient>, BareError> {
        #[cfg(feature = "kafka")]
        {
            crate::kafka::bare::KafkaBare::start(o, plan)
                .await
                .map(|b| Box::new(b) as Box<dyn BareClient>)
                .map_err(|source| BareError::Setup {
                    name: Self::ENTRY.name,
                    source,
                })
        }
        #[cfg(not(feature = "kafka"))]
        {
            let _ = (o, plan);
            Err(bare_not_built(&Self::ENTRY))
        }
    }
}
