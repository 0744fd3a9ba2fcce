//! ATTACH options. Every option is named; an unknown one is an error that names it.

use std::path::PathBuf;

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

    /// Whether a commit's files and the catalog are durable before it is acknowledged.
    pub fn durable_at_commit(self) -> bool {
        self == Durability::Immediate
    }
}

#[derive(Debug, Clone)]
pub struct AttachOptions {
    /// Warehouse folder; `None` means the folder recorded in the catalog, or beside the file.
    pub data_path: Option<PathBuf>,
    pub read_only: bool,
    pub durability: Durability,
    /// Who commits: recorded in the commit log.
    pub actor: String,
    /// Data files roll over at about this many bytes (None: the table's
    /// `write.target-file-size-bytes` property, else 512 MB, as in DuckLake and Iceberg).
    pub target_file_size: Option<u64>,
}

impl Default for AttachOptions {
    fn default() -> Self {
        Self {
            data_path: None,
            read_only: false,
            durability: Durability::Immediate,
            actor: default_actor(),
            target_file_size: None,
        }
    }
}

impl AttachOptions {
    /// `pairs` are the options DuckDB did not consume itself, keys in any case.
    pub fn parse<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>, read_only: bool) -> Result<Self> {
        let mut o = AttachOptions { read_only, ..Default::default() };
        for (key, value) in pairs {
            match key.to_ascii_lowercase().as_str() {
                "data_path" => {
                    if value.is_empty() {
                        return Err(Error::invalid("DATA_PATH must not be empty"));
                    }
                    o.data_path = Some(PathBuf::from(value));
                }
                "durability" => o.durability = Durability::parse(value)?,
                "actor" => {
                    if value.is_empty() {
                        return Err(Error::invalid("ACTOR must not be empty"));
                    }
                    o.actor = value.to_string();
                }
                "target_file_size" => o.target_file_size = Some(parse_size("TARGET_FILE_SIZE", value)?),
                other => {
                    return Err(Error::invalid(format!(
                        "unknown ATTACH option '{}' for a skade catalog (known: DATA_PATH, \
                         READ_ONLY, DURABILITY, ACTOR, TARGET_FILE_SIZE)",
                        other.to_uppercase()
                    )))
                }
            }
        }
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
        assert_eq!(o.data_path.unwrap(), PathBuf::from("/tmp/x"));
        assert_eq!(o.durability, Durability::None);
        assert_eq!(o.actor, "etl");
        assert!(o.read_only);
        assert!(AttachOptions::parse([("durability", "sometimes")], false).is_err());
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
