//! `[intent-api.incidents]`: the correlation's time span and where incidents are sent.

use std::net::ToSocketAddrs;
use std::time::Duration;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct IncidentsConfig {
    /// An incident resolves once none of its breaches has been open for this long (event
    /// time); a breach of its root within it joins it again.
    #[serde(with = "humantime_serde")]
    pub hold: Duration,
    /// Resolved incidents kept in memory for `GET /v1/incidents`.
    pub keep: usize,
    /// Write resolved incidents to the store's `incidents` table (leave it on in one API
    /// replica only: each would write its own copy).
    pub store: bool,
    /// Prometheus Alertmanager's base URL (`http://alertmanager:9093`); empty: not sent.
    pub alertmanager: String,
    /// A URL every incident change is POSTed to as JSON; empty: not sent.
    pub webhook: String,
    /// The `fabric` label of every notification.
    pub fabric: String,
    /// The console's address in notifications' links (default: where the API listens).
    pub console_url: String,
    /// Notifications waiting per sink; past it they are dropped and counted.
    pub queue: usize,
    /// Tries per notification before it counts as failed.
    pub attempts: u32,
    /// How long one try may take.
    #[serde(with = "humantime_serde")]
    pub timeout: Duration,
    /// Open incidents are sent to Alertmanager again this often (keep it below
    /// Alertmanager's `resolve_timeout`, 5 minutes by default).
    #[serde(with = "humantime_serde")]
    pub resend: Duration,
}

impl Default for IncidentsConfig {
    fn default() -> Self {
        Self {
            hold: Duration::from_secs(10),
            keep: 1_000,
            store: true,
            alertmanager: String::new(),
            webhook: String::new(),
            fabric: "kplane".into(),
            console_url: String::new(),
            queue: 1_024,
            attempts: 4,
            timeout: Duration::from_secs(5),
            resend: Duration::from_secs(60),
        }
    }
}

impl IncidentsConfig {
    pub fn check(&self, problems: &mut Vec<String>) {
        for (key, url) in [
            ("alertmanager", &self.alertmanager),
            ("webhook", &self.webhook),
        ] {
            if let Err(e) = Url::parse(url) {
                problems.push(format!("intent-api.incidents.{key}: {e}"));
            }
        }
        if self.keep == 0 || self.queue == 0 || self.attempts == 0 {
            problems.push("intent-api.incidents: keep, queue and attempts must be >= 1".into());
        }
        if self.resend < Duration::from_secs(1) || self.timeout < Duration::from_millis(10) {
            problems.push("intent-api.incidents: resend must be >= 1s, timeout >= 10ms".into());
        }
    }
}

/// An `http://host[:port][/path]` target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    /// `host:port`, resolved at every request (a name may move).
    authority: String,
    path: String,
}

impl Url {
    /// `None` for an empty string (no target).
    pub(crate) fn parse(url: &str) -> Result<Option<Self>, String> {
        if url.is_empty() {
            return Ok(None);
        }
        let rest = url.strip_prefix("http://").ok_or_else(|| {
            format!(
                "{url:?}: only http:// targets (for TLS, put a proxy such as deploy/tls's \
                 nginx in front)"
            )
        })?;
        let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        if host.is_empty() {
            return Err(format!("{url:?}: no host"));
        }
        let authority = if host
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            host.to_string()
        } else {
            format!("{host}:80")
        };
        Ok(Some(Self {
            authority,
            path: path.trim_end_matches('/').to_string(),
        }))
    }

    /// This URL with `suffix` appended to its path.
    pub fn join(&self, suffix: &str) -> Self {
        Self {
            authority: self.authority.clone(),
            path: format!("{}{suffix}", self.path),
        }
    }

    /// POSTs `body` as JSON; the answer's status.
    pub fn post(&self, body: &str, timeout: Duration) -> std::io::Result<u16> {
        let addr = self
            .authority
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| std::io::Error::other(format!("{}: no address", self.authority)))?;
        let path = if self.path.is_empty() {
            "/"
        } else {
            &self.path
        };
        kplane_runtime::probe::request(addr, "POST", path, &[], body, timeout).map(|r| r.status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_plain_http_urls() {
        assert_eq!(Url::parse("").unwrap(), None);
        let u = Url::parse("http://am:9093/").unwrap().unwrap();
        assert_eq!(u.authority, "am:9093");
        assert_eq!(u.join("/api/v2/alerts").path, "/api/v2/alerts");
        let u = Url::parse("http://hooks.local/kplane").unwrap().unwrap();
        assert_eq!(
            (u.authority.as_str(), u.path.as_str()),
            ("hooks.local:80", "/kplane")
        );
        assert!(
            Url::parse("https://am:9093")
                .unwrap_err()
                .contains("only http://")
        );
        assert!(Url::parse("http:///x").is_err());
        let mut problems = Vec::new();
        IncidentsConfig {
            webhook: "ftp://x".into(),
            ..Default::default()
        }
        .check(&mut problems);
        assert_eq!(problems.len(), 1);
    }
}
