//! The whole configuration document: `[log]` and one section per service.

use std::path::Path;
use std::process::ExitCode;

use kplane_runtime::{ConfigError, ConfigSource, EXIT_CONFIG, LogConfig, Validate};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct KplaneConfig {
    pub log: LogConfig,
    /// Every HTTP listener's tokens and limits (the API, the admin listeners, the emulator's
    /// control channel).
    pub http: kplane_runtime::HttpConfig,
    pub bus: kplane_bus::BusConfig,
    pub collector: kplane_collector::Config,
    pub stream_processor: kplane_stream_processor::Config,
    pub knowledge: kplane_knowledge::Config,
    pub intent_api: kplane_intent_api::Config,
}

impl Validate for KplaneConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        self.log.validate(problems);
        self.http.validate(problems);
        self.bus.validate(problems);
        self.collector.validate(problems);
        self.stream_processor.validate(problems);
        self.knowledge.validate(problems);
        self.intent_api.validate(problems);
    }
}

pub fn source(file: Option<&Path>) -> ConfigSource {
    ConfigSource {
        file: file.map(Path::to_path_buf),
        ..ConfigSource::default()
    }
}

/// The document, with `[http]` handed to every service.
pub fn load(source: &ConfigSource) -> Result<KplaneConfig, ConfigError> {
    let mut cfg: KplaneConfig = kplane_runtime::load(source)?;
    cfg.share_http();
    Ok(cfg)
}

impl KplaneConfig {
    /// Gives every service the document's `[http]` section.
    pub fn share_http(&mut self) {
        use kplane_runtime::Listeners;
        self.collector.set_http(self.http.clone());
        self.stream_processor.set_http(self.http.clone());
        self.knowledge.set_http(self.http.clone());
        self.intent_api.set_http(self.http.clone());
    }
}

/// `kplane config`: the effective configuration as TOML, or every problem and exit 78.
pub fn print(source: &ConfigSource) -> ExitCode {
    match load(source) {
        Ok(cfg) => match toml_string(&cfg) {
            Ok(s) => {
                print!("{s}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("kplane: cannot render the configuration: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprint!("kplane: {e}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// The configuration as TOML with its secrets (passwords, tokens in clear) shown as
/// `"<redacted>"`; tokens' SHA-256 hashes stay.
fn toml_string(cfg: &KplaneConfig) -> Result<String, String> {
    let mut v = toml::Value::try_from(cfg).map_err(|e| e.to_string())?;
    redact(&mut v);
    toml::to_string(&v).map_err(|e| e.to_string())
}

/// Keys whose values are secrets.
fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("password") || k.contains("secret") || k == "token" || k.ends_with("-token")
}

fn redact(v: &mut toml::Value) {
    match v {
        toml::Value::Table(t) => {
            for (k, v) in t.iter_mut() {
                if is_secret(k) && v.is_str() {
                    *v = toml::Value::String("<redacted>".into());
                } else {
                    redact(v);
                }
            }
        }
        toml::Value::Array(a) => a.iter_mut().for_each(redact),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every shipped example parses, validates, and names only keys that exist.
    #[test]
    fn example_configs_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.to_string_lossy().ends_with(".example.toml") {
                let cfg = load(&ConfigSource {
                    file: Some(path.clone()),
                    env_prefix: Some("KPLANE_TEST_NONE__".into()),
                    ..ConfigSource::default()
                });
                assert!(cfg.is_ok(), "{}: {}", path.display(), cfg.unwrap_err());
                n += 1;
            }
        }
        assert!(n > 0, "no example configs in {}", dir.display());
    }

    #[test]
    fn secrets_are_not_printed() {
        let mut v: toml::Value = toml::from_str(
            r#"
            [bus.kafka.options]
            "sasl.password" = "hunter2"
            [[intent-api.intents.drivers]]
            kind = "emulator"
            token = "kp_abc"
            [[http.tokens]]
            name = "ops"
            sha256 = "00"
            "#,
        )
        .unwrap();
        redact(&mut v);
        let text = toml::to_string(&v).unwrap();
        assert!(
            !text.contains("hunter2") && !text.contains("kp_abc"),
            "{text}"
        );
        assert!(text.contains("sha256 = \"00\""), "{text}");
    }

    #[test]
    fn rendered_config_loads_back_identically() {
        let cfg = KplaneConfig::default();
        let text = toml_string(&cfg).unwrap();
        let dir = std::env::temp_dir().join(format!("kplane-cfg-{}.toml", std::process::id()));
        std::fs::write(&dir, &text).unwrap();
        let back = load(&ConfigSource {
            file: Some(dir.clone()),
            env_prefix: Some("KPLANE_TEST_NONE__".into()),
            ..ConfigSource::default()
        })
        .unwrap();
        std::fs::remove_file(dir).unwrap();
        assert_eq!(back, cfg, "{text}");
    }
}
