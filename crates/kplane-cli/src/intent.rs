//! `kplane intent …`: the intent API from the command line. Files are YAML or JSON, one
//! intent or a list of them (docs/intents.md).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::Value;

#[derive(Debug, Args)]
pub struct IntentArgs {
    /// The intent API (`kplane up` prints it).
    #[arg(
        long,
        env = "KPLANE_API",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    api: String,
    /// Bearer token (operator to submit and delete, admin to approve).
    #[arg(long, env = "KPLANE_TOKEN", global = true, hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: IntentCommand,
}

#[derive(Debug, Subcommand)]
enum IntentCommand {
    /// Submit the intents in FILE (YAML or JSON; one, or a list; `-` for stdin).
    Apply {
        #[arg(short, long)]
        file: PathBuf,
    },
    /// What the intents in FILE would write on each switch, or why they would be refused.
    DryRun {
        #[arg(short, long)]
        file: PathBuf,
    },
    /// Every intent (or those in one state) as a table; `--json` for everything.
    List {
        #[arg(long)]
        state: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// One intent: entries, per-switch status, expected effect, evidence.
    Show { id: String },
    /// Delete an intent (its entries leave the switches).
    Delete { id: String },
    /// Approve a pending recommendation (admin).
    Approve { id: String },
    /// The audit log, newest first.
    Audit {
        #[arg(long)]
        intent: Option<String>,
        /// Only what this actor (a token's name, `kplane`, `backpressure`) did.
        #[arg(long)]
        actor: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
}

/// The intents in a YAML or JSON file, as JSON values.
fn read_intents(file: &PathBuf) -> Result<Vec<Value>, String> {
    let text = if file.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(file)
    }
    .map_err(|e| format!("{}: {e}", file.display()))?;
    let v: Value = if file.extension().is_some_and(|e| e == "json") {
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?
    } else {
        serde_yaml::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?
    };
    Ok(match v {
        Value::Array(a) => a,
        v => vec![v],
    })
}

fn address(api: &str) -> Result<SocketAddr, String> {
    let hostport = api
        .strip_prefix("http://")
        .unwrap_or(api)
        .trim_end_matches('/');
    hostport
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("--api {api:?} is not http://host:port"))
}

/// The intent API over HTTP (also `kplane probe`'s source of plans).
pub(crate) struct Client {
    addr: SocketAddr,
    auth: Option<String>,
}

impl Client {
    pub(crate) fn new(api: &str, token: Option<&str>) -> Result<Self, String> {
        Ok(Self {
            addr: address(api)?,
            auth: token.map(|t| format!("Bearer {t}")),
        })
    }

    pub(crate) fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), String> {
        let headers: Vec<(&str, &str)> = self
            .auth
            .as_deref()
            .map(|a| ("authorization", a))
            .into_iter()
            .collect();
        let body = body.map(Value::to_string).unwrap_or_default();
        let r = kplane_runtime::probe::request(
            self.addr,
            method,
            path,
            &headers,
            &body,
            Duration::from_secs(30),
        )
        .map_err(|e| format!("{}: {e}", self.addr))?;
        Ok((
            r.status,
            serde_json::from_str(&r.body).unwrap_or(Value::String(r.body)),
        ))
    }
}

fn print(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

pub fn run(a: IntentArgs) -> ExitCode {
    let client = match Client::new(&a.api, a.token.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kplane intent: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match a.command {
        IntentCommand::Apply { file } => submit_all(&client, &file, "/v1/intents"),
        IntentCommand::DryRun { file } => submit_all(&client, &file, "/v1/intents/dry-run"),
        IntentCommand::List { state, json } => {
            let q = state.map(|s| format!("?state={s}")).unwrap_or_default();
            if json {
                one(&client, "GET", &format!("/v1/intents{q}"))
            } else {
                list(&client, &format!("/v1/intents{q}"))
            }
        }
        IntentCommand::Show { id } => one(&client, "GET", &format!("/v1/intents/{id}")),
        IntentCommand::Delete { id } => one(&client, "DELETE", &format!("/v1/intents/{id}")),
        IntentCommand::Approve { id } => one(&client, "POST", &format!("/v1/intents/{id}/approve")),
        IntentCommand::Audit {
            intent,
            actor,
            limit,
        } => {
            let mut q = format!("limit={limit}");
            for (k, v) in [("intent", intent), ("actor", actor)] {
                if let Some(v) = v {
                    q.push_str(&format!("&{k}={v}"));
                }
            }
            one(&client, "GET", &format!("/v1/audit?{q}"))
        }
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("kplane intent: {e}");
            ExitCode::from(2)
        }
    }
}

/// One request: the answer when the API took it; a refusal is printed on stderr, after
/// `context` (which intent of a file), and is `None`.
fn answer(
    client: &Client,
    method: &str,
    path: &str,
    body: Option<&Value>,
    context: &str,
) -> Result<Option<Value>, String> {
    let (status, v) = client.call(method, path, body)?;
    if (200..300).contains(&status) {
        return Ok(Some(v));
    }
    eprintln!(
        "kplane intent: {context}{status}: {}",
        v["error"].as_str().unwrap_or(&v.to_string())
    );
    Ok(None)
}

/// One request; prints the answer. Ok(false) for a refusal.
fn one(client: &Client, method: &str, path: &str) -> Result<bool, String> {
    let v = answer(client, method, path, None, "")?;
    if let Some(v) = &v {
        print(v);
    }
    Ok(v.is_some())
}

/// `kplane intent list`: one line per intent.
fn list(client: &Client, path: &str) -> Result<bool, String> {
    let Some(v) = answer(client, "GET", path, None, "")? else {
        return Ok(false);
    };
    println!(
        "{:<10} {:<8} {:<17} {:>5} {:<14} {:>9}  REASON",
        "ID", "KIND", "STATE", "PRIO", "OWNER", "SWITCHES"
    );
    for i in v["intents"].as_array().into_iter().flatten() {
        let switches = i["switches"].as_object();
        let installed = switches.map_or(0, |m| m.values().filter(|s| *s == "installed").count());
        let total = switches.map_or(0, |m| m.len());
        let text = |k: &str| i["spec"][k].as_str().unwrap_or("").to_string();
        println!(
            "{:<10} {:<8} {:<17} {:>5} {:<14} {:>9}  {}",
            i["id"].as_str().unwrap_or(""),
            text("kind"),
            i["state"].as_str().unwrap_or(""),
            i["spec"]["priority"],
            text("owner"),
            format!("{installed}/{total}"),
            text("reason"),
        );
    }
    Ok(true)
}

/// Posts every intent of `file`; prints each answer. Ok(false) if any was refused.
fn submit_all(client: &Client, file: &PathBuf, path: &str) -> Result<bool, String> {
    let mut ok = true;
    for (i, intent) in read_intents(file)?.iter().enumerate() {
        let context = format!("{} #{i}: ", file.display());
        match answer(client, "POST", path, Some(intent), &context)? {
            Some(v) => print(&v),
            None => ok = false,
        }
    }
    Ok(ok)
}
