//! Topics at start-up: create what is missing, check what exists.

use std::time::Duration;

use crate::KafkaConfig;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::types::RDKafkaErrorCode;

use super::KafkaBusError;
use super::client::admin_config;

const TIMEOUT: Duration = Duration::from_secs(10);

/// Creates each `(topic, partitions)` that is missing (when `create-topics` is on), then checks
/// that every one exists with exactly that many partitions: a flow's records must always map
/// to the same partition, so a different count is an error, not a warning.
pub async fn ensure_topics(cfg: &KafkaConfig, wanted: &[(&str, u32)]) -> Result<(), KafkaBusError> {
    let admin: AdminClient<DefaultClientContext> = admin_config(cfg).create()?;
    if cfg.create_topics {
        let retention = cfg.retention.as_millis().to_string();
        let new: Vec<NewTopic<'_>> = wanted
            .iter()
            .map(|&(name, partitions)| {
                NewTopic::new(
                    name,
                    partitions as i32,
                    TopicReplication::Fixed(cfg.replication_factor),
                )
                .set("retention.ms", &retention)
            })
            .collect();
        let opts = AdminOptions::new().operation_timeout(Some(TIMEOUT));
        for result in admin.create_topics(&new, &opts).await? {
            match result {
                Ok(topic) => tracing::info!(topic, "created topic"),
                Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                Err((topic, code)) => {
                    return Err(KafkaBusError::Topic {
                        topic,
                        reason: format!("cannot be created: {code}"),
                    });
                }
            }
        }
    }
    for &(topic, expected) in wanted {
        let actual = partition_count(&admin, topic)?;
        if actual != expected {
            return Err(KafkaBusError::PartitionCount {
                topic: topic.to_string(),
                actual,
                expected,
            });
        }
    }
    Ok(())
}

fn partition_count(
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
) -> Result<u32, KafkaBusError> {
    let md = admin.inner().fetch_metadata(Some(topic), TIMEOUT)?;
    let Some(t) = md.topics().iter().find(|t| t.name() == topic) else {
        return Err(KafkaBusError::Topic {
            topic: topic.to_string(),
            reason: "missing from the cluster's metadata".into(),
        });
    };
    if let Some(e) = t.error() {
        return Err(KafkaBusError::Topic {
            topic: topic.to_string(),
            reason: format!(
                "does not exist ({}); create it or set kafka.create-topics = true",
                RDKafkaErrorCode::from(e)
            ),
        });
    }
    Ok(t.partitions().len() as u32)
}
