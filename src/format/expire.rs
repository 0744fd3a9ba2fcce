//! Snapshot expiry: which snapshots a retention policy drops, and which files only they used.
//!
//! Every commit rewrites metadata.json with the whole snapshot history, so a table that takes
//! many small commits pays more for each one as history grows; expiring old snapshots (Iceberg's
//! `expire_snapshots`) keeps that bounded. The current snapshot is always kept.
//!
//! Every commit also leaves its metadata.json behind. Those written before the oldest kept
//! snapshot describe only expired states (their files are removed with them): expiry drops them
//! from the new metadata's log and removes them, and the older ones the log no longer lists.

use std::collections::{HashMap, HashSet};
use std::time::UNIX_EPOCH;

use iceberg::spec::{Snapshot, TableMetadata, TableMetadataBuilder};

use super::manifests::ManifestCache;
use crate::error::Result;
use crate::io::local_path;

/// Iceberg's bound on the metadata log (the iceberg crate trims the log to it on every build).
const PREVIOUS_VERSIONS_MAX: &str = "write.metadata.previous-versions-max";

/// Which snapshots to keep: those committed at or after `older_than_ms`, and at least the
/// `retain_last` newest. None for either means it does not constrain.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub older_than_ms: Option<i64>,
    pub retain_last: Option<usize>,
}

/// The snapshot ids `retention` expires (never the current one).
pub fn expired_snapshots(metadata: &TableMetadata, retention: Retention) -> Vec<i64> {
    let mut snapshots: Vec<&Snapshot> = metadata.snapshots().map(|s| s.as_ref()).collect();
    snapshots.sort_by_key(|s| std::cmp::Reverse((s.sequence_number(), s.timestamp_ms())));
    let current = metadata.current_snapshot_id();
    let keep_newest = retention.retain_last.unwrap_or(0).max(1);
    snapshots
        .iter()
        .enumerate()
        .filter(|(rank, s)| {
            *rank >= keep_newest
                && Some(s.snapshot_id()) != current
                && retention.older_than_ms.is_none_or(|t| s.timestamp_ms() < t)
        })
        .map(|(_, s)| s.snapshot_id())
        .collect()
}

/// The files of the `expired` snapshots of `before` that no snapshot of `after` references:
/// manifest lists, manifests, data and delete files. They can be removed once `after` is the
/// committed metadata. Data files outside the table's own `data/` folder are never among them:
/// those are files `skade_add_files` adopted where they lay, which stay the user's.
pub fn unreferenced_files(
    caches: &ManifestCache,
    before: &TableMetadata,
    after: &TableMetadata,
    expired: &[i64],
) -> Result<Vec<String>> {
    let mut kept_lists = HashSet::new();
    let mut kept_manifests = HashSet::new();
    let mut kept_files = HashSet::new();
    for s in after.snapshots() {
        kept_lists.insert(s.manifest_list().to_string());
        for m in caches.manifest_list(after, s)?.iter() {
            if kept_manifests.insert(m.manifest_path.clone()) {
                for e in caches.manifest(m)?.iter().filter(|e| e.is_live()) {
                    kept_files.insert(e.file().file_path().to_string());
                }
            }
        }
    }
    let mut out = vec![];
    let mut seen = HashSet::new();
    for id in expired {
        let Some(s) = before.snapshot_by_id(*id) else {
            continue;
        };
        if !kept_lists.contains(s.manifest_list()) {
            out.push(s.manifest_list().to_string());
        }
        for m in caches.manifest_list(before, s)?.iter() {
            if kept_manifests.contains(&m.manifest_path) || !seen.insert(m.manifest_path.clone()) {
                continue;
            }
            out.push(m.manifest_path.clone());
            for e in caches.manifest(m)?.iter() {
                let path = e.file().file_path();
                if !kept_files.contains(path) && owns_file(before.location(), path) && seen.insert(path.to_string()) {
                    out.push(path.to_string());
                }
            }
        }
    }
    Ok(out)
}

/// Every file the table's metadata `metadata` (stored at `current`) references, as local paths
/// or object URLs: itself and the metadata files of its log, and for every snapshot its manifest
/// list, manifests, and the data and delete files they name in any status (an entry of a removed
/// file may still be read by an older snapshot). What remove-orphan-files must keep.
pub fn referenced_files(caches: &ManifestCache, metadata: &TableMetadata, current: &str) -> Result<HashSet<String>> {
    let mut out: HashSet<String> = HashSet::new();
    out.insert(local_path(current).to_string());
    out.extend(metadata.metadata_log().iter().map(|e| local_path(&e.metadata_file).to_string()));
    let mut manifests = HashSet::new();
    for s in metadata.snapshots() {
        out.insert(local_path(s.manifest_list()).to_string());
        for m in caches.manifest_list(metadata, s)?.iter() {
            if manifests.insert(m.manifest_path.clone()) {
                out.insert(local_path(&m.manifest_path).to_string());
                out.extend(caches.manifest(m)?.iter().map(|e| local_path(e.file().file_path()).to_string()));
            }
        }
    }
    out.extend(metadata.statistics_iter().map(|s| local_path(&s.statistics_path).to_string()));
    out.extend(metadata.partition_statistics_iter().map(|s| local_path(&s.statistics_path).to_string()));
    Ok(out)
}

