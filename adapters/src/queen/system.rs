//! Queen in the registry ([`crate::registry::SystemDef`]): its entry, its
//! options, how its adapter is built (with the `queen` feature; without it, a clear
//! `not built`), and its bare loop.

use std::sync::Arc;

use crate::bare::{BareClient, BareError, BarePlan};
use crate::broker::Broker;
use crate::queen::QueenOptions;
#[cfg(feature = "queen")]
use crate::registry::config_error;
use crate::registry::{
    bare_not_built, BuildContext, BuildError, Capabilities, Entry, SharedConsumers, System,
    SystemDef,
};

/// Queen, as the registry lists it.
#[derive(Debug)]
pub struct Queen;

impl SystemDef for Queen {
    type Options = QueenOptions;

    const ENTRY: Entry = Entry {
            system: System::Queen,
            name: "queen",
            title: "Queen MQ",
            feature: Some("queen"),
            built: cfg!(feature = "queen"),
            capabilities: Capabilities {
                multi_partition_pop: true,
                in_process: false,
                shared_consumers: SharedConsumers::Exclusive(
                    "a pop leases the whole partition to one consumer of the group until it is acked or the lease runs out",
                ),
            },
            memory_note: None,
    };

    fn build(o: &QueenOptions, ctx: &BuildContext) -> Result<Arc<dyn Broker>, BuildError> {
        #[cfg(feature = "queen")]
        {
            let mut o = o.clone();
            // The workload's partitions per pop is Queen's partitions_per_pop.
            if ctx.pop_partitions > 1 {
                o.partitions_per_pop = u32::try_from(ctx.pop_partitions).unwrap_or(u32::MAX);
            }
            crate::queen::QueenBroker::new(o)
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(config_error(&Self::ENTRY))
        }
        #[cfg(not(feature = "queen"))]
        {
            let _ = (o, ctx);
            Err(Self::ENTRY.not_built())
        }
    }

    fn bare_check(o: &QueenOptions) -> Result<(), BareError> {
        let _ = o;
        match cfg!(feature = "queen") {
            true => Ok(()),
            false => Err(bare_not_built(&Self::ENTRY)),
        }
    }

    async fn bare(o: &QueenOptions, plan: &BarePlan) -> Result<Box<dyn BareClient>, BareError> {
        #[cfg(feature = "queen")]
        {
            crate::queen::bare::QueenBare::start(o, plan)
                .await
                .map(|b| Box::new(b) as Box<dyn BareClient>)
                .map_err(|source| BareError::Setup {
                    name: Self::ENTRY.name,
                    source,
                })
        }
        #[cfg(not(feature = "queen"))]
        {
            let _ = (o, plan);
            Err(bare_not_built(&Self::ENTRY))
        }
    }
}
