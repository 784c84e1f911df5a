//! `POST /v1/query` runs user SQL in worker processes, so that no query can take the API
//! down: an allocation past the worker's address space, a stack overflow in a deep plan, or a
//! runaway computation ends (or is killed with) the worker, and the API answers 422 or 504,
//! counts it, and starts a fresh worker for the next query.
//!
//! A worker is this executable run as `<exe> query-worker <store-dir> <memory-bytes>`: it
//! reads one JSON request per line on stdin and answers one JSON line on stdout. The API
//! process itself never parses user SQL (a deep expression tree overflows a stack when it is
//! dropped); it only counts its tokens.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{SessionConfig, SessionContext};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::error::ApiError;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;

/// SQL tokens a query may have: far above any analytics query, far below what takes a
/// planner's recursion deep.
pub const MAX_SQL_TOKENS: usize = 10_000;
/// Largest answer a worker sends (its JSON); a bigger result is refused in the worker.
pub const MAX_ANSWER_BYTES: usize = 64 << 20;
/// The worker's query thread's stack: deep (but bounded) plans fit.
const WORKER_STACK: usize = 256 << 20;

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    sql: String,
    max_rows: usize,
}

/// Refuses SQL with more than [`MAX_SQL_TOKENS`] tokens, without building a syntax tree.
pub fn check_size(sql: &str) -> Result<(), ApiError> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    let tokens = Tokenizer::new(&GenericDialect {}, sql)
        .tokenize()
        .map_err(|e| ApiError::BadRequest(format!("sql: does not parse: {e}")))?;
    let n = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .count();
    if n > MAX_SQL_TOKENS {
        return Err(ApiError::BadRequest(format!(
            "sql: {n} tokens; a query may have {MAX_SQL_TOKENS} at most"
        )));
    }
    Ok(())
}

/// Refuses anything but one read-only query (in the worker: this builds the syntax tree).
pub fn check_read_only(sql: &str) -> Result<(), ApiError> {
    read_only(sql).map_err(ApiError::BadRequest)
}

fn read_only(sql: &str) -> Result<(), String> {
    use datafusion::sql::parser::{DFParser, Statement};
    use datafusion::sql::sqlparser::ast::Statement as Sql;
    let statements = DFParser::parse_sql(sql).map_err(|e| format!("SQL does not parse: {e}"))?;
    match statements.len() {
        0 => return Err("no SQL statement".into()),
        1 => {}
        n => return Err(format!("one statement per request, got {n}")),
    }
    let read_only = |s: &Sql| matches!(s, Sql::Query(_));
    match &statements[0] {
        Statement::Statement(s) if read_only(s) => Ok(()),
        // EXPLAIN of a query only: not of COPY, DDL or DML.
        Statement::Explain(e) => match e.statement.as_ref() {
            Statement::Statement(s) if read_only(s) => Ok(()),
            _ => Err("read-only: EXPLAIN takes a SELECT query only".into()),
        },
        other => Err(format!(
            "read-only: only SELECT (or EXPLAIN) queries are allowed, not {}",
            other
                .to_string()
                .split_whitespace()
                .next()
                .unwrap_or("this statement")
        )),
    }
}

/// The worker process's `main`: serves requests on stdin until it closes.
pub fn worker_main(store_dir: &Path, memory: usize) -> std::process::ExitCode {
    let store_dir = store_dir.to_path_buf();
    let thread = std::thread::Builder::new()
        .name("query".into())
        .stack_size(WORKER_STACK)
        .spawn(move || serve_stdio(&store_dir, memory));
    match thread.map(|t| t.join()) {
        Ok(Ok(Ok(()))) => std::process::ExitCode::SUCCESS,
        Ok(Ok(Err(e))) => {
            eprintln!("kplane query-worker: {e}");
            std::process::ExitCode::FAILURE
        }
        _ => std::process::ExitCode::FAILURE,
    }
}

fn serve_stdio(store_dir: &Path, memory: usize) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let ctx = rt.block_on(sandbox(store_dir, memory))?;
    let (stdin, stdout) = (std::io::stdin(), std::io::stdout());
    let mut line = String::new();
    loop {
        line.clear();
        if stdin
            .lock()
            .read_line(&mut line)
            .map_err(|e| e.to_string())?
            == 0
        {
            return Ok(());
        }
        let answer = match serde_json::from_str::<Request>(&line) {
            Ok(r) => rt.block_on(answer(&ctx, &r.sql, r.max_rows, memory)),
            Err(e) => json!({ "error": format!("bad request to the worker: {e}"), "status": 400 }),
        };
        let mut out = stdout.lock();
        serde_json::to_writer(&mut out, &answer).map_err(|e| e.to_string())?;
        out.write_all(b"\n")
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())?;
    }
}

