//! From breaches to incidents: immediate events grouped into episodes per (kind, entity,
//! metric) ([`episodes`]), and episodes and knowledge anomalies that share a root within a
//! time span correlated into incidents ([`book`]: the rules; [`root`]: what a breach is
//! rooted at). The API serves and pages them; the evaluation scores them against its ground
//! truth. See `docs/incidents.md`.

pub mod book;
pub mod episodes;
pub mod root;
#[cfg(feature = "arrow")]
pub mod table;

pub use book::{Change, Counts, Incident, IncidentBook, Member, News};
pub use episodes::{Episode, EpisodeBook, Phase, Subject};
pub use root::{Root, RootKind};
