//! pgmq in the registry ([`crate::registry::SystemDef`]): its entry, its
//! options, how its adapter is built (with the `pgmq` feature; without it, a clear
//! `not built`), and its bare loop.

use std::sync::Arc;

use crate::bare::{BareClient, BareError, BarePlan};
use crate::broker::Broker;
use crate::pgmq::PgmqOptions;
#[cfg(feature = "pgmq")]
use crate::registry::config_error;
use crate::registry::{
    bare_not_built, BuildContext, BuildError, Capabilities, Entry, SharedConsumers, System,
    SystemDef, PLAIN,
};

/// pgmq, as the registry lists it.
#[derive(Debug)]
pub struct Pgmq;

impl SystemDef for Pgmq {
    type Options = PgmqOptions;

    const ENTRY: Entry = Entry {
            system: System::Pgmq,
            name: "pgmq",
            title: "PostgreSQL + pgmq",
            feature: Some("pgmq"),
            built: cfg!(feature = "pgmq"),
            capabilities: Capabilities {
                shared_consumers: SharedConsumers::Exclusive(
                    "read_grouped_head hands out a key's head row only while no row of the key is invisible, whichever process reads; read_grouped_rr has the same exclusivity race across processes as within one (finding F3)",
                ),
                ..PLAIN
            },
            memory_note: Some(
                "RAM here: RSS summed over PostgreSQL's processes, which counts shared buffers once per backend and overstates; the published figure is the container's memory.current.",
            ),
    };

    fn build(o: &PgmqOptions, ctx: &BuildContext) -> Result<Arc<dyn Broker>, BuildError> {
        #[cfg(feature = "pgmq")]
        {
            crate::pgmq::PgmqBroker::new(o.clone())
                .map(|b| Arc::new(b.with_clients(ctx.clients)) as Arc<dyn Broker>)
                .map_err(config_error(&Self::ENTRY))
        }
        #[cfg(not(feature = "pgmq"))]
        {
            let _ = (o, ctx);
            Err(Self::ENTRY.not_built())
        }
    }

    fn bare_check(o: &PgmqOptions) -> Result<(), BareError> {
        let _ = o;
        match cfg!(feature = "pgmq") {
            true => Ok(()),
            false => Err(bare_not_built(&Self::ENTRY)),
        }
    }

    async fn bare(o: &PgmqOptions, plan: &BarePlan) -> Result<Box<dyn BareClient>, BareError> {
        #[cfg(feature = "pgmq")]
        {
            crate::pgmq::bare::PgmqBare::start(o, plan)
                .await
                .map(|b| Box::new(b) as Box<dyn BareClient>)
                .map_err(|source| BareError::Setup {
                    name: Self::ENTRY.name,
                    source,
                })
        }
        #[cfg(not(feature = "pgmq"))]
        {
            let _ = (o, plan);
            Err(bare_not_built(&Self::ENTRY))
        }
    }
}
