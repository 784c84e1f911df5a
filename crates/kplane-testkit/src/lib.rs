//! Helpers for end-to-end tests that drive kplane binaries over real sockets, and the veth
//! wire `kplane bench` sends over. Panics are how a test helper fails a test.

use std::net::SocketAddr;
use std::process::Child;
use std::time::Duration;

pub use kplane_runtime::probe::metric_sum;

pub mod alertmanager;
pub mod bmv2;
pub mod netns;
pub mod prometheus;
pub mod reports;
pub mod s3;
mod served;

/// A TCP port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `GET path` on 127.0.0.1:port; the raw response, or `None` if nothing answers.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    kplane_runtime::probe::http_get(SocketAddr::from(([127, 0, 0, 1], port)), path)
}

/// Waits until `GET /readyz` on `port` answers 200, or fails the test after `timeout`.
pub fn wait_ready(port: u16, timeout: Duration) {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    assert!(
        kplane_runtime::probe::wait_ready(addr, timeout),
        "port {port} never became ready"
    );
}

/// Sends SIGTERM to a child process.
/// A child process that is killed (SIGKILL) and reaped when dropped, so a test that panics
/// half-way leaves no service running behind it. Derefs to the [`Child`].
#[derive(Debug)]
pub struct ChildGuard(Option<Child>);

impl ChildGuard {
    pub fn new(child: Child) -> Self {
        Self(Some(child))
    }

    /// The child, no longer killed on drop (e.g. for `wait_with_output`).
    pub fn into_inner(mut self) -> Child {
        self.0.take().expect("a guard holds its child until taken")
    }
}

impl From<Child> for ChildGuard {
    fn from(child: Child) -> Self {
        Self::new(child)
    }
}

impl std::ops::Deref for ChildGuard {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0
            .as_ref()
            .expect("a guard holds its child until taken")
    }
}

impl std::ops::DerefMut for ChildGuard {
    fn deref_mut(&mut self) -> &mut Child {
        self.0
            .as_mut()
            .expect("a guard holds its child until taken")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = self.0.as_mut()
            && let Ok(None) = child.try_wait()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn sigterm(child: &Child) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits");
    // SAFETY: kill(2) with a valid signal number on our own child's pid.
    let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(rc, 0, "kill -TERM {pid}");
}

/// The broker for tests that need Kafka: `KPLANE_KAFKA_BROKERS`, or `None` (the test then
/// returns early) — unless `KPLANE_REQUIRE_KAFKA` is set, as in CI, where that fails the test.
/// A name part unique to this test run (process id and start time in ms): consumer groups,
/// data directories and topics that outlive a run on a persistent broker stay apart.
pub fn run_id() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{}-{ms}", std::process::id())
}

pub fn kafka_brokers() -> Option<String> {
    match std::env::var("KPLANE_KAFKA_BROKERS") {
        Ok(b) if !b.is_empty() => Some(b),
        _ => {
            assert!(
                std::env::var_os("KPLANE_REQUIRE_KAFKA").is_none(),
                "KPLANE_REQUIRE_KAFKA is set but KPLANE_KAFKA_BROKERS is not"
            );
            eprintln!("KPLANE_KAFKA_BROKERS unset: Kafka tests not run");
            None
        }
    }
}

/// An HTTP/1.1 answer: status, lower-cased headers, body.
#[derive(Clone, Debug)]
pub struct HttpAnswer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl HttpAnswer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics, naming the body, when it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.body))
    }
}

/// One request over a fresh connection (`Connection: close`), with an optional bearer token
/// and JSON body; reads up to `max_body` bytes of the answer (for streams) or to the end.
pub fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> std::io::Result<HttpAnswer> {
    http_limited(addr, method, path, token, body, usize::MAX)
}

pub fn http_limited(
    addr: SocketAddr,
    method: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
    max_body: usize,
) -> std::io::Result<HttpAnswer> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    if let Some(t) = token {
        req += &format!("Authorization: Bearer {t}\r\n");
    }
    if let Some(b) = body {
        req += &format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            b.len()
        );
    }
    req += "\r\n";
    req += body.unwrap_or("");
    s.write_all(req.as_bytes())?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let mut head_end = None;
    loop {
        let n = match s.read(&mut buf) {
            Ok(n) => n,
            Err(e) if !raw.is_empty() && e.kind() == std::io::ErrorKind::WouldBlock => 0,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        raw.extend_from_slice(&buf[..n]);
        if head_end.is_none() {
            head_end = raw.windows(4).position(|w| w == b"\r\n\r\n");
        }
        if let Some(h) = head_end
            && raw.len() - h - 4 >= max_body
        {
            break;
        }
    }
    let h = head_end.ok_or_else(|| std::io::Error::other("no HTTP header"))?;
    let head = String::from_utf8_lossy(&raw[..h]).to_string();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("no status"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut body = raw[h + 4..].to_vec();
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"))
    {
        body = dechunk(&body);
    }
    Ok(HttpAnswer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).to_string(),
    })
}

/// Undoes chunked transfer encoding (as far as the bytes go).
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok());
        let Some(size) = size else { break };
        if size == 0 {
            break;
        }
        let start = eol + 2;
        let end = (start + size).min(b.len());
        out.extend_from_slice(&b[start..end]);
        b = &b[(end + 2).min(b.len())..];
    }
    out
}

/// `s` percent-encoded for a URL's query string (everything but unreserved characters).
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
