//! Reports the collector's end-to-end tests send.

#[allow(unused_imports, reason = "each test binary uses some of the helpers")]
pub use kplane_testkit::reports::{flow_report, report};
