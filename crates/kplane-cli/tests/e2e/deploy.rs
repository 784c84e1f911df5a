//! The deployment files agree with the software: every `KPLANE__` variable that
//! docker-compose.yml and the Kubernetes manifests set is a configuration key `kplane config`
//! accepts with that value, and the ports their probes, healthchecks, Services and Prometheus
//! use are the ones the services listen on. (Schema validation of the rendered manifests and
//! of the compose file is `deploy/validate.sh`, run by `make lint`.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| {
            let mut v = Value::deserialize(d).unwrap();
            // An alias of a mapping that itself merges (`<<: *processor`) needs a pass per
            // level.
            for _ in 0..4 {
                v.apply_merge().unwrap();
            }
            v
        })
        .collect()
}

use serde::Deserialize;

/// Runs `kplane config` with `env` (and the image's configuration file): it fails on an
/// unknown key or a value of the wrong type.
fn config_accepts(what: &str, env: &BTreeMap<String, String>) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_kplane"))
        .arg("config")
        .env_clear()
        .env("KPLANE_CONFIG", root().join("config/kplane.example.toml"))
        .envs(env)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{what}: kplane config refused {env:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn str_map(v: &Value) -> BTreeMap<String, String> {
    v.as_mapping()
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => return None,
            };
            Some((k.as_str()?.to_string(), v))
        })
        .collect()
}

/// `--admin 0.0.0.0:PORT` in a command → PORT.
fn admin_port(args: &[String]) -> Option<u16> {
    let i = args.iter().position(|a| a == "--admin")?;
    args.get(i + 1)?.rsplit_once(':')?.1.parse().ok()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

#[test]
fn compose_sets_only_known_keys_and_checks_the_ports_services_listen_on() {
    let compose = yaml_docs(&root().join("docker-compose.yml")).remove(0);
    let services = compose["services"].as_mapping().unwrap();
    let (mut checked, mut one_shot) = (0, 0);
    let mut scraped = Vec::new();
    for (name, svc) in services {
        let name = name.as_str().unwrap();
        let command = strings(&svc["command"]);
        if command.first().map(String::as_str) == Some("emulate") || command.is_empty() {
            continue;
        }
        if svc["image"].as_str() != Some("kplane:latest") {
            continue;
        }
        let mut env = str_map(&svc["environment"]);
        // Compose substitutes ${…} before the container sees it.
        for v in env.values_mut() {
            if let Some(start) = v.find("${") {
                let end = v[start..].find('}').unwrap() + start;
                *v = format!("{}{}{}", &v[..start], "0".repeat(64), &v[end + 1..]);
            }
        }
        if command.first().map(String::as_str) == Some("topics") {
            // The one-shot init step: its settings are the services' (topics from the same
            // configuration), and it has no listener.
            assert_eq!(command[..2], ["topics", "create"], "{name}");
            env.retain(|k, _| k.starts_with("KPLANE__"));
            config_accepts(name, &env);
            one_shot += 1;
            continue;
        }
        let health: u16 = env["KPLANE_HEALTH_PORT"].parse().unwrap();
        env.retain(|k, _| k.starts_with("KPLANE__"));
        let printed = config_accepts(name, &env);
        let admin = admin_port(&command).unwrap_or_else(|| panic!("{name}: no --admin"));
        assert_eq!(admin, health, "{name}: KPLANE_HEALTH_PORT");
        let probe = strings(&svc["healthcheck"]["test"]).join(" ");
        assert!(
            probe.contains(&format!("127.0.0.1:{admin}/readyz")),
            "{name}: healthcheck {probe}"
        );
        if name == "intent-api" {
            assert!(printed.contains("listen = \"0.0.0.0:8080\""), "{printed}");
            assert!(strings(&svc["ports"]).contains(&"8080:8080".to_string()));
        }
        if name == "collector" {
            assert!(command.contains(&"0.0.0.0:32766".to_string()));
            assert!(strings(&svc["ports"]).contains(&"32766:32766/udp".to_string()));
        }
        scraped.push(format!("{name}:{admin}"));
        checked += 1;
    }
    assert_eq!(
        checked, 5,
        "collector, two processors, knowledge, intent-api"
    );
    assert_eq!(one_shot, 1, "kafka-init creates the topics with kplane");
    let prom = std::fs::read_to_string(root().join("deploy/compose/prometheus.yml")).unwrap();
    for target in scraped {
        assert!(
            prom.contains(&target),
            "prometheus does not scrape {target}"
        );
    }
}

/// Containers of the rendered-by-hand manifests (base plus an overlay's patches are not
/// needed here: overlays change only replicas, resources and the env ConfigMap).
fn containers(dir: &Path) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_none_or(|x| x != "yaml") || p.ends_with("kustomization.yaml") {
            continue;
        }
        for doc in yaml_docs(&p) {
            for c in doc["spec"]["template"]["spec"]["containers"]
                .as_sequence()
                .into_iter()
                .flatten()
            {
                out.push((
                    doc["metadata"]["name"].as_str().unwrap().to_string(),
                    c.clone(),
                ));
            }
        }
    }
    out
}

