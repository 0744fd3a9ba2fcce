//! Snapshot expiry: which snapshots a retention policy drops, and which files only they used.
//!
//! Every commit rewrites metadata.json with the whole snapshot history, so a table that takes
//! many small commits pays more for each one as history grows; expiring old snapshots (Iceberg's
//! `expire_snapshots`) keeps that bounded. The current snapshot is always kept.

use std::collections::HashSet;

use iceberg::spec::{Snapshot, TableMetadata};

use super::manifests::ManifestCache;
use crate::error::Result;

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
/// committed metadata.
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
                if !kept_files.contains(path) && seen.insert(path.to_string()) {
                    out.push(path.to_string());
                }
            }
        }
    }
    Ok(out)
}
