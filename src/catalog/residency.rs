//! Whether an open goes through a commit log (issue 23), and adoption.
//!
//! A catalog is log-resident when its meta table carries a [`LogStamp`] (provider and location).
//! One precedence picks the provider of an open: its own (`AttachOptions::commit_log`), else the
//! process's registration, else the in-tree folder log when a location (COMMIT_LOG) is given.
//! Then:
//! - stamped, no provider: refused, naming the log and the option that opens it, before anything
//!   (a migration) writes to the file;
//! - stamped, a provider: it must be the stamp's (name and location), and the log must be this
//!   catalog's (its adoption stamp names the catalog's uuid);
//! - not stamped, a provider and a location: adopted (read-write only): the log's position 0 is
//!   raced for, then the file is stamped;
//! - not stamped, a provider but no location: refused (never a provider silently ignored);
//! - neither: a plain catalog, as before.

use std::path::Path;

use super::log_batch::AdoptionStamp;
use super::log_commit::LogLink;
use super::options::{AttachOptions, Durability};
use super::store::{peek_stamp, Loaded, LogStamp, Store};
use super::tables::{LOG_HEAD_ID, META};
use crate::commit_log::{provider_for_open, CommitLogProvider};
use crate::error::{Error, ErrorKind, Result};

/// An open catalog file: its store, what it holds, and its link to its commit log, if any.
pub(crate) struct Opened {
    pub store: Store,
    pub loaded: Loaded,
    pub log: Option<LogLink>,
}

/// Opens (or creates) the catalog file at `path` for `options`, plain or through its log.
pub(crate) fn open(path: &Path, options: &AttachOptions, data_path: Option<&str>) -> Result<Opened> {
    let provider = provider_for_open(options.commit_log.as_ref(), options.commit_log_location.as_deref());
    let location = options.commit_log_location.as_deref().map(normalize).transpose()?;
    if let Some(p) = &provider {
        if options.durability != Durability::Immediate {
            return Err(Error::invalid(format!(
                "DURABILITY '{}' is not available through a commit log ({}): a commit is acknowledged once its \
                 batch is durable in the log",
                options.durability.name(),
                p.name()
            )));
        }
        if location.is_none() && !path.exists() {
            return Err(no_location(path, p.as_ref()));
        }
    }
    if let (Some(p), Some(location), false) = (&provider, &location, path.exists()) {
        // a log that another catalog adopted is refused before a new catalog is made for it,
        // unless it lives in a bucket: another host's catalog file then joins it
        if let Some(held) = p.reader(location)?.adoption()? {
            let held = AdoptionStamp::decode(&held, location)?;
            if Path::new(&held.path) != path {
                if !crate::io::object::is_object(location) {
                    return Err(another_catalogs(location, &held, path));
                }
                if options.read_only {
                    return Err(Error::permission(format!(
                        "a READ_ONLY attach cannot make {} a new catalog file of the lake whose commit log is \
                         {location} (it would show none of its tables): attach it read-write once",
                        path.display()
                    )));
                }
                let joined = join(path, p.as_ref(), location, &held, data_path)?;
                return open(path, options, Some(&joined));
            }
        }
    }
    let shared = provider.is_some();
    let (store, _created) = match Store::open(path, options.read_only, data_path, shared) {
        Err(e) if e.kind == ErrorKind::Permission && !shared => {
            // busy: perhaps held by processes that commit through its log
            return Err(peek_stamp(path).map(|s| needs_provider(path, &s)).unwrap_or(e));
        }
        other => other?,
    };
    let opened = (|| {
        let link = match (store.residency()?, &provider) {
            (None, None) => {
                if !options.read_only {
                    store.migrate()?;
                }
                None
            }
            (Some(stamp), None) => return Err(needs_provider(path, &stamp)),
            (Some(stamp), Some(p)) => Some(connect(&store, &stamp, p.as_ref(), location.as_deref(), options)?),
            (None, Some(p)) => {
                if options.read_only {
                    return Err(Error::invalid(format!(
                        "skade catalog {} is not log-resident: a READ_ONLY attach cannot make it so (attach it \
                         read-write with COMMIT_LOG once)",
                        path.display()
                    )));
                }
                let location = location.as_deref().ok_or_else(|| no_location(path, p.as_ref()))?;
                store.migrate()?;
                // (a writable copy of another catalog is refused before it is stamped)
                let before = store.load(data_path)?;
                adopt(&store, p.as_ref(), location, &before)?;
                let stamp = LogStamp { provider: p.name().to_string(), location: location.to_string() };
                Some(connect(&store, &stamp, p.as_ref(), None, options)?)
            }
        };
        if let Some((link, held)) = &link {
            if !options.read_only {
                if link.in_bucket() {
                    check_not_rewound(&store, link)?;
                    start_from_checkpoint(&store, link, held)?;
                }
                link.catch_up(&store)?; // what a process that died left unfolded, or other hosts wrote
            }
        }
        let link = link.map(|(link, _)| link);
        let loaded = store.load(data_path)?;
        if let Some(link) = &link {
            link.position.store(loaded.log_position, std::sync::atomic::Ordering::SeqCst);
        }
        Ok((loaded, link))
    })();
    // (a catalog this open made stays when a later step fails: another process may have opened
    // it already; a log adopted by another catalog was refused before it was made)
    let (loaded, log) = opened?;
    Ok(Opened { store, loaded, log })
}

