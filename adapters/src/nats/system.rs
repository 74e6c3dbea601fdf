//! NATS JetStream in the registry ([`crate::registry::SystemDef`]): its entry, its
//! options, how its adapter is built (with the `nats` feature; without it, a clear
//! `not built`), and its bare loop.

use std::sync::Arc;

use crate::bare::{BareClient, BareError, BarePlan};
use crate::broker::Broker;
use crate::nats::NatsOptions;
#[cfg(feature = "nats")]
use crate::registry::config_error;
use crate::registry::{
    bare_not_built, BuildContext, BuildError, Capabilities, Entry, SharedConsumers, System,
    SystemDef, PLAIN,
};

/// NATS JetStream, as the registry lists it.
#[derive(Debug)]
pub struct Nats;

impl SystemDef for Nats {
    type Options = NatsOptions;

    const ENTRY: Entry = Entry {
            system: System::Nats,
            name: "nats",
            title: "NATS JetStream",
            feature: Some("nats"),
            built: cfg!(feature = "nats"),
            capabilities: Capabilities {
                shared_consumers: SharedConsumers::No(
                    "each lane is one durable pull consumer: two processes pulling from it would split a key's messages between them",
                ),
                ..PLAIN
            },
            memory_note: None,
    };

    fn build(o: &NatsOptions, ctx: &BuildContext) -> Result<Arc<dyn Broker>, BuildError> {
        #[cfg(feature = "nats")]
        {
            // The build context matters only to pgmq and Queen.
            let _ = ctx;
            crate::nats::NatsBroker::new(o.clone())
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(config_error(&Self::ENTRY))
        }
        #[cfg(not(feature = "nats"))]
        {
            let _ = (o, ctx);
            Err(Self::ENTRY.not_built())
        }
    }

    fn bare_check(o: &NatsOptions) -> Result<(), BareError> {
        let _ = o;
        match cfg!(feature = "nats") {
            true => Ok(()),
            false => Err(bare_not_built(&Self::ENTRY)),
        }
    }

    async fn bare(o: &NatsOptions, plan: &BarePlan) -> Result<Box<dyn BareClient>, BareError> {
        #[cfg(feature = "nats")]
        {
            crate::nats::bare::NatsBare::start(o, plan)
                .await
                .map(|b| Box::new(b) as Box<dyn BareClient>)
                .map_err(|source| BareError::Setup {
                    name: Self::ENTRY.name,
                    source,
                })
        }
        #[cfg(not(feature = "nats"))]
        {
            let _ = (o, plan);
            Err(bare_not_built(&Self::ENTRY))
        }
    }
}
