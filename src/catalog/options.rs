//! ATTACH options. Every option is named; an unknown one is an error that names it.

use crate::error::{Error, Result};

/// How a commit reaches the disk (see docs/design/durability.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Files and the catalog are fsynced before a commit is acknowledged.
    Immediate,
    /// Acknowledged before fsync; a background flush makes every commit durable within
    /// [`crate::catalog::EVENTUAL_FLUSH_INTERVAL`]. A crash loses at most that last interval,
    /// never part of a commit.
    Eventual,
    /// Durable only at DETACH or CHECKPOINT (bulk import): a crash loses everything since.
    None,
}

impl Durability {
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "immediate" => Ok(Durability::Immediate),
            "eventual" => Ok(Durability::Eventual),
            "none" => Ok(Durability::None),
            other => {
                Err(Error::invalid(format!("unknown DURABILITY '{other}': expected 'immediate', 'eventual' or 'none'")))
            }
        }
    }

    /// Its name in ATTACH's DURABILITY option.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Immediate => "immediate",
            Durability::Eventual => "eventual",
            Durability::None => "none",
        }
    }

    /// Whether a commit's files and the catalog are durable before it is acknowledged.
    pub fn durable_at_commit(self) -> bool {
        self == Durability::Immediate
    }
}

#[derive(Debug, Clone)]
pub struct AttachOptions {
    /// Warehouse folder; `None` means the folder recorded in the catalog, or beside the file.
    /// A folder, or an `s3://bucket/prefix` (as given; `Catalog::open` makes a folder absolute).
    pub data_path: Option<String>,
    pub read_only: bool,
    pub durability: Durability,
    /// Whether DURABILITY was given (else `durability` is the default, 'immediate'): messages
    /// about a second ATTACH say which.
    pub durability_given: bool,
    /// Who commits: recorded in the commit log.
    pub actor: String,
    /// Data files roll over at about this many bytes (None: the table's
    /// `write.target-file-size-bytes` property, else 512 MB, as in DuckLake and Iceberg).
    pub target_file_size: Option<u64>,
    pub lineage: LineageOptions,
    /// The commit log provider this open goes through, over the process's registered one
    /// (`commit_log::register_commit_log`), over the in-tree folder log when only a location is
    /// given (see `catalog::residency`).
    pub commit_log: Option<std::sync::Arc<dyn crate::commit_log::CommitLogProvider>>,
    /// COMMIT_LOG: where the log is (for the folder log, a folder): needed to make a catalog
    /// log-resident; a log-resident catalog's stamp names its own.
    pub commit_log_location: Option<String>,
    /// COMMIT_LOG_POLL_MS: how often a log-resident catalog looks for other processes' commits.
    pub commit_log_poll: std::time::Duration,
    /// TIMESTAMP_NS: how new TIMESTAMP_NS columns are stored ('refuse', or 'microseconds').
    pub timestamp_ns: crate::format::duckdb_types::Nanoseconds,
    /// FORMAT_VERSION: the Iceberg format of the tables this ATTACH creates (2, the default, or 3).
    pub format_version: iceberg::spec::FormatVersion,
    /// CACHE_PATH: the folder of this host's fold of a lake in a bucket (`catalog::lake`).
    pub cache_path: Option<String>,
    /// CACHE_RESET: move this host's cache of a lake aside and rebuild it from the bucket (after
    /// the lake was made again in its prefix, or the bucket was rolled back).
    pub cache_reset: bool,
}

/// The default of COMMIT_LOG_POLL_MS.
pub const DEFAULT_COMMIT_LOG_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Lineage (docs/design/lineage.md): the history table and an OpenLineage collector. ATTACH
/// options win over the environment variables openlineage-python reads, so a process started
/// with `OPENLINEAGE_URL` sends the events of every lake it attaches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LineageOptions {
    /// Keep the history table `skade_lineage.events` (LINEAGE; default: on when a collector is set).
    pub enabled: bool,
    /// The collector's base URL (OPENLINEAGE_URL): events are POSTed to `<url>/<endpoint>`.
    pub url: Option<String>,
    /// OPENLINEAGE_ENDPOINT: `api/v1/lineage`, Marquez's, unless set.
    pub endpoint: String,
    /// The jobs' namespace (OPENLINEAGE_NAMESPACE, else `default`, as openlineage-python's).
    pub namespace: String,
    /// Sent as `Authorization: Bearer <key>` (OPENLINEAGE_API_KEY).
    pub api_key: Option<String>,
}

