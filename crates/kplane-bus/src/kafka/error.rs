//! The crate's one error type.

/// What can go wrong talking to Kafka.
#[derive(Debug, thiserror::Error)]
pub enum KafkaBusError {
    #[error("kafka client: {0}")]
    Client(#[from] rdkafka::error::KafkaError),
    #[error(
        "topic {topic} has {actual} partitions but kplane is configured for {expected}; delete and recreate it, or set the partitions key to {actual}"
    )]
    PartitionCount {
        topic: String,
        actual: u32,
        expected: u32,
    },
    #[error("topic {topic}: {reason}")]
    Topic { topic: String, reason: String },
}

impl KafkaBusError {
    /// Whether trying again later may succeed: a client error (a broker unreachable or
    /// restarting) may; a topic that does not fit kplane's configuration will not.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Client(_))
    }
}

impl From<KafkaBusError> for crate::BusError {
    fn from(e: KafkaBusError) -> Self {
        if e.is_retryable() {
            Self::Unavailable(e.to_string())
        } else {
            Self::Kafka(e.to_string())
        }
    }
}
