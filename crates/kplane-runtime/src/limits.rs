//! What one token may do per minute and at once: the API's `query-rate`, `intent-rate` and
//! `query-concurrency`. Past a limit, [`AuthError::TooManyRequests`] (429 with `Retry-After`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::auth::{AuthError, Identity};

/// (token, budget) → (the start of its current minute, spent in it).
type Windows = HashMap<(String, &'static str), (Instant, u32)>;

/// Per-token rate limits (a fixed one-minute window per token and budget) and running-work
/// counts; cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Limits {
    windows: Arc<Mutex<Windows>>,
    running: Arc<Mutex<HashMap<String, usize>>>,
}

impl Limits {
    /// Spends one of `who`'s `per_minute` for `budget` (what it is spent on, e.g. "queries"),
    /// or 429 with the seconds to wait.
    pub fn spend(
        &self,
        who: &Identity,
        budget: &'static str,
        per_minute: u32,
    ) -> Result<(), AuthError> {
        let mut w = self.windows.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let slot = w.entry((who.name.clone(), budget)).or_insert((now, 0));
        if now.duration_since(slot.0) >= Duration::from_secs(60) {
            *slot = (now, 0);
        }
        if slot.1 >= per_minute {
            let wait = Duration::from_secs(60).saturating_sub(now.duration_since(slot.0));
            return Err(AuthError::TooManyRequests {
                message: format!(
                    "token {:?} made its {per_minute} {budget} of this minute",
                    who.name
                ),
                retry_after: wait.as_secs().max(1),
            });
        }
        slot.1 += 1;
        Ok(())
    }

    /// Counts a running query of `who` until the guard drops, or 429 past `max` at once.
    pub fn run_query(&self, who: &Identity, max: usize) -> Result<Running, AuthError> {
        let mut r = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        let n = r.entry(who.name.clone()).or_insert(0);
        if *n >= max {
            return Err(AuthError::TooManyRequests {
                message: format!(
                    "token {:?} already runs {max} queries (query-concurrency)",
                    who.name
                ),
                retry_after: 1,
            });
        }
        *n += 1;
        Ok(Running {
            running: self.running.clone(),
            name: who.name.clone(),
        })
    }
}

/// Running work, counted against its token until dropped.
#[derive(Debug)]
pub struct Running {
    running: Arc<Mutex<HashMap<String, usize>>>,
    name: String,
}

impl Drop for Running {
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
    use crate::auth::Role;

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
            l.spend(&who("a"), "queries", 3).unwrap();
        }
        match l.spend(&who("a"), "queries", 3) {
            Err(AuthError::TooManyRequests { retry_after, .. }) => {
                assert!((1..=60).contains(&retry_after))
            }
            other => panic!("{other:?}"),
        }
        l.spend(&who("b"), "queries", 3).unwrap();
        l.spend(&who("a"), "intent changes", 3).unwrap();
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