impl LineageOptions {
    /// From the ATTACH options given (`None`: not given) and the environment (`env`).
    pub fn resolve(
        lineage: Option<bool>,
        given: &std::collections::HashMap<String, String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let pick = |key: &str| given.get(key).cloned().or_else(|| env(&key.to_uppercase())).filter(|v| !v.is_empty());
        let disabled = env("OPENLINEAGE_DISABLED")
            .is_some_and(|v| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on"));
        let url = match pick("openlineage_url") {
            Some(_) if disabled => None,
            Some(url) => Some(check_url(&url)?),
            None => None,
        };
        let endpoint = pick("openlineage_endpoint").unwrap_or_else(|| "api/v1/lineage".into());
        Ok(LineageOptions {
            enabled: lineage.unwrap_or(url.is_some()),
            url: if lineage == Some(false) { None } else { url },
            endpoint: endpoint.trim_start_matches('/').to_string(),
            namespace: pick("openlineage_namespace").unwrap_or_else(|| "default".into()),
            api_key: pick("openlineage_api_key"),
        })
    }

    /// The collector's lineage endpoint, when one is set.
    pub fn endpoint_url(&self) -> Option<String> {
        self.url.as_ref().map(|u| format!("{}/{}", u.trim_end_matches('/'), self.endpoint))
    }
}

fn check_url(url: &str) -> Result<String> {
    let bad = |why: &str| Err(Error::invalid(format!("OPENLINEAGE_URL '{url}' {why}")));
    if url.starts_with("https://") {
        return bad(
            "needs TLS, which this build of skade does not include: use an http:// collector (or a local proxy)",
        );
    }
    let Some(rest) = url.strip_prefix("http://") else {
        return bad("is not an http:// URL");
    };
    if rest.trim_end_matches('/').is_empty() {
        return bad("names no host");
    }
    Ok(url.to_string())
}

fn parse_bool(option: &str, value: &str) -> Result<bool> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Ok(true),
        "false" | "0" | "off" | "no" => Ok(false),
        _ => Err(Error::invalid(format!("{option} '{value}' is not a boolean: expected true or false"))),
    }
}

impl Default for AttachOptions {
    fn default() -> Self {
        Self {
            data_path: None,
            read_only: false,
            durability: Durability::Immediate,
            durability_given: false,
            actor: default_actor(),
            target_file_size: None,
            lineage: LineageOptions::default(),
            commit_log: None,
            commit_log_location: None,
            commit_log_poll: DEFAULT_COMMIT_LOG_POLL,
            timestamp_ns: Default::default(),
            format_version: iceberg::spec::FormatVersion::V2,
            cache_path: None,
            cache_reset: false,
        }
    }
}

