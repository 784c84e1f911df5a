//! A lab, up: the fabric's veths and namespaces, a switch process per switch, the hosts'
//! traffic, and the P4Runtime driver configuration that provisions every switch (pipeline,
//! identity, collector, sink ports, forwarding, INT source). Everything goes when the lab is
//! dropped, and [`crate::net::clean`] finds what a crash left.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use kplane_probe::packet_socket::PacketSocket;
use kplane_southbound::p4runtime::{Config as DriverConfig, HostPort, LinkPort};

use crate::net::{self, in_netns};
use crate::switch::Switch;
use crate::topology::Topology;
use crate::traffic::{self, Attack, Background, Hosts, Received};
use crate::{LabError, Result};

/// The UDP port the collector listens on in the lab (Telemetry Report's).
pub const REPORT_PORT: u16 = 32766;
/// INT instructions the lab's sources ask for (node id, ports, hop latency, queue,
/// timestamps, tx utilisation): the `monitor` intent's default.
const INSTRUCTIONS: u16 = 0xFF00;
const MAX_HOPS: u8 = 8;
/// The rate the switches' tx utilisation is a share of: about what a BMv2 switch forwards.
const LINK_RATE_BPS: u64 = 10_000_000;

#[derive(Clone, Debug)]
pub struct LabSpec {
    /// Names every interface (`<prefix><switch>p<port>`), namespace (`<prefix>-…`) and switch
    /// process of the lab: 2–5 lowercase letters.
    pub prefix: String,
    pub topology: Topology,
    /// Switch logs, the truth file (`truth.jsonl`) and `received.json`.
    pub dir: PathBuf,
    pub background: Background,
    pub attacks: Vec<Attack>,
    pub seed: u64,
}

/// A running lab; torn down when dropped.
pub struct Lab {
    pub spec: LabSpec,
    switches: Vec<Switch>,
    drivers: Vec<DriverConfig>,
    collectors: Vec<SocketAddr>,
    received: Received,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    sender: Option<JoinHandle<Result<u64>>>,
}

impl std::fmt::Debug for Lab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lab")
            .field("prefix", &self.spec.prefix)
            .field("switches", &self.switches.len())
            .finish()
    }
}

fn iface(prefix: &str, switch: u32, port: u32) -> String {
    format!("{prefix}{switch}p{port}")
}

/// Where the collector listens for edge switch `s`'s reports: `10.99.<s>.<h>`, `h` drawn from
/// the lab's name (2–254; `.1` is the switch's own report address). The collector's socket
/// shares its port (SO_REUSEPORT), so two labs side by side listening on one address would
/// each get a share of both labs' reports: each lab has addresses of its own.
fn collector_ip(prefix: &str, s: u32) -> Ipv4Addr {
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let h = prefix.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    Ipv4Addr::new(10, 99, s as u8, 2 + (h % 253) as u8)
}

fn host_netns(prefix: &str, ip: Ipv4Addr) -> String {
    let [_, _, c, d] = ip.octets();
    format!("{prefix}-h{c}-{d}")
}