/// Races the log's position 0 for this catalog, then stamps the file: from then on it opens only
/// through the log. A log that another catalog adopted is refused.
fn adopt(store: &Store, provider: &dyn CommitLogProvider, location: &str, before: &Loaded) -> Result<()> {
    let uuid = store.catalog_uuid()?;
    let committer = provider.committer(location)?;
    let ours = AdoptionStamp::new(&uuid, &store.path.display().to_string(), before.commit_seq == 0, &before.data_path);
    let held = committer.adopt(&serde_json::to_vec(&ours)?)?;
    let held = AdoptionStamp::decode(&held, location)?;
    if held.catalog != uuid {
        // two hosts made a lake in one bucket prefix at once: the loser, still empty, joins
        let joinable = crate::io::object::is_object(location)
            && held.fresh
            && before.commit_seq == 0
            && held.data_path.as_deref() == Some(before.data_path.as_str());
        if !joinable {
            return Err(another_catalogs(location, &held, &store.path));
        }
        store.become_copy_of(&held.catalog)?;
        return store
            .stamp_log_resident(&LogStamp { provider: provider.name().to_string(), location: location.to_string() });
    }
    let reader = provider.reader(location)?;
    if !reader.tail(1, 1)?.is_empty() {
        if store.residency()?.is_some() {
            return Ok(()); // another process adopted it for this catalog meanwhile, and committed
        }
        return Err(Error::catalog(format!(
            "the commit log {location} already holds commits, but skade catalog {} was never stamped with it: \
             it cannot adopt a log it did not write (name an empty folder)",
            store.path.display()
        )));
    }
    store.stamp_log_resident(&LogStamp { provider: provider.name().to_string(), location: location.to_string() })
}

/// Makes the catalog file `path` (absent) another copy of the catalog that adopted the bucket
/// log at `location`: the same uuid and warehouse, stamped with the log, empty: the open that
/// follows starts it from the newest checkpoint, if any, and folds the log after it. Returns the
/// warehouse.
fn join(
    path: &Path,
    provider: &dyn CommitLogProvider,
    location: &str,
    held: &AdoptionStamp,
    data_path: Option<&str>,
) -> Result<String> {
    // (a warehouse on the adopter's disk is no other host's: its files cannot be read from here,
    // and new ones written here no other host would see)
    let Some(theirs) = held.data_path.clone().filter(|d| crate::io::object::is_object(d)) else {
        return Err(Error::catalog(format!(
            "the commit log {location} belongs to skade catalog {} (uuid {}), whose warehouse is not in a bucket \
             ({}): another catalog file cannot join it; attach {} itself",
            held.path,
            held.catalog,
            held.data_path.as_deref().unwrap_or("not recorded"),
            held.path
        )));
    };
    if let Some(given) = data_path.filter(|given| *given != theirs) {
        return Err(Error::invalid(format!(
            "DATA_PATH {given} differs from the warehouse {theirs} of the lake whose commit log {location} this \
             catalog joins"
        )));
    }
    super::store::create_joining(path, &theirs, &held.catalog)?;
    let (store, _) = Store::open(path, false, Some(&theirs), true)?;
    if store.catalog_uuid()? != held.catalog {
        return Err(another_catalogs(location, held, path));
    }
    if store.residency()?.is_none() {
        store
            .stamp_log_resident(&LogStamp { provider: provider.name().to_string(), location: location.to_string() })?;
    }
    Ok(theirs)
}