impl AttachOptions {
    /// `pairs` are the options DuckDB did not consume itself, keys in any case.
    pub fn parse<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>, read_only: bool) -> Result<Self> {
        Self::parse_with_env(pairs, read_only, |k| std::env::var(k).ok())
    }

    /// [`Self::parse`] with `env` in place of the process environment.
    pub fn parse_with_env<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        read_only: bool,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let mut o = AttachOptions { read_only, ..Default::default() };
        let mut lineage = None;
        let mut openlineage = std::collections::HashMap::new();
        for (key, value) in pairs {
            match key.to_ascii_lowercase().as_str() {
                "data_path" => {
                    if value.is_empty() {
                        return Err(Error::invalid("DATA_PATH must not be empty"));
                    }
                    o.data_path = Some(value.to_string());
                }
                "durability" => {
                    o.durability = Durability::parse(value)?;
                    o.durability_given = true;
                }
                "actor" => {
                    if value.is_empty() {
                        return Err(Error::invalid("ACTOR must not be empty"));
                    }
                    o.actor = value.to_string();
                }
                "target_file_size" => o.target_file_size = Some(parse_size("TARGET_FILE_SIZE", value)?),
                "lineage" => lineage = Some(parse_bool("LINEAGE", value)?),
                "cache_path" => {
                    if value.is_empty() {
                        return Err(Error::invalid("CACHE_PATH must name a folder"));
                    }
                    o.cache_path = Some(value.to_string());
                }
                "cache_reset" => o.cache_reset = parse_bool("CACHE_RESET", value)?,
                "commit_log" => {
                    if value.is_empty() {
                        return Err(Error::invalid("COMMIT_LOG must name the commit log's folder"));
                    }
                    o.commit_log_location = Some(value.to_string());
                }
                "timestamp_ns" => {
                    use crate::format::duckdb_types::Nanoseconds;
                    o.timestamp_ns = match value.to_ascii_lowercase().as_str() {
                        "microseconds" => Nanoseconds::Microseconds,
                        "refuse" => Nanoseconds::Refuse,
                        _ => {
                            return Err(Error::invalid(format!(
                                "TIMESTAMP_NS '{value}': expected 'microseconds' (store new TIMESTAMP_NS columns as \
                                 microseconds, the last three digits dropped) or 'refuse'"
                            )))
                        }
                    };
                }
                "format_version" => {
                    o.format_version = match value.trim() {
                        "2" => iceberg::spec::FormatVersion::V2,
                        "3" => iceberg::spec::FormatVersion::V3,
                        _ => {
                            return Err(Error::invalid(format!(
                                "FORMAT_VERSION '{value}': expected 2 (Iceberg v2, the default) or 3 (Iceberg v3: \
                                 row lineage)"
                            )))
                        }
                    };
                }
                "commit_log_poll_ms" => {
                    let ms: u64 =
                        value.trim().parse().ok().filter(|ms| (1..=3_600_000).contains(ms)).ok_or_else(|| {
                            Error::invalid(format!(
                                "COMMIT_LOG_POLL_MS '{value}' is not a number of milliseconds from 1 to 3600000"
                            ))
                        })?;
                    o.commit_log_poll = std::time::Duration::from_millis(ms);
                }
                k @ ("openlineage_url" | "openlineage_endpoint" | "openlineage_namespace" | "openlineage_api_key") => {
                    openlineage.insert(k.to_string(), value.to_string());
                }
                other => {
                    return Err(Error::invalid(format!(
                        "unknown ATTACH option '{}' for a skade catalog (known: DATA_PATH, \
                         READ_ONLY, DURABILITY, ACTOR, TARGET_FILE_SIZE, TIMESTAMP_NS, FORMAT_VERSION, COMMIT_LOG, COMMIT_LOG_POLL_MS, \
                         CACHE_PATH, CACHE_RESET, LINEAGE, OPENLINEAGE_URL, OPENLINEAGE_ENDPOINT, OPENLINEAGE_NAMESPACE, \
                         OPENLINEAGE_API_KEY)",
                        other.to_uppercase()
                    )))
                }
            }
        }
        o.lineage = LineageOptions::resolve(lineage, &openlineage, env)?;
        Ok(o)
    }
}

/// A size as DuckDB writes them (`memory_limit`, DuckLake's `target_file_size`): bytes, or a
/// number with a unit, KB/MB/GB/TB in powers of 1000 and KiB/MiB/GiB/TiB in powers of 1024.
pub fn parse_size(option: &str, value: &str) -> Result<u64> {
    let bad = || {
        Error::invalid(format!("{option} '{value}' is not a size: expected bytes or a number with a unit, as '128MB'"))
    };
    let text = value.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: f64 = number.parse().map_err(|_| bad())?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" | "bytes" => 1.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let bytes = number * scale;
    if !bytes.is_finite() || bytes < 1.0 {
        return Err(Error::invalid(format!("{option} '{value}' must be at least one byte")));
    }
    if bytes >= 18_446_744_073_709_551_616.0 {
        return Err(Error::invalid(format!("{option} '{value}' is larger than 2^64 bytes")));
    }
    Ok(bytes as u64)
}

