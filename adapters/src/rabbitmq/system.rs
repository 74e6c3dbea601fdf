//! RabbitMQ in the registry ([`crate::registry::SystemDef`]): its entry, its
//! options, how its adapter is built (with the `rabbitmq` feature; without it, a clear
//! `not built`), and its bare loop.

use std::sync::Arc;

use crate::bare::{BareClient, BareError, BarePlan};
use crate::broker::Broker;
use crate::rabbitmq::RabbitOptions;
#[cfg(feature = "rabbitmq")]
use crate::registry::config_error;
use crate::registry::{
    bare_not_built, BuildContext, BuildError, Capabilities, Entry, SharedConsumers, System,
    SystemDef, PLAIN,
};

/// RabbitMQ, as the registry lists it.
#[derive(Debug)]
pub struct Rabbitmq;

impl SystemDef for Rabbitmq {
    type Options = RabbitOptions;

    const ENTRY: Entry = Entry {
            system: System::Rabbitmq,
            name: "rabbitmq",
            title: "RabbitMQ",
            feature: Some("rabbitmq"),
            built: cfg!(feature = "rabbitmq"),
            capabilities: Capabilities {
                shared_consumers: SharedConsumers::Exclusive(
                    "every queue is declared with x-single-active-consumer: of all the loaders' consumers of a queue, one receives its deliveries, another takes over only when it goes",
                ),
                ..PLAIN
            },
            memory_note: None,
    };

    fn build(o: &RabbitOptions, ctx: &BuildContext) -> Result<Arc<dyn Broker>, BuildError> {
        #[cfg(feature = "rabbitmq")]
        {
            // The build context matters only to pgmq and Queen.
            let _ = ctx;
            crate::rabbitmq::RabbitBroker::new(o.clone())
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(config_error(&Self::ENTRY))
        }
        #[cfg(not(feature = "rabbitmq"))]
        {
            let _ = (o, ctx);
            Err(Self::ENTRY.not_built())
        }
    }

    fn bare_check(o: &RabbitOptions) -> Result<(), BareError> {
        let _ = o;
        match cfg!(feature = "rabbitmq") {
            true => Ok(()),
            false => Err(bare_not_built(&Self::ENTRY)),
        }
    }

    async fn bare(o: &RabbitOptions, plan: &BarePlan) -> Result<Box<dyn BareClient>, BareError> {
        #[cfg(feature = "rabbitmq")]
        {
            crate::rabbitmq::bare::RabbitBare::start(o, plan)
                .await
                .map(|b| Box::new(b) as Box<dyn BareClient>)
                .map_err(|source| BareError::Setup {
                    name: Self::ENTRY.name,
                    source,
                })
        }
        #[cfg(not(feature = "rabbitmq"))]
        {
            let _ = (o, plan);
            Err(bare_not_built(&Self::ENTRY))
        }
    }
}