/// Whether the data or delete file at `path` is one the table at `location` wrote: skade writes
/// every such file into the table's `data/` folder (`write::writer`, `write::delete_writer`).
/// Anything elsewhere was adopted by `skade_add_files` and is never removed by maintenance.
pub fn owns_file(location: &str, path: &str) -> bool {
    let folder = format!("{}/data/", local_path(location).trim_end_matches('/'));
    // (a path that climbs out again, `data/../..`, is no file of the folder)
    local_path(path)
        .strip_prefix(&folder)
        .is_some_and(|rest| rest.split('/').all(|part| !matches!(part, "" | "." | "..")))
}

/// `after` (metadata with the expired snapshots removed) without the metadata-log entries written
/// before its oldest snapshot, and those entries' files. The log is chronological, so they are a
/// prefix of it; the newest entry (the metadata expiry replaces) holds the current snapshot and
/// always stays.
pub fn trim_metadata_log(after: TableMetadata) -> Result<(TableMetadata, Vec<String>)> {
    let Some(oldest) = after.snapshots().map(|s| s.timestamp_ms()).min() else {
        return Ok((after, vec![]));
    };
    let log = after.metadata_log();
    let stale: Vec<String> =
        log.iter().take_while(|e| e.timestamp_ms < oldest).map(|e| e.metadata_file.clone()).collect();
    if stale.is_empty() {
        return Ok((after, stale));
    }
    // The crate keeps the log private; its own trimming to the bound drops exactly the oldest
    // entries. Set the bound to what stays, build, then put the table's setting back.
    let keep = log.len() - stale.len();
    let setting = after.properties().get(PREVIOUS_VERSIONS_MAX).cloned();
    let trimmed = TableMetadataBuilder::new_from_metadata(after, None)
        .set_properties(HashMap::from([(PREVIOUS_VERSIONS_MAX.to_string(), keep.to_string())]))?
        .build()?
        .metadata;
    let restored = match setting {
        Some(v) => TableMetadataBuilder::new_from_metadata(trimmed, None)
            .set_properties(HashMap::from([(PREVIOUS_VERSIONS_MAX.to_string(), v)]))?,
        None => TableMetadataBuilder::new_from_metadata(trimmed, None)
            .remove_properties(&[PREVIOUS_VERSIONS_MAX.to_string()])?,
    };
    Ok((restored.build()?.metadata, stale))
}

/// The table's metadata files that neither are `current` nor appear in its log and were written
/// before its oldest snapshot: a file written after a kept snapshot was committed may describe
/// it, one written before cannot. The folder is the table's name, which other tables may have
/// used too (a table dropped and created again, another catalog given the same data path): a
/// file is this table's only if it says so.
pub fn unlisted_metadata_files(after: &TableMetadata, current: &str) -> Vec<String> {
    let Some(oldest) = after.snapshots().map(|s| s.timestamp_ms()).min() else {
        return vec![];
    };
    let dir = format!("{}/metadata", after.location());
    let Ok(entries) = crate::io::input::list(&dir) else {
        return vec![];
    };
    let listed: HashSet<&str> =
        after.metadata_log().iter().map(|e| local_path(&e.metadata_file)).chain([local_path(current)]).collect();
    let uuid = after.uuid().to_string();
    let written_before = |t: Option<std::time::SystemTime>| {
        let ms = t.and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map(|d| d.as_millis());
        ms.is_some_and(|ms| ms < oldest.max(0) as u128)
    };
    entries
        .into_iter()
        .filter(|e| {
            e.location.ends_with(".metadata.json")
                && !listed.contains(local_path(&e.location))
                && written_before(e.modified)
                && names_table(&e.location, &uuid)
        })
        .map(|e| e.location)
        .collect()
}

/// Whether the metadata file at `path` belongs to the table `uuid`: skade writes the table's uuid
/// second, right after the format version, so the file's first bytes tell (and reading them costs
/// nothing like parsing a file that repeats a whole history). Anything else is left alone.
fn names_table(path: &str, uuid: &str) -> bool {
    let needle = format!(r#""table-uuid":"{uuid}""#);
    crate::io::input::read_head(path, 128).is_ok_and(|head| head.windows(needle.len()).any(|w| w == needle.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::owns_file;

    #[test]
    fn a_table_owns_only_the_files_in_its_data_folder() {
        let table = "/w/lake.skade.data/main/t";
        assert!(owns_file(table, "/w/lake.skade.data/main/t/data/0198-a.parquet"));
        assert!(owns_file(
            "file:///w/lake.skade.data/main/t/",
            "file:///w/lake.skade.data/main/t/data/x-deletes.parquet"
        ));
        // adopted files: elsewhere, in a sibling table's folder, or beside the data folder
        assert!(!owns_file(table, "/w/exports/a.parquet"));
        assert!(!owns_file(table, "/w/lake.skade.data/main/t2/data/a.parquet"));
        assert!(!owns_file(table, "/w/lake.skade.data/main/t/data.parquet"));
        assert!(!owns_file(table, "/w/lake.skade.data/main/t/metadata/a.parquet"));
        // (a path that climbs out of the folder again)
        assert!(!owns_file(table, "/w/lake.skade.data/main/t/data/../../u/data/a.parquet"));
        assert!(!owns_file(table, "/w/lake.skade.data/main/t/data//a.parquet"));
    }
}