/// A context over the store whose operators may use `memory` bytes.
async fn sandbox(store_dir: &Path, memory: usize) -> Result<SessionContext, String> {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(memory, 1.0)
        .with_object_list_cache_limit(0)
        .build_arc()
        .map_err(|e| e.to_string())?;
    let ctx = SessionContext::new_with_config_rt(SessionConfig::new(), runtime);
    kplane_store::query::register_udfs(&ctx);
    let store = kplane_store::Store::open(store_dir).map_err(|e| e.to_string())?;
    kplane_store::query::register_store(&ctx, &store)
        .await
        .map_err(|e| e.to_string())?;
    Ok(ctx)
}

async fn answer(ctx: &SessionContext, sql: &str, max: usize, memory: usize) -> Value {
    let refuse = |status: u16, m: String| json!({ "error": m, "status": status });
    if let Err(e) = check_read_only(sql) {
        return refuse(e.status().as_u16(), e.to_string());
    }
    let options = datafusion::execution::context::SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    let collected = crate::rows::replanned_while_compacted(|| async {
        ctx.sql_with_options(sql, options)
            .await?
            .limit(0, Some(max + 1))?
            .collect()
            .await
    })
    .await;
    let batches = match collected {
        Ok(b) => b,
        Err(e) => {
            let m = e.to_string();
            return refuse(
                422,
                if m.contains("Resources exhausted") {
                    format!(
                        "the query needs more than the {} MiB a query may use: {m}",
                        memory >> 20
                    )
                } else {
                    m
                },
            );
        }
    };
    let columns: Vec<String> = batches
        .first()
        .map(|b| {
            b.schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect()
        })
        .unwrap_or_default();
    let size: usize = batches.iter().map(|b| b.get_array_memory_size()).sum();
    if size > MAX_ANSWER_BYTES {
        return refuse(
            422,
            format!(
                "the result holds {} MiB; an answer may hold {} MiB (select fewer or shorter values)",
                size >> 20,
                MAX_ANSWER_BYTES >> 20
            ),
        );
    }
    match crate::rows::to_json(&batches) {
        Ok(mut rows) => {
            let truncated = rows.len() > max;
            rows.truncate(max);
            json!({ "columns": columns, "rows": rows, "truncated": truncated })
        }
        Err(e) => refuse(422, format!("{e:?}")),
    }
}

/// How the API starts a worker.
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    pub program: PathBuf,
    pub store_dir: PathBuf,
    /// Operators' memory (DataFusion's pool).
    pub memory: usize,
    /// The process's address space (`RLIMIT_AS`).
    pub address_space: u64,
}

struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// The pool of query workers: at most `n` queries at once, idle workers kept for the next.
pub struct QueryWorkers {
    spec: WorkerSpec,
    slots: Semaphore,
    idle: Mutex<Vec<Worker>>,
    metrics: crate::metrics::ApiMetrics,
}

