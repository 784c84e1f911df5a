//! Who may call the API and how much. The tokens and roles are the runtime's
//! ([`kplane_runtime::auth`], shared by every kplane listener); here, what one token may do
//! per minute and at once (`query-rate`, `intent-rate`, `query-concurrency`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub use kplane_runtime::auth::{Auth, Identity, Role, TokenConfig, hash_token, new_token, require};

use crate::error::ApiError;

/// What a token's per-minute budget is spent on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Budget {
    /// `POST /v1/query`.
    Query,
    /// Submitting, approving and deleting intents.
    IntentChange,
}

impl Budget {
    fn as_str(self) -> &'static str {
        match self {
            Self::Query => "queries",
            Self::IntentChange => "intent changes",
        }
    }
}

/// Per-token rate limits (a fixed one-minute window each) and running-query counts.
#[derive(Debug, Default)]
pub struct Limits {
    windows: Mutex<HashMap<(String, Budget), (Instant, u32)>>,
    running: Arc<Mutex<HashMap<String, usize>>>,
}

impl Limits {
    /// Spends one of `who`'s `per_minute` for `budget`, or 429 with the seconds to wait.
    pub fn spend(&self, who: &Identity, budget: Budget, per_minute: u32) -> Result<(), ApiError> {
        let mut w = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let slot = w.entry((who.name.clone(), budget)).or_insert((now, 0));
        if now.duration_since(slot.0) >= Duration::from_secs(60) {
            *slot = (now, 0);
        }
        if slot.1 >= per_minute {
            let wait = Duration::from_secs(60).saturating_sub(now.duration_since(slot.0));
            return Err(ApiError::TooManyRequests {
                message: format!(
                    "token {:?} made its {per_minute} {} of this minute",
                    who.name,
                    budget.as_str()
                ),
                retry_after: wait.as_secs().max(1),
            });
        }
        slot.1 += 1;
        Ok(())
    }

    /// Counts a running query of `who` until the guard drops, or 429 past `max` at once.
    pub fn run_query(&self, who: &Identity, max: usize) -> Result<RunningQuery, ApiError> {
        let mut r = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let n = r.entry(who.name.clone()).or_insert(0);
        if *n >= max {
            return Err(ApiError::TooManyRequests {
                message: format!(
                    "token {:?} already runs {max} queries (query-concurrency)",
                    who.name
                ),
                retry_after: 1,
            });
        }
        *n += 1;
        Ok(RunningQuery {
            running: self.running.clone(),
            name: who.name.clone(),
        })
    }
}

/// A running query, counted against its token until dropped.
#[derive(Debug)]
pub struct RunningQuery {
    running: Arc<Mutex<HashMap<String, usize>>>,
    name: String,
}

impl Drop for RunningQuery {
    fn drop(&mut self) {
        let mut r = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = r.get_mut(&self.name) {
            *n = n.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(name: &str) -> Identity {
        Identity {
            name: name.into(),
            role: Role::Viewer,
        }
    }

    #[test]
    fn a_token_spends_its_own_minute() {
        let l = Limits::default();
        for _ in 0..3 {
            l.spend(&who("a"), Budget::Query, 3).unwrap();
        }
        match l.spend(&who("a"), Budget::Query, 3) {
            Err(ApiError::TooManyRequests { retry_after, .. }) => {
                assert!((1..=60).contains(&retry_after))
            }
            other => panic!("{other:?}"),
        }
        l.spend(&who("b"), Budget::Query, 3).unwrap();
        l.spend(&who("a"), Budget::IntentChange, 3).unwrap();
    }

    #[test]
    fn running_queries_are_counted_until_dropped() {
        let l = Limits::default();
        let first = l.run_query(&who("a"), 1).unwrap();
        assert!(l.run_query(&who("a"), 1).is_err());
        assert!(l.run_query(&who("b"), 1).is_ok());
        drop(first);
        assert!(l.run_query(&who("a"), 1).is_ok());
    }
}
