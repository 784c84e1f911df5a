//! `kplane bench intents` and `kplane bench p4runtime`: the intent path's figures
//! (docs/benchmarks.md#intents-issue-16); the measuring is in `kplane_control_plane::bench`.

use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::Args;
use kplane_control_plane::bench::{PushFigures, compile_intents, push_entries};

#[derive(Debug, Args)]
pub struct IntentsArgs {
    #[arg(long, default_value_t = 10_000)]
    intents: usize,
    /// Edge switches the intents are spread over (each holds 256 entries per table).
    #[arg(long, default_value_t = 16)]
    switches: u32,
}

pub fn intents(a: IntentsArgs) -> ExitCode {
    let f = compile_intents(a.intents, a.switches);
    println!(
        "bench intents: {} intents (monitor, block, tune in turn) over {} switches: {} accepted ({} entries), {} refused (conflict or full table)",
        a.intents, a.switches, f.accepted, f.entries, f.refused
    );
    println!(
        "  check + compile + conflict check: {:.1} ms in all, {:.1} µs per intent, {:.0} intents/s",
        f.took.as_secs_f64() * 1e3,
        f.took.as_secs_f64() * 1e6 / a.intents as f64,
        a.intents as f64 / f.took.as_secs_f64()
    );
    ExitCode::SUCCESS
}

#[derive(Debug, Args)]
pub struct P4runtimeArgs {
    /// A P4Runtime switch's `host:port` (its pipeline is replaced); without it a
    /// `simple_switch_grpc --no-p4` is started for the run.
    #[arg(long)]
    addr: Option<String>,
    #[arg(long, default_value_t = 0)]
    device_id: u64,
    /// Entries written in all (inserts, and the deletes that make room again).
    #[arg(long, default_value_t = 20_000)]
    entries: usize,
    /// Updates per Write request.
    #[arg(long, default_value_t = 500)]
    batch: usize,
}

/// A switch this benchmark started; stopped when dropped.
struct Switch(Child);

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}

fn start_bmv2(device_id: u64) -> Result<(Switch, String), String> {
    let addr = format!("127.0.0.1:{}", free_port()?);
    let child = Command::new("simple_switch_grpc")
        .args(["--device-id", &device_id.to_string(), "--no-p4"])
        .args(["--thrift-port", &free_port()?.to_string()])
        .args(["--", "--grpc-server-addr", &addr])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| {
            format!("simple_switch_grpc: {e} (install ../shared/p4-toolchain, or give --addr)")
        })?;
    let sw = Switch(child);
    let end = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(&addr).is_err() {
        if Instant::now() > end {
            return Err(format!("simple_switch_grpc never listened on {addr}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok((sw, addr))
}

pub fn p4runtime(a: P4runtimeArgs) -> ExitCode {
    match run_p4runtime(&a) {
        Ok((addr, f)) => {
            let rate = |n: usize, t: Duration| n as f64 / t.as_secs_f64();
            println!(
                "bench p4runtime: {addr}, ipv4_forward (LPM), {} updates per Write, {} entries written",
                a.batch,
                f.inserted + f.deleted
            );
            println!(
                "  insert: {} in {:.2} s = {:.0} entries/s",
                f.inserted,
                f.insert_time.as_secs_f64(),
                rate(f.inserted, f.insert_time)
            );
            println!(
                "  delete: {} in {:.2} s = {:.0} entries/s",
                f.deleted,
                f.delete_time.as_secs_f64(),
                rate(f.deleted, f.delete_time)
            );
            println!(
                "  all:    {:.0} entries/s",
                rate(f.inserted + f.deleted, f.insert_time + f.delete_time)
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kplane bench p4runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run_p4runtime(a: &P4runtimeArgs) -> Result<(String, PushFigures), String> {
    let (_switch, addr) = match &a.addr {
        Some(addr) => (None, addr.clone()),
        None => {
            let (s, addr) = start_bmv2(a.device_id)?;
            (Some(s), addr)
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let f = rt
        .block_on(push_entries(&addr, a.device_id, a.entries, a.batch))
        .map_err(|e| e.to_string())?;
    Ok((addr, f))
}
