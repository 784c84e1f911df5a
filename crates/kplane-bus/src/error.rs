//! The crate's one error type.

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BusError {
    #[error("unknown topic {0}")]
    UnknownTopic(String),
    #[error("topic {topic} has {partitions} partitions; partition {partition} does not exist")]
    UnknownPartition {
        topic: String,
        partition: u32,
        partitions: u32,
    },
    #[error("partition {partition} of {topic} is full ({capacity} messages not yet consumed)")]
    Full {
        topic: String,
        partition: u32,
        capacity: usize,
    },
    #[error("the bus is closed")]
    Closed,
    /// A transient broker condition (unreachable, topic not created yet): try again.
    #[error("bus unavailable: {0}")]
    Unavailable(String),
    #[error("kafka: {0}")]
    Kafka(String),
}

impl BusError {
    /// A bounded label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::UnknownTopic(_) => "unknown_topic",
            Self::UnknownPartition { .. } => "unknown_partition",
            Self::Full { .. } => "full",
            Self::Closed => "closed",
            Self::Unavailable(_) => "unavailable",
            Self::Kafka(_) => "kafka",
        }
    }

    /// Whether trying again later may succeed (a full partition drains, a broker comes
    /// back); the others need a change of configuration or code.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Full { .. } | Self::Unavailable(_))
    }
}