impl Lab {
    /// Builds the fabric and starts the switches (without a pipeline: the drivers push it).
    /// Traffic starts with [`Lab::start_traffic`], once the switches are provisioned.
    pub fn up(spec: LabSpec) -> Result<Self> {
        crate::switch::available()?;
        let p = spec.prefix.as_str();
        if !(2..=5).contains(&p.len()) || !p.chars().all(|c| c.is_ascii_lowercase()) {
            return Err(LabError::Topology(format!(
                "lab name {p:?}: 2–5 lowercase letters"
            )));
        }
        std::fs::create_dir_all(&spec.dir)
            .map_err(LabError::io(format!("creating {}", spec.dir.display())))?;
        let _ = std::fs::remove_file(spec.dir.join("truth.jsonl"));
        net::clean(p)?;
        let mut lab = Self {
            switches: Vec::new(),
            drivers: Vec::new(),
            collectors: Vec::new(),
            received: Received::default(),
            stop: Arc::new(AtomicBool::new(false)),
            threads: Vec::new(),
            sender: None,
            spec: spec.clone(),
        };
        let t = &spec.topology;
        for l in &t.links {
            net::veth(&iface(p, l.a.0, l.a.1), &iface(p, l.b.0, l.b.1), None)?;
        }
        for h in &t.hosts {
            let ns = host_netns(p, h.ip);
            net::add_netns(&ns)?;
            net::veth(&iface(p, h.switch, h.port), "eth0", Some(&ns))?;
            net::ip(
                Some(&ns),
                &["addr", "add", &format!("{}/8", h.ip), "dev", "eth0"],
            )?;
        }
        let routes = t.routes();
        for &s in &t.switches {
            let mut ports: Vec<(u32, String)> = t
                .links_of(s)
                .iter()
                .map(|(mine, _, _)| (*mine, iface(p, s, *mine)))
                .chain(
                    t.hosts
                        .iter()
                        .filter(|h| h.switch == s)
                        .map(|h| (h.port, iface(p, s, h.port))),
                )
                .collect();
            let hosts: Vec<HostPort> = t
                .hosts
                .iter()
                .filter(|h| h.switch == s)
                .map(|h| HostPort {
                    prefix: format!("{}/32", h.ip),
                    port: h.port,
                })
                .collect();
            let mut driver = DriverConfig {
                switch: s,
                name: Some(format!("s{s}")),
                addr: String::new(),
                device_id: u64::from(s),
                election_id: 1,
                push_pipeline: true,
                report_port: None,
                switch_ip: Some(Ipv4Addr::new(10, 99, s as u8, 1)),
                collector_ip: None,
                collector_mac: None,
                probe_recovery: None,
                link_rate: LINK_RATE_BPS,
                links: t
                    .links_of(s)
                    .into_iter()
                    .map(|(port, peer, peer_port)| LinkPort {
                        port,
                        peer,
                        peer_port,
                    })
                    .collect(),
                entries: forwarding(routes.get(&s).map(Vec::as_slice).unwrap_or(&[])),
                timeout: Duration::from_secs(5),
                hosts,
            };
            if !driver.hosts.is_empty() {
                // An edge switch: INT source of every flow entering here, sink of every flow
                // leaving here, its reports out of one more port to the collector's address.
                let report = t.report_port(s);
                let (near, far) = (iface(p, s, report), format!("{p}{s}c"));
                net::veth(&near, &far, None)?;
                let collector = collector_ip(p, s);
                let holder = net::ip(None, &["-o", "addr", "show", "to", &collector.to_string()])?;
                if !holder.trim().is_empty() {
                    return Err(LabError::Clash(format!(
                        "{collector}, this lab's collector address for switch {s}, is another \
                         lab's already ({}): the two names draw the same address, so their \
                         collectors would share each other's reports; use another --name",
                        holder.split_whitespace().nth(1).unwrap_or("?")
                    )));
                }
                net::ip(
                    None,
                    &["addr", "add", &format!("{collector}/24"), "dev", &far],
                )?;
                ports.push((report, near));
                driver.report_port = Some(report);
                driver.collector_ip = Some(collector);
                driver.collector_mac = Some(net::mac(None, &far)?);
                driver
                    .entries
                    .push(kplane_p4::EntrySpec::int_source_everywhere(
                        INSTRUCTIONS,
                        MAX_HOPS,
                    ));
                lab.collectors
                    .push(SocketAddr::from((collector, REPORT_PORT)));
            }
            ports.sort();
            let sw = Switch::start(s, &ports, &spec.dir)?;
            driver.addr = sw.grpc.to_string();
            lab.switches.push(sw);
            lab.drivers.push(driver);
        }
        Ok(lab)
    }

    /// The P4Runtime drivers that provision and drive the lab's switches.
    pub fn drivers(&self) -> Vec<kplane_southbound::DriverConfig> {
        self.drivers
            .iter()
            .cloned()
            .map(kplane_southbound::DriverConfig::P4runtime)
            .collect()
    }

    /// Where the collector must listen: each edge switch's collector address.
    pub fn collectors(&self) -> &[SocketAddr] {
        &self.collectors
    }

