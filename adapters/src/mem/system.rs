//! The in-process control broker in the registry ([`crate::registry::SystemDef`]): its entry, its
//! options, how it is built, and no bare loop (it is crossbench's own code).

use std::sync::Arc;

use crate::bare::{BareClient, BareError, BarePlan};
use crate::broker::Broker;
use crate::mem::MemOptions;
use crate::registry::{
    BuildContext, BuildError, Capabilities, Entry, SharedConsumers, System, SystemDef,
};

/// The in-process control broker, as the registry lists it.
#[derive(Debug)]
pub struct Mem;

impl SystemDef for Mem {
    type Options = MemOptions;

    const ENTRY: Entry = Entry {
            system: System::Mem,
            name: "mem",
            title: "control broker (in-process)",
            feature: None,
            built: true,
            capabilities: Capabilities {
                multi_partition_pop: false,
                in_process: true,
                shared_consumers: SharedConsumers::No(
                    "the control broker lives inside one loader's process: no other loader can reach it",
                ),
            },
            memory_note: None,
    };

    fn build(o: &MemOptions, ctx: &BuildContext) -> Result<Arc<dyn Broker>, BuildError> {
        let _ = ctx;
        Ok(Arc::new(crate::mem::MemBroker::new(o.clone())))
    }

    fn bare_check(o: &MemOptions) -> Result<(), BareError> {
        let _ = o;
        Err(no_bare())
    }

    async fn bare(o: &MemOptions, _plan: &BarePlan) -> Result<Box<dyn BareClient>, BareError> {
        let _ = o;
        Err(no_bare())
    }
}

/// Why the control broker has no bare loop.
fn no_bare() -> BareError {
    BareError::Unsupported {
        name: Mem::ENTRY.name,
        why: "the control broker is crossbench's own code; its cost is measured by control-dense and `selftest floor`".into(),
    }
}
