//! The lookup's caches, all keyed by immutable names so none can go stale: a snapshot's files
//! with their key bounds (by manifest-list path: a commit makes a new list, so the next lookup
//! simply misses), each data file's footer, bounds and bloom filters (by path), each data file's
//! open descriptor (by path) and its column chunks' decoded dictionaries (`dictionaries`). Each
//! is bounded; when full it starts over.

use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};

use iceberg::spec::{DataFile, PartitionSpecRef, Schema, Snapshot, Struct, TableMetadata};

use super::data_file::{Bounds, DataFileIndex};
use super::dictionaries::Dictionaries;
use super::stats;
use crate::error::Result;
use crate::format::name_mapping::FileNames;
use crate::io::input::InputFile;
use crate::read::caches::ReadCaches;
use crate::read::deletes::{with_sequence, DeleteIndex};
use crate::read::key_bounds::ColumnEncoders;
use crate::read::keys::KeyColumns;

const MAX_SNAPSHOTS: usize = 256;
/// Bound on the data files all cached snapshot indexes list together (a large table's index is
/// rebuilt after each commit; old ones must not pile up).
const MAX_SNAPSHOT_FILES: usize = 1 << 20;
const MAX_FILES: usize = 65_536;
/// Bound on the per-file indexes (footers with page indexes, bloom filters, bounds), in bytes.
const MAX_FILE_INDEX_BYTES: usize = 256 << 20;
/// Open descriptors kept (well under the usual limit of 1,024 per process).
const MAX_HANDLES: usize = 256;

/// A data file a lookup may read.
pub struct CandidateFile {
    pub path: String,
    /// Data sequence number (deletes compare against it).
    pub seq: i64,
    /// Per key column.
    pub bounds: Vec<Bounds>,
    /// Its partition spec and values, when the spec partitions by a key column (a lookup then
    /// skips files whose partition cannot hold the key).
    pub partition: Option<(PartitionSpecRef, Struct)>,
}

impl CandidateFile {
    pub fn new(file: &DataFile, seq: i64, key: &KeyColumns, encoders: &ColumnEncoders) -> Self {
        let bounds = key
            .field_ids
            .iter()
            .enumerate()
            .map(|(c, id)| {
                (encoders.bound(c, file.lower_bounds().get(id)), encoders.bound(c, file.upper_bounds().get(id)))
            })
            .collect();
        CandidateFile { path: file.file_path().to_string(), seq, bounds, partition: None }
    }

    /// With its partition, when spec `spec` partitions by one of `key`'s columns.
    fn with_partition(mut self, file: &DataFile, spec: Option<&PartitionSpecRef>, key: &KeyColumns) -> Self {
        if let Some(spec) = spec.filter(|s| s.fields().iter().any(|f| key.field_ids.contains(&f.source_id))) {
            self.partition = Some((spec.clone(), file.partition().clone()));
        }
        self
    }
}

/// Whether encoded key column values `columns` lie within `bounds`.
pub fn within(bounds: &[Bounds], columns: &[&[u8]]) -> bool {
    bounds
        .iter()
        .zip(columns)
        .all(|((lo, hi), v)| lo.as_deref().is_none_or(|lo| lo <= *v) && hi.as_deref().is_none_or(|hi| *v <= hi))
}

/// A snapshot's data files, newest first, and its deletes.
pub struct SnapshotIndex {
    pub files: Vec<CandidateFile>,
    pub deletes: DeleteIndex,
}

#[derive(Default)]
pub struct LookupCache {
    /// By manifest-list path, with the number of files listed in all of them.
    snapshots: Mutex<(HashMap<String, Arc<SnapshotIndex>>, usize)>,
    files: Mutex<(HashMap<String, Arc<DataFileIndex>>, usize)>,
    handles: Mutex<HashMap<String, Arc<InputFile>>>,
    pub dictionaries: Dictionaries,
}