    /// Starts the hosts' traffic and their counting of what they receive (written to
    /// `received.json` in the lab's directory every 100 ms).
    pub fn start_traffic(&mut self) -> Result<()> {
        let p = self.spec.prefix.clone();
        let mut hosts = Hosts {
            ips: Vec::new(),
            sockets: Vec::new(),
        };
        for h in &self.spec.topology.hosts {
            let ns = host_netns(&p, h.ip);
            let open = || PacketSocket::open("eth0", Duration::from_millis(200));
            let (send, recv) = in_netns(&ns, move || Ok::<_, std::io::Error>((open()?, open()?)))?
                .map_err(LabError::io(format!("a packet socket in {ns}")))?;
            hosts.ips.push(h.ip);
            hosts.sockets.push(send);
            let (received, stop, ip) = (self.received.clone(), self.stop.clone(), h.ip);
            self.threads.push(std::thread::spawn(move || {
                traffic::count(ip, recv, received, stop)
            }));
        }
        let (received, stop, path) = (
            self.received.clone(),
            self.stop.clone(),
            self.spec.dir.join("received.json"),
        );
        self.threads.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                write_received(&received, &path);
            }
        }));
        let (spec, stop) = (self.spec.clone(), self.stop.clone());
        let truth = Some(spec.dir.join("truth.jsonl"));
        self.sender = Some(std::thread::spawn(move || {
            traffic::send(hosts, spec.background, spec.attacks, spec.seed, truth, stop)
        }));
        Ok(())
    }

    /// What each host received so far, by source.
    pub fn received(
        &self,
    ) -> std::collections::BTreeMap<Ipv4Addr, std::collections::BTreeMap<Ipv4Addr, u64>> {
        self.received.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Stops the traffic and tears everything down; the packets the hosts sent.
    pub fn down(mut self) -> Result<u64> {
        let sent = self.stop_traffic();
        self.switches.clear();
        net::clean(&self.spec.prefix)?;
        sent
    }

    fn stop_traffic(&mut self) -> Result<u64> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        write_received(&self.received, &self.spec.dir.join("received.json"));
        match self.sender.take() {
            Some(s) => s
                .join()
                .map_err(|_| LabError::Missing("the traffic thread panicked".into()))?,
            None => Ok(0),
        }
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = self.stop_traffic();
        self.switches.clear();
        let _ = net::clean(&self.spec.prefix);
    }
}

/// `received.json`: `{host: {source: packets}}`, replaced atomically.
fn write_received(received: &Received, path: &std::path::Path) {
    let Ok(r) = received.lock().map(|r| r.clone()) else {
        return;
    };
    let json: serde_json::Map<String, serde_json::Value> = r
        .iter()
        .map(|(h, by)| {
            (
                h.to_string(),
                by.iter()
                    .map(|(s, n)| (s.to_string(), serde_json::Value::from(*n)))
                    .collect::<serde_json::Map<_, _>>()
                    .into(),
            )
        })
        .collect();
    let tmp = path.with_extension("json.tmp");
    if std::fs::write(&tmp, serde_json::Value::Object(json).to_string()).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

/// A switch's forwarding: one `set_egress` per host it reaches.
fn forwarding(routes: &[(Ipv4Addr, u32)]) -> Vec<kplane_p4::EntrySpec> {
    routes
        .iter()
        .map(|(ip, port)| kplane_p4::EntrySpec {
            switch: None,
            table: "ipv4_forward".into(),
            priority: 0,
            matches: [("dst_addr".to_string(), format!("{ip}/32"))].into(),
            action: "set_egress".into(),
            params: [("port".to_string(), u64::from(*port))].into(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labs_of_other_names_listen_for_reports_on_addresses_of_their_own() {
        // The default lab's, `kplane eval lab`'s and the end-to-end tests' names.
        let names = ["kpl", "kpev", "kplt", "kplr", "kpet", "kpsa", "kpsb"];
        let hosts: Vec<u8> = names
            .iter()
            .map(|n| collector_ip(n, 1).octets()[3])
            .collect();
        let mut distinct = hosts.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), names.len(), "{names:?} → {hosts:?}");
        for n in names {
            for s in [1, 2, 200] {
                let [a, b, c, d] = collector_ip(n, s).octets();
                assert_eq!((a, b, c), (10, 99, s as u8));
                // Never the switch's own report address, the subnet's or its broadcast.
                assert!((2..=254).contains(&d), "{n} {s}: {d}");
                assert_eq!(d, hosts[names.iter().position(|m| *m == n).unwrap()]);
            }
        }
    }
}
