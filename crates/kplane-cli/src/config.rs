//! The whole configuration document: `[log]` and one section per service.

use std::path::Path;
use std::process::ExitCode;

use kplane_runtime::{ConfigError, ConfigSource, EXIT_CONFIG, LogConfig, Validate};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct KplaneConfig {
    pub log: LogConfig,
    pub bus: kplane_bus::BusConfig,
    pub collector: kplane_collector::Config,
    pub stream_processor: kplane_stream_processor::Config,
    pub knowledge: kplane_knowledge::Config,
    pub intent_api: kplane_intent_api::Config,
}

impl Validate for KplaneConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        self.log.validate(problems);
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

pub fn load(source: &ConfigSource) -> Result<KplaneConfig, ConfigError> {
    kplane_runtime::load(source)
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

fn toml_string(cfg: &KplaneConfig) -> Result<String, String> {
    toml::to_string(cfg).map_err(|e| e.to_string())
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
