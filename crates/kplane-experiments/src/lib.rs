//! # kplane-experiments
//!
//! The seed papers' evaluations re-run on kplane (`kplane experiment …`: a CSV, SVG plots and a
//! markdown table per experiment, docs/experiments.md) and the evaluations against the
//! emulator's ground truth (`kplane eval …`, docs/knowledge.md). Tooling, not a service: the
//! `kplane` binary's subcommands in a crate of their own, which report errors with `anyhow`
//! as the binary does.

pub mod eval;
pub mod experiment;