impl std::fmt::Debug for QueryWorkers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryWorkers")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl QueryWorkers {
    pub fn new(spec: WorkerSpec, n: usize, metrics: crate::metrics::ApiMetrics) -> Self {
        Self {
            spec,
            slots: Semaphore::new(n),
            idle: Mutex::new(Vec::new()),
            metrics,
        }
    }

    fn spawn(&self) -> Result<Worker, ApiError> {
        let mut cmd = Command::new(&self.spec.program);
        cmd.arg("query-worker")
            .arg(&self.spec.store_dir)
            .arg(self.spec.memory.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let limit = self.spec.address_space;
        // SAFETY: between fork and exec only async-signal-safe calls (setrlimit of a local).
        unsafe {
            cmd.pre_exec(move || {
                let set = |res, v: u64| {
                    let l = libc::rlimit {
                        rlim_cur: v as libc::rlim_t,
                        rlim_max: v as libc::rlim_t,
                    };
                    libc::setrlimit(res, &l)
                };
                set(libc::RLIMIT_AS, limit);
                // A crashed worker leaves no core file behind.
                set(libc::RLIMIT_CORE, 0);
                Ok(())
            });
        }
        let mut child = cmd.spawn().map_err(|e| {
            ApiError::Internal(format!(
                "cannot start the query worker {}: {e}",
                self.spec.program.display()
            ))
        })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(ApiError::Internal("query worker without pipes".into()));
        };
        Ok(Worker {
            child,
            stdin,
            stdout: BufReader::new(stdout),
        })
    }

    /// Runs `sql` in a worker within `timeout`: `{"columns", "rows", "truncated"}`.
    pub async fn run(
        &self,
        sql: &str,
        max_rows: usize,
        timeout: Duration,
    ) -> Result<Value, ApiError> {
        check_size(sql)?;
        let deadline = Instant::now() + timeout;
        let _slot = tokio::time::timeout(timeout, self.slots.acquire())
            .await
            .map_err(|_| {
                ApiError::Timeout(format!(
                    "every query worker stayed busy for {timeout:?}; try again"
                ))
            })?
            .map_err(|_| ApiError::Unavailable("the API is stopping".into()))?;
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut w = match idle {
            Some(w) => w,
            None => self.spawn()?,
        };
        let mut request = serde_json::to_vec(&Request {
            sql: sql.to_string(),
            max_rows,
        })
        .map_err(|e| ApiError::Internal(e.to_string()))?;
        request.push(b'\n');
        let exchange = async {
            w.stdin.write_all(&request).await?;
            w.stdin.flush().await?;
            let mut line = Vec::new();
            (&mut w.stdout)
                .take(MAX_ANSWER_BYTES as u64 * 4)
                .read_until(b'\n', &mut line)
                .await?;
            Ok::<_, std::io::Error>(line)
        };
        let left = deadline.saturating_duration_since(Instant::now());
        let line = match tokio::time::timeout(left, exchange).await {
            Err(_) => {
                let _ = w.child.kill().await;
                self.metrics.query_timeouts.inc();
                return Err(ApiError::Timeout(format!(
                    "the query ran longer than {timeout:?} (query-timeout)"
                )));
            }
            Ok(Ok(line)) if line.ends_with(b"\n") => line,
            // The worker died (or wrote a broken answer): the query ended it.
            Ok(_) => {
                let _ = w.child.start_kill();
                let status = w.child.wait().await;
                self.metrics.query_worker_crashes.inc();
                let status = status.map_or_else(|e| e.to_string(), |s| s.to_string());
                tracing::warn!(%status, "a query ended its worker process; a new one takes the next query");
                return Err(ApiError::Unprocessable(format!(
                    "the query ended its worker process ({status}): it needed more memory or a \
                     deeper plan than a query may use"
                )));
            }
        };
        let answer: Value = serde_json::from_slice(&line)
            .map_err(|e| ApiError::Internal(format!("query worker answer: {e}")))?;
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(w);
        match answer["error"].as_str() {
            None => Ok(answer),
            Some(m) if answer["status"] == 400 => Err(ApiError::BadRequest(m.to_string())),
            Some(m) => Err(ApiError::Unprocessable(m.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_single_read_only_statements_pass() {
        assert!(check_read_only("SELECT 1").is_ok());
        assert!(check_read_only("WITH x AS (SELECT 1) SELECT * FROM x").is_ok());
        assert!(check_read_only("EXPLAIN SELECT 1").is_ok());
        for bad in [
            "DROP TABLE flows",
            "CREATE TABLE t AS SELECT 1",
            "INSERT INTO flows VALUES (1)",
            "SELECT 1; SELECT 2",
            "SET datafusion.execution.batch_size = 1",
            "COPY flows TO '/tmp/x.parquet'",
            "EXPLAIN COPY flows TO '/tmp/x.parquet'",
            "EXPLAIN CREATE TABLE t AS SELECT 1",
            "EXPLAIN INSERT INTO flows VALUES (1)",
            "",
            "SELEC 1",
        ] {
            assert!(check_read_only(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn long_sql_is_refused_before_it_is_parsed() {
        assert!(check_size("SELECT 1+1").is_ok());
        let long = format!("SELECT 1{}", "+1".repeat(MAX_SQL_TOKENS));
        match check_size(&long) {
            Err(ApiError::BadRequest(m)) => assert!(m.contains("tokens"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
