//! Which files make up a snapshot: manifest lists and manifests, parsed once and cached. Both
//! are immutable files, so entries keyed by path are never stale; a commit simply produces new
//! paths. Cold manifests are read and parsed in parallel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use iceberg::spec::{
    DataContentType, DataFile, Manifest, ManifestEntry, ManifestFile, ManifestList, ManifestStatus, Snapshot,
    TableMetadata,
};
use rayon::prelude::*;

use crate::error::{Error, Result};

/// One file entry of a manifest with the ids it inherits from its manifest.
#[derive(Clone, Debug)]
pub struct FileEntry {
    pub entry: Arc<ManifestEntry>,
    pub snapshot_id: i64,
    /// The data sequence number (what deletes compare against).
    pub sequence_number: i64,
    /// The sequence number of the snapshot that added the file.
    pub file_sequence_number: i64,
    /// The partition spec the file was written with (its manifest's: a `DataFile` cannot say).
    pub spec_id: i32,
}

impl FileEntry {
    pub fn file(&self) -> &DataFile {
        &self.entry.data_file
    }
    pub fn is_live(&self) -> bool {
        self.entry.status != ManifestStatus::Deleted
    }
}

/// The live files of one snapshot.
#[derive(Default, Clone)]
pub struct SnapshotFiles {
    pub data: Vec<FileEntry>,
    pub deletes: Vec<FileEntry>,
}

const MAX_CACHED_ENTRIES: usize = 1 << 20;
const MAX_CACHED_LISTS: usize = 1024;

#[derive(Default)]
pub struct ManifestCache {
    lists: Mutex<HashMap<String, Arc<Vec<ManifestFile>>>>,
    manifests: Mutex<HashMap<String, Arc<Vec<FileEntry>>>>,
    cached_entries: Mutex<usize>,
}

impl ManifestCache {
    pub fn manifest_list(&self, table: &TableMetadata, snapshot: &Snapshot) -> Result<Arc<Vec<ManifestFile>>> {
        let path = snapshot.manifest_list();
        if let Some(l) = self.lists.lock().unwrap().get(path) {
            return Ok(l.clone());
        }
        let list = Arc::new(parse_manifest_list(path, table)?);
        self.remember_list(path, list.clone());
        Ok(list)
    }

    /// Caches the entries of a manifest list this process just wrote (the next commit starts
    /// from it): what parsing the file back would give, without the parse.
    pub fn remember_list(&self, path: &str, list: Arc<Vec<ManifestFile>>) {
        let mut lists = self.lists.lock().unwrap();
        if lists.len() >= MAX_CACHED_LISTS {
            lists.clear(); // a list per snapshot: old snapshots' lists are rarely read again
        }
        lists.insert(path.to_string(), list);
    }

    /// Every entry of one manifest (live or deleted), with inherited ids.
    pub fn manifest(&self, manifest: &ManifestFile) -> Result<Arc<Vec<FileEntry>>> {
        if let Some(m) = self.manifests.lock().unwrap().get(&manifest.manifest_path) {
            return Ok(m.clone());
        }
        let entries = Arc::new(parse_manifest(manifest)?);
        self.remember(&manifest.manifest_path, entries.clone());
        Ok(entries)
    }

    /// Caches the entries of a manifest: parsed, or written by this process with every id
    /// explicit (as a parse would give them back).
    pub fn remember(&self, path: &str, entries: Arc<Vec<FileEntry>>) {
        let mut count = self.cached_entries.lock().unwrap();
        let mut manifests = self.manifests.lock().unwrap();
        if *count + entries.len() > MAX_CACHED_ENTRIES {
            manifests.clear();
            *count = 0;
        }
        *count += entries.len();
        manifests.insert(path.to_string(), entries);
    }

    /// The live data and delete files of `snapshot`.
    pub fn snapshot_files(&self, table: &TableMetadata, snapshot: &Snapshot) -> Result<SnapshotFiles> {
        let list = self.manifest_list(table, snapshot)?;
        let missing: Vec<&ManifestFile> = {
            let cached = self.manifests.lock().unwrap();
            list.iter().filter(|m| !cached.contains_key(&m.manifest_path)).collect()
        };
        // Cold manifests: parse them all at once, in parallel (pure CPU after the read).
        let parsed: Vec<(String, Result<Vec<FileEntry>>)> =
            missing.par_iter().map(|m| (m.manifest_path.clone(), parse_manifest(m))).collect();
        for (path, entries) in parsed {
            self.remember(&path, Arc::new(entries?));
        }
        let mut files = SnapshotFiles::default();
        for m in list.iter() {
            for e in self.manifest(m)?.iter().filter(|e| e.is_live()) {
                match e.file().content_type() {
                    DataContentType::Data => files.data.push(e.clone()),
                    _ => files.deletes.push(e.clone()),
                }
            }
        }
        Ok(files)
    }
}

fn read(path: &str) -> Result<Vec<u8>> {
    crate::io::input::read_whole(path, "manifest file")
}

/// The entries of the manifest list at `path`, read from its file.
pub fn parse_manifest_list(path: &str, table: &TableMetadata) -> Result<Vec<ManifestFile>> {
    let bytes = read(path)?;
    let list = ManifestList::parse_with_version(&bytes, table.format_version())
        .map_err(|e| Error::corrupt(format!("manifest list {path} is unreadable: {e}")))?;
    Ok(list.consume_entries().into_iter().collect())
}

pub fn parse_manifest(manifest: &ManifestFile) -> Result<Vec<FileEntry>> {
    let path = &manifest.manifest_path;
    let bytes = read(path)?;
    let parsed =
        Manifest::parse_avro(&bytes).map_err(|e| Error::corrupt(format!("manifest {path} is unreadable: {e}")))?;
    let (entries, _) = parsed.into_parts();
    Ok(entries.into_iter().map(|entry| inherit(entry, manifest)).collect())
}

/// Iceberg's inheritance: an entry's null ids come from its manifest's entry in the list.
pub fn inherit(entry: Arc<ManifestEntry>, manifest: &ManifestFile) -> FileEntry {
    let snapshot_id = entry.snapshot_id.unwrap_or(manifest.added_snapshot_id);
    let sequence_number = entry.sequence_number.unwrap_or(manifest.sequence_number);
    let file_sequence_number = entry.file_sequence_number.unwrap_or(manifest.sequence_number);
    FileEntry { entry, snapshot_id, sequence_number, file_sequence_number, spec_id: manifest.partition_spec_id }
}
