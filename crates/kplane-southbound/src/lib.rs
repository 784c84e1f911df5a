//! # kplane-southbound
//!
//! Switch drivers: how the control plane's table entries reach switches. A driver applies
//! write batches to the switches it serves, reads their entries back, and says what the
//! fabric looks like. One folder per driver, registered in [`DriverConfig`] (one variant and
//! one `build` arm).

mod error;
pub use error::DriverError;

pub mod emulator;
pub mod p4runtime;

use std::future::Future;
use std::pin::Pin;

use kplane_p4::Entry;
use serde::{Deserialize, Serialize};

/// What a write does to an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UpdateKind {
    Insert,
    Modify,
    Delete,
}

/// A boxed future (drivers are used as trait objects).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A switch as intents see it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchNode {
    /// INT node id.
    pub id: u32,
    pub name: String,
    /// Hosts behind it: (IPv4 address or network, prefix length, port).
    pub hosts: Vec<(u32, u32, u32)>,
}

/// A link between two switches: ((switch, port), (switch, port), up).
pub type Link = ((u32, u32), (u32, u32), bool);

/// The fabric the drivers serve.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    pub switches: Vec<SwitchNode>,
    pub links: Vec<Link>,
}

impl Topology {
    pub fn switch(&self, id: u32) -> Option<&SwitchNode> {
        self.switches.iter().find(|s| s.id == id)
    }

    /// The switch at the other end of `switch`'s `port` (none: a host port, or no such port).
    pub fn peer(&self, switch: u32, port: u32) -> Option<u32> {
        self.links.iter().find_map(|&((a, pa), (b, pb), _)| {
            if (a, pa) == (switch, port) {
                Some(b)
            } else if (b, pb) == (switch, port) {
                Some(a)
            } else {
                None
            }
        })
    }

    /// The ports of switch `id` that lead somewhere: to its hosts and its links.
    pub fn ports(&self, id: u32) -> Vec<u32> {
        let hosts = self
            .switch(id)
            .into_iter()
            .flat_map(|s| s.hosts.iter().map(|h| h.2));
        let links = self.links.iter().flat_map(|((a, pa), (b, pb), _)| {
            [(*a == id).then_some(*pa), (*b == id).then_some(*pb)]
                .into_iter()
                .flatten()
        });
        let mut ports: Vec<u32> = hosts.chain(links).collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// Switches with hosts behind them (INT sources and sinks, where ACLs go).
    pub fn edge(&self) -> Vec<u32> {
        self.switches
            .iter()
            .filter(|s| !s.hosts.is_empty())
            .map(|s| s.id)
            .collect()
    }
}

/// What a switch holds now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadBack {
    pub entries: Vec<Entry>,
    /// Changes when the switch restarted or lost its pipeline (its tables are then empty).
    pub epoch: u64,
}

/// A way to program switches.
pub trait SwitchDriver: Send + Sync + std::fmt::Debug {
    /// The driver's registry name.
    fn kind(&self) -> &'static str;
    /// The switches it serves and their links.
    fn topology(&self) -> BoxFuture<'_, Result<Topology, DriverError>>;
    /// Applies a batch to one switch. On error `failed` names the refused updates; the
    /// others stay applied (the caller undoes them).
    fn write(
        &self,
        switch: u32,
        updates: Vec<(UpdateKind, Entry)>,
    ) -> BoxFuture<'_, Result<(), DriverError>>;
    /// The switch's entries (only the tables intents use) and its epoch.
    fn read(&self, switch: u32) -> BoxFuture<'_, Result<ReadBack, DriverError>>;
    /// Makes the switch ready for intents before any exists — at start, and again after it
    /// restarted: kplane's pipeline, the configured entries, clone sessions. Its epoch when
    /// that says something. The default: nothing to push (the emulator's switches run the
    /// program from the start).
    fn provision(&self, switch: u32) -> BoxFuture<'_, Result<Option<u64>, DriverError>> {
        let _ = switch;
        Box::pin(async { Ok(None) })
    }
}

/// `[[intent-api.drivers]]`: one table per driver, `kind` picks it.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DriverConfig {
    /// The emulator's control channel (`kplane emulate --control`, `kplane up`).
    Emulator(emulator::Config),
    /// A P4Runtime switch (BMv2 `simple_switch_grpc`, hardware).
    P4runtime(p4runtime::Config),
}

impl DriverConfig {
    pub fn build(&self) -> Box<dyn SwitchDriver> {
        match self {
            Self::Emulator(c) => Box::new(emulator::Driver::new(c.clone())),
            Self::P4runtime(c) => Box::new(p4runtime::Driver::new(c.clone())),
        }
    }

    pub fn check(&self, problems: &mut Vec<String>) {
        match self {
            Self::Emulator(_) => {}
            Self::P4runtime(c) => c.check(problems),
        }
    }
}