/// Links a log-resident catalog to its log: the reader (every open asks the provider for it), a
/// committer for a writable open, both checked against the stamp.
fn connect(
    store: &Store,
    stamp: &LogStamp,
    provider: &dyn CommitLogProvider,
    location: Option<&str>,
    options: &AttachOptions,
) -> Result<(LogLink, AdoptionStamp)> {
    let path = &store.path;
    if provider.name() != stamp.provider {
        return Err(Error::invalid(format!(
            "skade catalog {} commits through the commit log {} of provider '{}', but this open's provider is '{}'",
            path.display(),
            stamp.location,
            stamp.provider,
            provider.name()
        )));
    }
    if let Some(given) = location {
        if given != stamp.location {
            return Err(Error::invalid(format!(
                "COMMIT_LOG '{given}' is not skade catalog {}'s commit log: it commits through {}",
                path.display(),
                stamp.location
            )));
        }
    }
    let (reader, committer) = provider.link(&stamp.location, !options.read_only)?;
    let checkpoint = store.log_position()?;
    let held = match reader.adoption()? {
        Some(held) => {
            let held = AdoptionStamp::decode(&held, &stamp.location)?;
            let uuid = store.catalog_uuid()?;
            if held.catalog != uuid && crate::io::object::is_object(&stamp.location) {
                return Err(Error::catalog(format!(
                    "the commit log {} now belongs to catalog {} (made again in its prefix?), not to catalog {uuid} \
                     whose fold {} holds: for a lake in a bucket, ATTACH it with CACHE_RESET true to rebuild this \
                     host's cache from the bucket",
                    stamp.location,
                    held.catalog,
                    path.display()
                )));
            }
            if held.catalog != uuid {
                return Err(another_catalogs(&stamp.location, &held, path));
            }
            held
        }
        None => {
            return Err(Error::catalog(format!(
                "the commit log {} of skade catalog {} is missing (no adoption stamp; the catalog has folded \
                 {checkpoint} position(s) of it): was the folder removed, moved or not mounted?",
                stamp.location,
                path.display()
            )))
        }
    };
    let link = LogLink::new(&stamp.provider, &stamp.location, committer, reader, options.commit_log_poll, checkpoint);
    Ok((link, held))
}

/// A cache that folded position h of a bucket log while the log holds no h (and was not
/// truncated past it) lost acknowledged commits with the bucket (restored from a backup, rolled
/// back, another endpoint), or holds another batch there than the one it folded (rolled back and
/// written again): refused, never folded on from a history that diverged. 1 GET.
fn check_not_rewound(store: &Store, link: &LogLink) -> Result<()> {
    // (one read: another process of this host may fold meanwhile)
    let (h, folded) = store.read(|tx| {
        let h = tx.open_table(super::tables::COUNTERS)?.get(super::tables::LOG_POSITION)?.map(|v| v.value());
        let head = tx.open_table(META)?.get(LOG_HEAD_ID)?.map(|v| v.value().to_string());
        Ok((h.unwrap_or(0), head))
    })?;
    if h == 0 {
        return Ok(());
    }
    // the id of the batch at h, when the file recorded it for h ("<seq>:<id>"; an older build's
    // fold since leaves another position's)
    let folded =
        folded.and_then(|f| f.split_once(':').filter(|(s, _)| *s == h.to_string()).map(|(_, id)| id.to_string()));
    match link.batch_id(h) {
        Ok(Some(id)) if folded.as_ref().is_none_or(|f| *f == id) => Ok(()),
        Ok(Some(id)) => Err(Error::catalog(format!(
            "this host's cache {} folded batch {} at position {h} of the commit log {}, which now holds another \
             ({id}): the bucket's history changed (rolled back, then written again). Nothing was changed; to \
             accept the bucket as it is, ATTACH with CACHE_RESET true",
            store.path.display(),
            folded.unwrap_or_default(),
            link.location
        ))),
        // (truncated past it: the fold restores a checkpoint)
        Err(_) if link.start().is_ok_and(|start| h < start) => Ok(()),
        Err(e) => Err(e),
        Ok(None) => Err(Error::catalog(format!(
            "this host's cache {} folded position {h} of the commit log {}, which the log no longer holds: the \
             bucket lost commits that were acknowledged (rolled back, restored from a copy, or another endpoint). \
             Nothing was changed; to accept the bucket as it is, ATTACH with CACHE_RESET true",
            store.path.display(),
            link.location
        ))),
    }
}