/// The OS user, as DuckLake and most tools record it: $USER, else the account of the uid.
pub fn default_actor() -> String {
    if let Ok(user) = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")) {
        if !user.is_empty() {
            return user;
        }
    }
    account_name().unwrap_or_else(|| format!("uid {}", unsafe { libc::getuid() }))
}

fn account_name() -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut result: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes into `pwd` and `buf`, which outlive the call; the name it points
    // at lives in `buf`.
    let rc = unsafe { libc::getpwuid_r(libc::getuid(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result) };
    if rc != 0 || result.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    name.to_str().ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_option_is_named() {
        let err = AttachOptions::parse([("compression", "zstd")], false).unwrap_err();
        assert!(err.message.contains("COMPRESSION"), "{}", err.message);
    }

    #[test]
    fn known_options_parse() {
        let o =
            AttachOptions::parse([("DATA_PATH", "/tmp/x"), ("durability", "NONE"), ("actor", "etl")], true).unwrap();
        assert_eq!(o.data_path.unwrap(), "/tmp/x");
        assert_eq!(o.durability, Durability::None);
        assert_eq!(o.actor, "etl");
        assert!(o.read_only);
        assert!(AttachOptions::parse([("durability", "sometimes")], false).is_err());
    }

    #[test]
    fn lineage_options_default_from_the_environment() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |k: &str| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        let none = AttachOptions::parse_with_env([], false, env(&[])).unwrap().lineage;
        assert!(!none.enabled && none.url.is_none());
        let from_env = AttachOptions::parse_with_env([], false, env(&[("OPENLINEAGE_URL", "http://c:5000")])).unwrap();
        assert!(from_env.lineage.enabled);
        assert_eq!(from_env.lineage.endpoint_url().unwrap(), "http://c:5000/api/v1/lineage");
        assert_eq!(from_env.lineage.namespace, "default");
        // an option wins over the environment; OPENLINEAGE_DISABLED stops every collector
        let given = AttachOptions::parse_with_env(
            [("openlineage_url", "http://mine/"), ("OPENLINEAGE_NAMESPACE", "etl"), ("openlineage_endpoint", "/x/y")],
            false,
            env(&[("OPENLINEAGE_URL", "http://c:5000"), ("OPENLINEAGE_API_KEY", "k")]),
        )
        .unwrap()
        .lineage;
        assert_eq!(given.endpoint_url().unwrap(), "http://mine/x/y");
        assert_eq!((given.namespace.as_str(), given.api_key.as_deref()), ("etl", Some("k")));
        let disabled = AttachOptions::parse_with_env(
            [("lineage", "true")],
            false,
            env(&[("OPENLINEAGE_URL", "http://c"), ("OPENLINEAGE_DISABLED", "true")]),
        )
        .unwrap()
        .lineage;
        assert!(disabled.enabled && disabled.url.is_none());
        let off = AttachOptions::parse_with_env([("lineage", "false")], false, env(&[("OPENLINEAGE_URL", "http://c")]));
        assert!(!off.unwrap().lineage.enabled);
        for bad in [("lineage", "maybe"), ("openlineage_url", "https://c"), ("openlineage_url", "ftp://c")] {
            let err = AttachOptions::parse_with_env([bad], false, env(&[])).unwrap_err();
            assert!(err.message.contains(&bad.0.to_uppercase()), "{}", err.message);
        }
    }

    #[test]
    fn sizes_parse_as_duckdb_writes_them() {
        let size = |v| parse_size("TARGET_FILE_SIZE", v);
        assert_eq!(size("1000").unwrap(), 1000);
        assert_eq!(size("128MB").unwrap(), 128_000_000);
        assert_eq!(size("1.5 GB").unwrap(), 1_500_000_000);
        assert_eq!(size("64kib").unwrap(), 65_536);
        assert_eq!(size(" 2 MiB ").unwrap(), 2 << 20);
        for bad in ["", "MB", "12 parsecs", "-5MB", "0", "0.1", "18446744073709551616", "20000000TB"] {
            let err = size(bad).unwrap_err();
            assert!(err.message.contains("TARGET_FILE_SIZE"), "{bad}: {}", err.message);
        }
    }
}
