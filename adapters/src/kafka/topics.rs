//! Topic administration: create, delete, and wait for either by metadata (never by
//! sleeping a fixed time), through the Kafka admin API.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::metadata::Metadata;
use rdkafka::types::RDKafkaErrorCode;

use crate::error::BrokerError;

/// One topic as metadata shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TopicState {
    pub partitions: usize,
    /// Every partition has a leader.
    pub led: bool,
}

/// The admin client and how long its operations may take.
pub(super) struct Admin {
    client: Arc<AdminClient<DefaultClientContext>>,
    timeout: Duration,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Admin")
    }
}

/// A failure of the request itself that a retry can cure (the broker dropped the
/// connection, or was briefly unreachable), as opposed to the broker's answer.
fn transient(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::BrokerTransportFailure
                | RDKafkaErrorCode::AllBrokersDown
                | RDKafkaErrorCode::NetworkException
                | RDKafkaErrorCode::RequestTimedOut
                | RDKafkaErrorCode::OperationTimedOut
        )
    )
}

/// The broker's answer to a per-topic admin request.
fn answer(code: RDKafkaErrorCode) -> String {
    format!("{code:?} ({code})")
}

impl Admin {
    pub fn new(client: AdminClient<DefaultClientContext>, timeout: Duration) -> Admin {
        Admin {
            client: Arc::new(client),
            timeout,
        }
    }

    fn opts(&self) -> AdminOptions {
        AdminOptions::new()
            .request_timeout(Some(self.timeout))
            .operation_timeout(Some(self.timeout))
    }

    /// Run an admin request, retrying transport failures with backoff until the admin
    /// timeout (a broker under load may drop a connection mid-request; the operations
    /// used here are safe to repeat: a repeated delete answers UnknownTopicOrPartition,
    /// a repeated create TopicAlreadyExists, and both are handled).
    async fn with_retries<T, F, Fut>(&self, what: &str, mut request: F) -> Result<T, BrokerError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = KafkaResult<T>>,
    {
        let deadline = Instant::now() + self.timeout;
        let mut backoff = Duration::from_millis(100);
        loop {
            match request().await {
                Ok(v) => return Ok(v),
                Err(e) if transient(&e) && Instant::now() + backoff < deadline => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
                Err(e) => return Err(BrokerError::Connection(format!("{what}: {e}"))),
            }
        }
    }

    /// Metadata of the whole cluster, off the runtime (librdkafka blocks).
    async fn metadata(&self) -> Result<Metadata, BrokerError> {
        let c = self.client.clone();
        let t = self.timeout.min(Duration::from_secs(10));
        tokio::task::spawn_blocking(move || c.inner().fetch_metadata(None, t))
            .await
            .map_err(|e| BrokerError::Other(format!("metadata task: {e}")))?
            .map_err(|e| BrokerError::Connection(format!("metadata request: {e}")))
    }

    /// Topic name → state, for all topics (listing everything never asks the broker to
    /// auto-create a topic, which naming one could).
    pub async fn topics(&self) -> Result<BTreeMap<String, TopicState>, BrokerError> {
        Ok(self.cluster().await?.0)
    }

    /// [`Admin::topics`], and the id and `host:port` of every broker metadata lists
    /// (the addresses clients connect to, which may differ from the bootstrap list),
    /// from one metadata request.
    pub async fn cluster(
        &self,
    ) -> Result<(BTreeMap<String, TopicState>, Vec<(i32, String)>), BrokerError> {
        let md = self.metadata().await?;
        let topics = md
            .topics()
            .iter()
            .filter(|t| t.error().is_none())
            .map(|t| {
                (
                    t.name().to_string(),
                    TopicState {
                        partitions: t.partitions().len(),
                        led: t.partitions().iter().all(|p| p.leader() >= 0),
                    },
                )
            })
            .collect();
        let brokers = md
            .brokers()
            .iter()
            .map(|b| (b.id(), format!("{}:{}", b.host(), b.port())))
            .collect();
        Ok((topics, brokers))
    }

