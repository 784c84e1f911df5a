//! The `kplane` command end to end, one module per scenario. They are one test binary so that
//! the workspace links the full dependency graph once for them, not once per scenario: each
//! link is about half a minute and hundreds of megabytes on the 2-core CI machine.

mod common;

mod bmv2;
mod cli;
mod closed_loop;
mod compose_metrics;
mod crash;
mod deploy;
mod deployed;
mod eval;
mod experiments;
mod intents;
mod kafka;
mod kdn;
mod lab;
mod object_store;
mod parity;
mod scale_out;
mod up;
