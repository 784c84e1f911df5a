//! Layered configuration: built-in defaults < TOML file < `KPLANE__SECTION__KEY` environment
//! variables (env wins, for Kubernetes). Keys are kebab-case; an env var's `_` stands for `-`
//! and `__` for a section boundary: `KPLANE__COLLECTOR__RECV_BUFFER` sets
//! `[collector] recv-buffer`. After loading, [`Validate`] collects every problem at once.

use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::ConfigError;

/// Checks a loaded configuration, pushing one message per problem.
pub trait Validate {
    fn validate(&self, problems: &mut Vec<String>);
}

/// Where configuration comes from, besides the built-in defaults.
#[derive(Clone, Debug, Default)]
pub struct ConfigSource {
    /// A TOML file (must exist when given).
    pub file: Option<PathBuf>,
    /// Environment variable prefix; `KPLANE__` unless overridden (tests).
    pub env_prefix: Option<String>,
    /// Extra `(key.path, value)` overrides applied last (CLI flags).
    pub overrides: Vec<(String, toml_value::Value)>,
}

/// Values for [`ConfigSource::overrides`].
pub mod toml_value {
    pub use figment::value::Value;
}

impl ConfigSource {
    pub fn file(path: impl AsRef<Path>) -> Self {
        Self {
            file: Some(path.as_ref().to_path_buf()),
            ..Self::default()
        }
    }

    /// Adds a CLI-flag override for `key` (dotted path, kebab-case).
    pub fn set(mut self, key: &str, value: impl Into<toml_value::Value>) -> Self {
        self.overrides.push((key.to_string(), value.into()));
        self
    }

    fn figment(&self, defaults: Figment) -> Result<Figment, ConfigError> {
        let mut f = defaults;
        if let Some(path) = &self.file {
            if !path.exists() {
                return Err(ConfigError {
                    problems: vec![format!("config file {} does not exist", path.display())],
                });
            }
            f = f.merge(Toml::file(path));
        }
        let prefix = self.env_prefix.as_deref().unwrap_or("KPLANE__");
        f = f.merge(Env::prefixed(prefix).map(|k| {
            k.as_str()
                .to_lowercase()
                .replace("__", ".")
                .replace('_', "-")
                .into()
        }));
        for (key, value) in &self.overrides {
            f = f.merge(Serialized::default(key, value));
        }
        Ok(f)
    }
}

fn load_errors(e: figment::Error) -> ConfigError {
    ConfigError {
        problems: e.into_iter().map(|e| e.to_string()).collect(),
    }
}

fn validated<T: Validate>(value: T) -> Result<T, ConfigError> {
    let mut problems = Vec::new();
    value.validate(&mut problems);
    if problems.is_empty() {
        Ok(value)
    } else {
        Err(ConfigError { problems })
    }
}

/// Loads a whole configuration document.
pub fn load<T>(source: &ConfigSource) -> Result<T, ConfigError>
where
    T: DeserializeOwned + Serialize + Default + Validate,
{
    let f = source.figment(Figment::from(Serialized::defaults(T::default())))?;
    validated(f.extract::<T>().map_err(load_errors)?)
}

/// Loads one section (`[collector]`, …) of a shared file, for a service's own binary.
impl Validate for kplane_bus::BusConfig {
    fn validate(&self, problems: &mut Vec<String>) {
        kplane_bus::BusConfig::validate(self, problems);
    }
}

pub fn load_section<T>(source: &ConfigSource, section: &str) -> Result<T, ConfigError>
where
    T: DeserializeOwned + Serialize + Default + Validate,
{
    let f = source.figment(Figment::from(Serialized::default(section, T::default())))?;
    validated(f.extract_inner::<T>(section).map_err(load_errors)?)
}

#[cfg(test)]
// figment's `Jail` closures return its (large) error type; nothing to box here.
#[allow(clippy::result_large_err)]
mod layering {
    use figment::Jail;
    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Default, Deserialize, Serialize, PartialEq)]
    #[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
    struct Doc {
        section: Section,
    }

    #[derive(Debug, Deserialize, Serialize, PartialEq)]
    #[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
    struct Section {
        batch_size: usize,
        name: String,
    }

    impl Default for Section {
        fn default() -> Self {
            Self {
                batch_size: 10,
                name: "default".into(),
            }
        }
    }

    impl Validate for Doc {
        fn validate(&self, problems: &mut Vec<String>) {
            if self.section.batch_size == 0 {
                problems.push("section.batch-size must be > 0".into());
            }
            if self.section.name.is_empty() {
                problems.push("section.name must not be empty".into());
            }
        }
    }

    impl Validate for Section {
        fn validate(&self, _: &mut Vec<String>) {}
    }

    #[test]
    fn defaults_then_file_then_env_then_flags() {
        Jail::expect_with(|jail| {
            let none = ConfigSource::default();
            assert_eq!(load::<Doc>(&none).unwrap().section.batch_size, 10);

            jail.create_file("k.toml", "[section]\nbatch-size = 20\nname = \"file\"\n")?;
            let file = ConfigSource::file("k.toml");
            let doc = load::<Doc>(&file).unwrap();
            assert_eq!(
                (doc.section.batch_size, doc.section.name.as_str()),
                (20, "file")
            );

            jail.set_env("KPLANE__SECTION__BATCH_SIZE", "30");
            let doc = load::<Doc>(&file).unwrap();
            assert_eq!(
                (doc.section.batch_size, doc.section.name.as_str()),
                (30, "file")
            );

            let flags = file.clone().set("section.batch-size", 40);
            assert_eq!(load::<Doc>(&flags).unwrap().section.batch_size, 40);

            let section = load_section::<Section>(&file, "section").unwrap();
            assert_eq!(section.batch_size, 30);
            Ok(())
        });
    }

    #[test]
    fn every_validation_problem_is_reported_at_once() {
        Jail::expect_with(|jail| {
            jail.create_file("k.toml", "[section]\nbatch-size = 0\nname = \"\"\n")?;
            let err = load::<Doc>(&ConfigSource::file("k.toml")).unwrap_err();
            assert_eq!(err.problems.len(), 2, "{err}");
            assert!(err.to_string().contains("2 problem(s)"));
            Ok(())
        });
    }

    #[test]
    fn unknown_keys_and_missing_files_are_errors() {
        Jail::expect_with(|jail| {
            jail.create_file("k.toml", "[section]\nbatch-sise = 1\n")?;
            let err = load::<Doc>(&ConfigSource::file("k.toml")).unwrap_err();
            assert!(err.to_string().contains("batch-sise"), "{err}");
            let err = load::<Doc>(&ConfigSource::file("missing.toml")).unwrap_err();
            assert!(err.to_string().contains("does not exist"), "{err}");
            Ok(())
        });
    }
}