    /// Delete `names` and wait until metadata no longer lists them. Returns how many
    /// existed.
    pub async fn delete(&self, names: &[String]) -> Result<u64, BrokerError> {
        let existing = self.topics().await?;
        let present: Vec<&str> = names
            .iter()
            .filter(|n| existing.contains_key(n.as_str()))
            .map(|s| s.as_str())
            .collect();
        if present.is_empty() {
            return Ok(0);
        }
        let opts = self.opts();
        let results = self
            .with_retries("DeleteTopics", || {
                self.client.delete_topics(&present, &opts)
            })
            .await?;
        for r in results {
            if let Err((name, code)) = r {
                if code != RDKafkaErrorCode::UnknownTopicOrPartition {
                    return Err(BrokerError::TopologyRefused {
                        what: format!("deleting topic {name}"),
                        answer: answer(code),
                    });
                }
            }
        }
        let deadline = Instant::now() + self.timeout;
        loop {
            let now = self.topics().await?;
            let left: Vec<&&str> = present.iter().filter(|n| now.contains_key(**n)).collect();
            if left.is_empty() {
                return Ok(present.len() as u64);
            }
            if Instant::now() > deadline {
                return Err(BrokerError::Timeout(format!(
                    "topics {left:?} still listed {:?} after DeleteTopics",
                    self.timeout
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Create `names` with `partitions` partitions and `configs`, tolerating topics that
    /// already exist with that partition count, and wait until metadata shows every
    /// partition with a leader. A topic still being deleted is retried until the
    /// timeout. Returns how many were created.
    pub async fn create(
        &self,
        names: &[String],
        partitions: i32,
        replication: i32,
        configs: &[(&str, String)],
    ) -> Result<u64, BrokerError> {
        let deadline = Instant::now() + self.timeout;
        let mut created = 0u64;
        let mut todo: Vec<String> = names.to_vec();
        while !todo.is_empty() {
            let specs: Vec<NewTopic<'_>> = todo
                .iter()
                .map(|n| {
                    configs.iter().fold(
                        NewTopic::new(n, partitions, TopicReplication::Fixed(replication)),
                        |t, (k, v)| t.set(k, v),
                    )
                })
                .collect();
            let opts = self.opts();
            let results = self
                .with_retries("CreateTopics", || {
                    self.client.create_topics(specs.iter(), &opts)
                })
                .await?;
            let mut again = Vec::new();
            for r in results {
                match r {
                    Ok(_) => created += 1,
                    Err((name, RDKafkaErrorCode::TopicAlreadyExists)) => {
                        let state = self.topics().await?.get(&name).cloned();
                        match state {
                            Some(s) if s.partitions == partitions as usize => {}
                            Some(s) => {
                                return Err(BrokerError::Config {
                                    field: "lanes".into(),
                                    message: format!(
                                        "kafka topic {name} exists with {} partitions, the scenario asks for {partitions}; run with reset (drop no_reset) or match lanes",
                                        s.partitions
                                    ),
                                })
                            }
                            // Listed as existing, gone from metadata: a deletion in
                            // progress. Try again.
                            None => again.push(name),
                        }
                    }
                    Err((name, code)) => {
                        let cfg: Vec<String> =
                            configs.iter().map(|(k, v)| format!("{k}={v}")).collect();
                        return Err(BrokerError::TopologyRefused {
                            what: format!(
                                "creating topic {name} with {partitions} partitions, replication {replication}, configs [{}]",
                                cfg.join(", ")
                            ),
                            answer: answer(code),
                        });
                    }
                }
            }
            if !again.is_empty() && Instant::now() > deadline {
                return Err(BrokerError::Timeout(format!(
                    "topics {again:?}: CreateTopics kept answering TopicAlreadyExists for {:?} while metadata did not list them",
                    self.timeout
                )));
            }
            if !again.is_empty() {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            todo = again;
        }
        loop {
            let now = self.topics().await?;
            let ready = names.iter().all(|n| {
                now.get(n)
                    .is_some_and(|s| s.partitions == partitions as usize && s.led)
            });
            if ready {
                return Ok(created);
            }
            if Instant::now() > deadline {
                return Err(BrokerError::Timeout(format!(
                    "topics {names:?} not all listed with {partitions} led partitions after {:?}",
                    self.timeout
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The values broker `id` reports for its configs `keys` (DescribeConfigs of the
    /// broker resource): a key it does not list maps to None; a request it does not
    /// answer is its error, in words.
    pub async fn broker_configs(
        &self,
        id: i32,
        keys: &[&str],
    ) -> Result<BTreeMap<String, Option<String>>, String> {
        let spec = [ResourceSpecifier::Broker(id)];
        let res = self
            .client
            .describe_configs(spec.iter(), &self.opts())
            .await
            .map_err(|e| e.to_string())?;
        let r = res
            .into_iter()
            .next()
            .ok_or_else(|| "DescribeConfigs answered no resource".to_string())?
            .map_err(answer)?;
        Ok(keys
            .iter()
            .map(|k| (k.to_string(), r.get(k).and_then(|e| e.value.clone())))
            .collect())
    }

    /// The value the broker reports for topic config `key` (None when it reports none
    /// or does not answer DescribeConfigs).
    pub async fn topic_config(&self, topic: &str, key: &str) -> Option<String> {
        let spec = [ResourceSpecifier::Topic(topic)];
        let res = self
            .client
            .describe_configs(spec.iter(), &self.opts())
            .await
            .ok()?;
        let r = res.into_iter().next()?.ok()?;
        r.get(key).and_then(|e| e.value.clone())
    }
}