impl LookupCache {
    pub fn snapshot(
        &self,
        caches: &ReadCaches,
        metadata: &TableMetadata,
        snapshot: &Snapshot,
        schema: &Schema,
        key: &KeyColumns,
        encoders: &ColumnEncoders,
    ) -> Result<Arc<SnapshotIndex>> {
        let name = snapshot.manifest_list();
        if let Some(s) = self.snapshots.lock().unwrap().0.get(name) {
            return Ok(s.clone());
        }
        let files = caches.manifests.snapshot_files(metadata, snapshot)?;
        let deletes = DeleteIndex::load(&caches.deletes, schema, &with_sequence(&files.deletes))?;
        let mut data: Vec<CandidateFile> = files
            .data
            .iter()
            .map(|e| {
                CandidateFile::new(e.file(), e.sequence_number, key, encoders).with_partition(
                    e.file(),
                    metadata.partition_spec_by_id(e.spec_id),
                    key,
                )
            })
            .collect();
        data.sort_by_key(|f| std::cmp::Reverse(f.seq)); // an upsert's newest row is found first
        let index = Arc::new(SnapshotIndex { files: data, deletes });
        let mut snapshots = self.snapshots.lock().unwrap();
        let files = index.files.len();
        if snapshots.0.len() >= MAX_SNAPSHOTS || snapshots.1 + files > MAX_SNAPSHOT_FILES {
            *snapshots = Default::default();
        }
        snapshots.1 += files;
        // Two lookups may have built the same index at once: count the one replaced out.
        if let Some(old) = snapshots.0.insert(name.to_string(), index.clone()) {
            snapshots.1 = snapshots.1.saturating_sub(old.files.len());
        }
        Ok(index)
    }

    /// Forgets files about to be removed (a rollback, an expiry): their descriptors would
    /// otherwise keep the deleted files' space allocated.
    pub fn forget<'a>(&self, paths: impl IntoIterator<Item = &'a str>) {
        let mut handles = self.handles.lock().unwrap();
        let mut files = self.files.lock().unwrap();
        for path in paths {
            handles.remove(path);
            self.dictionaries.forget(path);
            if let Some(index) = files.0.remove(path) {
                files.1 = files.1.saturating_sub(index.memory_size());
            }
        }
    }

    /// The open descriptor of a data file.
    pub fn handle(&self, path: &str) -> Result<Arc<InputFile>> {
        if let Some(f) = self.handles.lock().unwrap().get(path) {
            return Ok(f.clone());
        }
        let file = Arc::new(InputFile::open(path, "data file")?);
        stats::FILE_OPENS.fetch_add(1, Relaxed);
        let mut handles = self.handles.lock().unwrap();
        if handles.len() >= MAX_HANDLES {
            handles.clear();
        }
        handles.insert(path.to_string(), file.clone());
        Ok(file)
    }

    /// The index of a candidate file; `names`: the table's name mapping, for a file without
    /// field ids (an adopted one).
    pub fn data_file(
        &self,
        candidate: &CandidateFile,
        schema: &Schema,
        key: &KeyColumns,
        encoders: &ColumnEncoders,
        names: Option<&FileNames>,
    ) -> Result<Arc<DataFileIndex>> {
        if let Some(f) = self.files.lock().unwrap().0.get(&candidate.path) {
            // (a file adopted by two tables, or by a rolled-back transaction, may have its
            // columns mapped to other ids: its index is then made again)
            if f.key_types == key.types && f.names_fit(names) {
                return Ok(f.clone());
            }
        }
        let file = self.handle(&candidate.path)?;
        // The file's real length (a manifest's recorded size could be wrong).
        let len = file.size()?;
        let index = Arc::new(DataFileIndex::load(&file, &candidate.path, len, schema, key, encoders, names)?);
        let mut files = self.files.lock().unwrap();
        let bytes = index.memory_size();
        if files.0.len() >= MAX_FILES || files.1 + bytes > MAX_FILE_INDEX_BYTES {
            *files = Default::default();
        }
        files.1 += bytes;
        // A file indexed anew (another key type, or two lookups at once): count the old one out.
        if let Some(old) = files.0.insert(candidate.path.clone(), index.clone()) {
            files.1 = files.1.saturating_sub(old.memory_size());
        }
        Ok(index)
    }
}