/// `KEY=VALUE` literals of a kustomization's generator `name`.
fn literals(kustomization: &Path, name: &str) -> BTreeMap<String, String> {
    let k = yaml_docs(kustomization).remove(0);
    let mut out = BTreeMap::new();
    for g in ["configMapGenerator", "secretGenerator"] {
        for gen_ in k[g].as_sequence().into_iter().flatten() {
            if gen_["name"].as_str() == Some(name) {
                for l in strings(&gen_["literals"]) {
                    let (k, v) = l.split_once('=').unwrap();
                    out.insert(k.to_string(), v.to_string());
                }
            }
        }
    }
    out
}

#[test]
fn manifests_set_only_known_keys_and_probe_the_admin_listeners() {
    let base = root().join("deploy/k8s/base");
    // The ConfigMap is the example configuration.
    assert_eq!(
        std::fs::read_to_string(base.join("kplane.toml")).unwrap(),
        std::fs::read_to_string(root().join("config/kplane.example.toml")).unwrap(),
        "deploy/k8s/base/kplane.toml must be a copy of config/kplane.example.toml"
    );
    let dev = root().join("deploy/k8s/overlays/dev");
    let prod = root().join("deploy/k8s/overlays/prod");
    let tokens = literals(&dev.join("kustomization.yaml"), "kplane-api-tokens");
    let envs = [
        literals(&base.join("kustomization.yaml"), "kplane-env"),
        literals(&dev.join("kustomization.yaml"), "kplane-env"),
        literals(&prod.join("kustomization.yaml"), "kplane-env"),
    ];
    let mut seen = Vec::new();
    for (name, c) in containers(&base) {
        let args = strings(&c["args"]);
        let admin = admin_port(&args).unwrap_or_else(|| panic!("{name}: no --admin"));
        let port_named = |port_name: &str| {
            c["ports"]
                .as_sequence()
                .into_iter()
                .flatten()
                .find(|p| p["name"].as_str() == Some(port_name))
                .and_then(|p| p["containerPort"].as_u64())
        };
        assert_eq!(port_named("admin"), Some(u64::from(admin)), "{name}");
        for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
            assert_eq!(
                c[probe]["httpGet"]["port"].as_str(),
                Some("admin"),
                "{name} {probe}"
            );
        }
        assert_eq!(
            c["readinessProbe"]["httpGet"]["path"].as_str(),
            Some("/readyz")
        );
        assert_eq!(
            c["livenessProbe"]["httpGet"]["path"].as_str(),
            Some("/healthz")
        );
        let mut own = BTreeMap::new();
        for e in c["env"].as_sequence().into_iter().flatten() {
            let key = e["name"].as_str().unwrap().to_string();
            let value = match e["value"].as_str() {
                Some(v) => v.to_string(),
                // The one secret: the API's tokens, as the dev overlay fills it.
                None => tokens[e["valueFrom"]["secretKeyRef"]["key"].as_str().unwrap()].clone(),
            };
            if key.starts_with("KPLANE__") {
                own.insert(key, value);
            }
        }
        for env in &envs {
            let mut all = env.clone();
            all.extend(own.clone());
            let printed = config_accepts(&name, &all);
            if name == "intent-api" {
                assert_eq!(port_named("http"), Some(8080));
                assert!(printed.contains("listen = \"0.0.0.0:8080\""), "{printed}");
            }
        }
        if name == "collector" {
            assert_eq!(port_named("telemetry"), Some(32766));
            assert!(args.contains(&"0.0.0.0:32766".to_string()));
        }
        seen.push(name);
    }
    seen.sort();
    assert_eq!(
        seen,
        ["collector", "intent-api", "knowledge", "stream-processor"]
    );
}
