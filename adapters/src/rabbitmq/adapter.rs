//! PLACEHOLDER: being written; replaced by the real adapter before this lands.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use super::RabbitOptions;
use crate::broker::{BatchHandler, Broker, ConsumeOptions, Description, Topology};
use crate::error::BrokerError;

#[derive(Debug)]
pub struct RabbitBroker {
    _options: RabbitOptions,
}

impl RabbitBroker {
    pub fn new(options: RabbitOptions) -> Result<Self, BrokerError> {
        Ok(RabbitBroker { _options: options })
    }
}

fn todo() -> BrokerError {
    BrokerError::Other("the rabbitmq adapter is not written yet".into())
}

#[async_trait]
impl Broker for RabbitBroker {
    async fn setup(&self, _t: &Topology) -> Result<Description, BrokerError> {
        Err(todo())
    }
    async fn publish(&self, _t: &str, _k: &str, _p: &[Bytes]) -> Result<(), BrokerError> {
        Err(todo())
    }
    async fn consume(
        &self,
        _t: &str,
        _g: &str,
        _o: ConsumeOptions,
        _h: Arc<dyn BatchHandler>,
        _s: CancellationToken,
    ) -> Result<(), BrokerError> {
        Err(todo())
    }
    fn counters(&self) -> BTreeMap<String, u64> {
        BTreeMap::new()
    }
    async fn close(&self) -> Result<(), BrokerError> {
        Ok(())
    }
}
