//! One way to open the bus: [`open`] turns `[bus]` into a [`Bus`] that hands out producers
//! and consumers and creates topics, whichever the kind. A service never matches on the
//! kind itself, and only this crate (feature `kafka`) knows Kafka.

use std::sync::Arc;

use crate::{BusConfig, BusError, BusKind, Consumer, EmbeddedBus, EmbeddedGroup, Producer};

/// The bus a service runs on.
#[derive(Clone, Debug)]
pub enum Bus {
    /// In-process: shared by the services of `kplane up`, or a stand-alone service's own
    /// (which nothing else writes to).
    Embedded(EmbeddedBus),
    /// A Kafka cluster, with the client metrics of everything opened on it.
    #[cfg(feature = "kafka")]
    Kafka {
        cfg: Box<crate::KafkaConfig>,
        metrics: crate::kafka::KafkaMetrics,
    },
}

/// Opens the configured bus: `embedded` is a fresh in-process bus (to share one between
/// services, wrap it: [`Bus::Embedded`]); `kafka` needs the `kafka` feature.
pub fn open(cfg: &BusConfig) -> Result<Bus, BusError> {
    match cfg.kind {
        BusKind::Embedded => Ok(Bus::Embedded(EmbeddedBus::new())),
        #[cfg(feature = "kafka")]
        BusKind::Kafka => Ok(Bus::Kafka {
            cfg: Box::new(cfg.kafka.clone()),
            metrics: crate::kafka::KafkaMetrics::default(),
        }),
        #[cfg(not(feature = "kafka"))]
        BusKind::Kafka => Err(BusError::Kafka(
            "this build has no Kafka bus (kplane-bus feature `kafka`)".into(),
        )),
    }
}

impl Bus {
    pub fn is_embedded(&self) -> bool {
        matches!(self, Self::Embedded(_))
    }

    /// Creates the topics that are missing; on Kafka also checks the partition counts of
    /// those that exist. `capacity`: messages an in-process partition holds unconsumed.
    pub async fn ensure_topics(
        &self,
        wanted: &[(&str, u32)],
        capacity: usize,
    ) -> Result<(), BusError> {
        match self {
            Self::Embedded(bus) => {
                for (topic, partitions) in wanted {
                    bus.create_topic(topic, *partitions, capacity);
                }
                Ok(())
            }
            #[cfg(feature = "kafka")]
            Self::Kafka { cfg, .. } => Ok(crate::kafka::ensure_topics(cfg, wanted).await?),
        }
    }

    /// A producer to `topics` (with their partition counts; the in-process bus knows them).
    #[cfg_attr(not(feature = "kafka"), allow(unused_variables))]
    pub fn producer(&self, topics: &[(&str, u32)]) -> Result<Arc<dyn Producer>, BusError> {
        match self {
            Self::Embedded(bus) => Ok(Arc::new(bus.clone())),
            #[cfg(feature = "kafka")]
            Self::Kafka { cfg, metrics } => Ok(Arc::new(
                crate::kafka::KafkaProducer::new(cfg, topics, metrics.clone())
                    .map_err(|e| BusError::Unavailable(format!("kafka producer: {e}")))?,
            )),
        }
    }

    /// A member of `service`'s consumer group reading `topics` (the group is named by
    /// [`crate::KafkaConfig::group_of`] on Kafka, by the service in process).
    pub fn consumer(&self, service: &str, topics: &[&str]) -> Result<Box<dyn Consumer>, BusError> {
        match self {
            Self::Embedded(bus) => Ok(Box::new(EmbeddedGroup::subscribe(bus, topics, service)?)),
            #[cfg(feature = "kafka")]
            Self::Kafka { cfg, metrics } => Ok(Box::new(crate::kafka::KafkaConsumer::subscribe(
                cfg,
                &cfg.group_of(service),
                topics,
                metrics.clone(),
            )?)),
        }
    }

    /// The Kafka client's metrics, to register with the service's (none in process).
    #[cfg(feature = "kafka")]
    pub fn kafka_metrics(&self) -> Option<&crate::kafka::KafkaMetrics> {
        match self {
            Self::Embedded(_) => None,
            Self::Kafka { metrics, .. } => Some(metrics),
        }
    }
}