/// A bucket log's cache that has folded nothing starts from the log's newest checkpoint: a lake
/// with a history would cost a GET per position to replay, and one whose log was truncated, or
/// that was adopted by a catalog holding commits already, cannot be replayed from position 1 at
/// all. Such a lake's first checkpoint is written by the catalog that adopted it, at its open.
fn start_from_checkpoint(store: &Store, link: &LogLink, held: &AdoptionStamp) -> Result<()> {
    let position = store.log_position()?;
    let joining = position == 0 && store.commit_seq()? == 0;
    if !joining && held.fresh {
        return Ok(()); // (no request: the common open)
    }
    let listed = super::checkpoint::list(&link.location)?;
    if joining {
        if !listed.is_empty() {
            super::checkpoint::restore_newest(store, &link.location, 0)?;
        } else if !held.fresh {
            return Err(Error::catalog(format!(
                "the lake of commit log {} held commits before it adopted the log, and it has no checkpoint to \
                 start this catalog from: attach {} (which adopted it) read-write, and it writes one",
                link.location, held.path
            )));
        }
    } else if listed.is_empty() {
        if let Err(e) = link.checkpoint(store) {
            eprintln!("skade: writing the first checkpoint of the commit log {}: {e}", link.location);
        }
    }
    Ok(())
}

/// A log location as given, made absolute (as DATA_PATH is: relative to the working directory);
/// a bucket's without trailing slashes.
fn normalize(location: &str) -> Result<String> {
    if crate::io::object::is_object(location) {
        return crate::io::object::normalize(location).map_err(|e| Error::invalid(format!("COMMIT_LOG {}", e.message)));
    }
    let path = crate::io::absolute(Path::new(location))?;
    path.to_str()
        .map(|s| s.trim_end_matches('/').to_string())
        .ok_or_else(|| Error::invalid(format!("COMMIT_LOG '{location}' is not valid UTF-8")))
}

fn needs_provider(path: &Path, stamp: &LogStamp) -> Error {
    Error::catalog(format!(
        "skade catalog {} is log-resident: its commits go through the commit log {} ({}), and this open has no \
         commit log provider; attach it with COMMIT_LOG '{}' (or, embedding skade, give the provider: \
         AttachOptions::commit_log or skade::commit_log::register_commit_log)",
        path.display(),
        stamp.location,
        stamp.provider,
        stamp.location
    ))
}

fn no_location(path: &Path, provider: &dyn CommitLogProvider) -> Error {
    Error::invalid(format!(
        "a commit log provider ({}) was given for skade catalog {}, which is not log-resident, and no COMMIT_LOG \
         location to make it so: name the log (COMMIT_LOG '<folder>'), the provider is never ignored",
        provider.name(),
        path.display()
    ))
}

fn another_catalogs(location: &str, held: &AdoptionStamp, path: &Path) -> Error {
    Error::invalid(format!(
        "the commit log {location} belongs to another catalog ({}, catalog uuid {}), not to skade catalog {}: a \
         commit log serves one catalog, give this one a folder of its own",
        held.path,
        held.catalog,
        path.display()
    ))
}

/// A second open of a catalog this process has open already shares that open: it must ask for
/// the same (log or none), or it is refused as a first open would be.
pub(crate) fn check_shared_open(
    path: &Path,
    open: Option<&LogLink>,
    provider: Option<&dyn CommitLogProvider>,
    options: &AttachOptions,
) -> Result<()> {
    let location = options.commit_log_location.as_deref().map(normalize).transpose()?;
    match open {
        Some(link) => {
            if provider.is_none() && location.is_none() {
                let stamp = LogStamp { provider: link.provider.clone(), location: link.location.clone() };
                return Err(needs_provider(path, &stamp));
            }
            if let Some(given) = location.filter(|l| *l != link.location) {
                return Err(Error::invalid(format!(
                    "COMMIT_LOG '{given}' is not skade catalog {}'s commit log: it commits through {}",
                    path.display(),
                    link.location
                )));
            }
            if let Some(p) = provider.filter(|p| p.name() != link.provider) {
                return Err(Error::invalid(format!(
                    "skade catalog {} is attached in this process through the commit log provider '{}', not '{}'",
                    path.display(),
                    link.provider,
                    p.name()
                )));
            }
            Ok(())
        }
        None if provider.is_some() || location.is_some() => Err(Error::invalid(format!(
            "skade catalog {} is attached in this process without a commit log: DETACH it (every attach of it in \
             this process) before attaching it through one; a commit log provider is never ignored",
            path.display()
        ))),
        None => Ok(()),
    }
}
