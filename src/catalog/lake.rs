//! A lake in a bucket: `ATTACH 's3://bucket/prefix' (TYPE skade)` (issue 44). Everything lives
//! under the prefix: the commit log (`log/`) and the warehouse (`warehouse/`, its own folder so
//! that no schema can be named like the log). Each host keeps its fold of the catalog in a local
//! cache folder, a catalog file like any other (`catalog.skade`), which it opens through the
//! bucket log: the first host to attach an empty prefix creates the lake (its catalog adopts the
//! log), every other joins it (`residency::join`) and folds the log. The cache is never the only
//! copy of anything: it can be removed at any time, and is rebuilt from the bucket.

use std::path::PathBuf;

use super::options::AttachOptions;
use crate::error::{Error, Result};
use crate::io::object;

/// The cache's record of which lake it folds, so that a CACHE_PATH reused for another lake is
/// refused rather than mixed.
const LAKE_FILE: &str = "lake.json";
const CATALOG_FILE: &str = "catalog.skade";

/// Where a lake in a bucket is, as an open of a catalog file sees it: the cache's catalog file,
/// and the options that send its warehouse and log to the bucket.
/// `is_open(file)`: whether this process has the catalog file open (CACHE_RESET refuses then).
pub fn resolve(
    url: &str,
    mut options: AttachOptions,
    is_open: impl Fn(&std::path::Path) -> bool,
) -> Result<(PathBuf, AttachOptions)> {
    let url = object::normalize(url)?;
    let (bucket, _) = object::split(&url)?;
    for (given, name) in [(&options.data_path, "DATA_PATH"), (&options.commit_log_location, "COMMIT_LOG")] {
        if given.is_some() {
            return Err(Error::invalid(format!(
                "{name} cannot be given for the lake in a bucket {url}: its warehouse and commit log live under \
                 its prefix ({url}/warehouse, {url}/log)"
            )));
        }
    }
    let cache = match options.cache_path.take() {
        Some(dir) => crate::io::absolute(std::path::Path::new(&dir))?,
        None => default_cache(bucket, &url)?,
    };
    crate::io::create_dirs(&cache)?;
    claim(&cache, &url)?;
    refuse_foreign_prefix(&url)?;
    if std::mem::take(&mut options.cache_reset) {
        let file = cache.join(CATALOG_FILE);
        if is_open(&file) {
            return Err(Error::invalid(format!(
                "CACHE_RESET: the cache {} of the lake {url} is attached in this process: DETACH it first",
                file.display()
            )));
        }
        set_aside(&cache)?;
    }
    let log = format!("{url}/log");
    if options.read_only {
        let provider = crate::commit_log::provider_for_open(None, Some(&log))
            .ok_or_else(|| Error::internal("no commit log provider for a bucket"))?;
        if provider.reader(&log)?.adoption()?.is_none() {
            return Err(Error::catalog(format!(
                "the lake {url} does not exist (a READ_ONLY attach creates none: attach it READ_WRITE once)"
            )));
        }
    }
    options.data_path = Some(format!("{url}/warehouse"));
    options.commit_log_location = Some(log);
    Ok((cache.join(CATALOG_FILE), options))
}

/// `$XDG_CACHE_HOME/skade/lakes/<bucket>-<hash>` (`~/.cache` when unset): one folder per lake
/// and endpoint (two endpoints can serve buckets of one name).
fn default_cache(bucket: &str, url: &str) -> Result<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .ok_or_else(|| Error::invalid(format!("no cache folder for the lake {url}: set CACHE_PATH (or HOME)")))?;
    let endpoint = object::store_for(url).map(|(store, _)| store.describe()).unwrap_or_default();
    let hash = twox_hash::XxHash3_64::oneshot(format!("{endpoint}\n{url}").as_bytes());
    Ok(base.join("skade").join("lakes").join(format!("{bucket}-{:012x}", hash & 0xffff_ffff_ffff)))
}

/// Records in the cache folder which lake it folds, or checks that it is this one.
fn claim(cache: &std::path::Path, url: &str) -> Result<()> {
    let file = cache.join(LAKE_FILE);
    let ours = serde_json::json!({ "url": url }).to_string();
    // (two processes claiming at once: one publishes, the other reads the same bytes)
    if crate::io::publish_new(&file, ours.as_bytes())? {
        return Ok(());
    }
    let held = crate::io::input::read_whole(&super::store::utf8(&file)?, "cache record")?;
    let theirs = serde_json::from_slice::<serde_json::Value>(&held)
        .ok()
        .and_then(|v| v.get("url")?.as_str().map(str::to_string))
        .unwrap_or_default();
    if theirs != url {
        return Err(Error::invalid(format!(
            "CACHE_PATH {} holds the cache of the lake {theirs}, not of {url}: give each lake its own folder",
            cache.display()
        )));
    }
    Ok(())
}

/// CACHE_RESET (or a damaged cache): moves the cache's catalog file into `stale/<ms since the epoch>/` (kept for
/// inspection; the bucket holds everything it held), so that the open rebuilds it.
pub(crate) fn set_aside(cache: &std::path::Path) -> Result<()> {
    let file = cache.join(CATALOG_FILE);
    if !file.exists() {
        return Ok(());
    }
    let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis();
    let stale = cache.join("stale").join(ms.to_string());
    crate::io::create_dirs(&stale)?;
    crate::io::rename(&file, &stale.join(CATALOG_FILE))?;
    eprintln!("skade: the cache {} was moved to {}; rebuilding it", file.display(), stale.display());
    Ok(())
}

/// A prefix that holds objects but no skade lake is refused: a lake is made in an empty prefix.
fn refuse_foreign_prefix(url: &str) -> Result<()> {
    let found = object::wait(object::list_folder(url))?;
    let ours = |location: &str| {
        let name = location.trim_end_matches('/').rsplit('/').next().unwrap_or("");
        matches!(name, "log" | "warehouse")
    };
    if let Some(other) = found.iter().find(|o| !ours(&o.location)) {
        return Err(Error::invalid(format!(
            "{url} holds objects but no skade lake (for example {}): name an empty prefix for a new lake",
            other.location
        )));
    }
    Ok(())
}
