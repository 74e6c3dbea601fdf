//! Redis Streams in the registry ([`crate::registry::SystemDef`]): its entry, its
//! options, how its adapter is built (with the `redis` feature; without it, a clear
//! `not built`), and its bare loop.

use std::sync::Arc;

use crate::bare::{BareClient, BareError, BarePlan};
use crate::broker::Broker;
use crate::redis::RedisOptions;
#[cfg(feature = "redis")]
use crate::registry::config_error;
use crate::registry::{
    bare_not_built, BuildContext, BuildError, Capabilities, Entry, SharedConsumers, System,
    SystemDef, PLAIN,
};

/// Redis Streams, as the registry lists it.
#[derive(Debug)]
pub struct Redis;

impl SystemDef for Redis {
    type Options = RedisOptions;

    const ENTRY: Entry = Entry {
            system: System::Redis,
            name: "redis",
            title: "Redis Streams",
            feature: Some("redis"),
            built: cfg!(feature = "redis"),
            capabilities: Capabilities {
                shared_consumers: SharedConsumers::No(
                    "each lane is read by one consumer of the group: readers in two processes would split a key's entries between them",
                ),
                ..PLAIN
            },
            memory_note: Some(
                "RAM here: redis-server's RSS; the adapter also records INFO memory's used_memory (redis_server_used_memory_bytes).",
            ),
    };

    fn build(o: &RedisOptions, ctx: &BuildContext) -> Result<Arc<dyn Broker>, BuildError> {
        #[cfg(feature = "redis")]
        {
            // The build context matters only to pgmq and Queen.
            let _ = ctx;
            crate::redis::RedisBroker::new(o.clone())
                .map(|b| Arc::new(b) as Arc<dyn Broker>)
                .map_err(config_error(&Self::ENTRY))
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = (o, ctx);
            Err(Self::ENTRY.not_built())
        }
    }

    fn bare_check(o: &RedisOptions) -> Result<(), BareError> {
        let _ = o;
        match cfg!(feature = "redis") {
            true => Ok(()),
            false => Err(bare_not_built(&Self::ENTRY)),
        }
    }

    async fn bare(o: &RedisOptions, plan: &BarePlan) -> Result<Box<dyn BareClient>, BareError> {
        #[cfg(feature = "redis")]
        {
            crate::redis::bare::RedisBare::start(o, plan)
                .await
                .map(|b| Box::new(b) as Box<dyn BareClient>)
                .map_err(|source| BareError::Setup {
                    name: Self::ENTRY.name,
                    source,
                })
        }
        #[cfg(not(feature = "redis"))]
        {
            let _ = (o, plan);
            Err(bare_not_built(&Self::ENTRY))
        }
    }
}
