//! What the control plane reads of the telemetry, provided by whoever follows the result
//! topics (the API's live views): the latest `flows` windows that verification compares with
//! an intent's expected effect, and the knowledge service's anomalies whose recommendations
//! become intents.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use arrow_array::RecordBatch;
use kplane_model::results::{Anomaly, Forecast};
use tokio::sync::broadcast;

/// Fresh telemetry for verification and recommendations.
pub trait Telemetry: Send + Sync + 'static {
    /// The latest `flows` window of every partition.
    fn latest_flows(&self) -> Vec<RecordBatch>;

    /// Resolves once a `flows` window has arrived (since the last call), so verification
    /// need not wait for its interval.
    fn flows_arrived(&self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;

    /// Anomalies as the knowledge service raises them.
    fn anomalies(&self) -> broadcast::Receiver<Arc<Anomaly>>;

    /// The knowledge service's latest `link_utilization` forecast of every link.
    fn link_forecasts(&self) -> Vec<Forecast>;
}
