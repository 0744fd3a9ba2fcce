//! Which files make up a snapshot: manifest lists and manifests, parsed once and cached. Both
//! are immutable files, so entries keyed by path are never stale; a commit simply produces new
//! paths. Cold manifests are read and parsed in parallel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, Manifest, ManifestEntry, ManifestFile, ManifestList, ManifestStatus,
    Snapshot, TableMetadata,
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
    /// Iceberg v3 row lineage: the row id of the file's first row (its own, or inherited from its
    /// manifest's); none for delete files and files written before the table became v3.
    pub first_row_id: Option<i64>,
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
    /// Lists produced and not written yet (see `snapshot::Unwritten`), never evicted.
    pinned_lists: Mutex<HashMap<String, Arc<Vec<ManifestFile>>>>,
    /// By path, with the manifest's `first_row_id` its entries inherited (v3): a manifest is
    /// given one in the first list that carries it after its table became v3, or after it was
    /// written (a merged one), so entries inherited before then are inherited again.
    manifests: Mutex<HashMap<String, (Option<u64>, Arc<Vec<FileEntry>>)>>,
    cached_entries: Mutex<usize>,
}

impl ManifestCache {
    pub fn manifest_list(&self, table: &TableMetadata, snapshot: &Snapshot) -> Result<Arc<Vec<ManifestFile>>> {
        let path = snapshot.manifest_list();
        if let Some(l) = self.pinned_lists.lock().unwrap().get(path) {
            return Ok(l.clone());
        }
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

    /// Keeps the entries of a list not written yet until [`Self::unpin_list`].
    pub fn pin_list(&self, path: &str, list: Arc<Vec<ManifestFile>>) {
        self.pinned_lists.lock().unwrap().insert(path.to_string(), list);
    }

    /// Ends a pin: cached as any other once `written`, forgotten otherwise.
    pub fn unpin_list(&self, path: &str, written: bool) {
        let list = self.pinned_lists.lock().unwrap().remove(path);
        if let (Some(list), true) = (list, written) {
            self.remember_list(path, list);
        }
    }

    /// Every entry of one manifest (live or deleted), with inherited ids.
    pub fn manifest(&self, manifest: &ManifestFile) -> Result<Arc<Vec<FileEntry>>> {
        let cached = self.manifests.lock().unwrap().get(&manifest.manifest_path).cloned();
        let entries = match cached {
            Some((first_row_id, entries)) if first_row_id == manifest.first_row_id => return Ok(entries),
            // (the entries as the file holds them, inherited from the list's entry as it is now)
            Some((_, entries)) => Arc::new(inherit_all(entries.iter().map(|e| e.entry.clone()), manifest)),
            None => Arc::new(parse_manifest(manifest)?),
        };
        self.remember(manifest, entries.clone());
        Ok(entries)
    }

    /// Caches the entries of `manifest` (as listed: they inherited its ids): parsed, or written by
    /// this process (each entry as the file holds it: a parse would give the same back).
    pub fn remember(&self, manifest: &ManifestFile, entries: Arc<Vec<FileEntry>>) {
        let path = manifest.manifest_path.as_str();
        let mut count = self.cached_entries.lock().unwrap();
        let mut manifests = self.manifests.lock().unwrap();
        if *count + entries.len() > MAX_CACHED_ENTRIES {
            manifests.clear();
            *count = 0;
        }
        *count += entries.len();
        if let Some((_, old)) = manifests.insert(path.to_string(), (manifest.first_row_id, entries)) {
            *count = count.saturating_sub(old.len());
        }
    }

    /// The live data and delete files of `snapshot`.
    pub fn snapshot_files(&self, table: &TableMetadata, snapshot: &Snapshot) -> Result<SnapshotFiles> {
        let list = self.manifest_list(table, snapshot)?;
        let missing: Vec<&ManifestFile> = {
            let cached = self.manifests.lock().unwrap();
            list.iter().filter(|m| !cached.contains_key(&m.manifest_path)).collect()
        };
        // Cold manifests: parse them all at once, in parallel (pure CPU after the read).
        let parsed: Vec<(&ManifestFile, Result<Vec<FileEntry>>)> =
            missing.par_iter().map(|m| (*m, parse_manifest(m))).collect();
        for (manifest, entries) in parsed {
            self.remember(manifest, Arc::new(entries?));
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
    Ok(inherit_all(entries, manifest))
}

/// Iceberg's inheritance: an entry's null ids come from its manifest's entry in the list; a data
/// file's null `first_row_id` (v3) is the manifest's plus the record counts of the live files
/// before it that had none (as Iceberg's Java reader counts: DELETED entries take no ids).
pub fn inherit_all(entries: impl IntoIterator<Item = Arc<ManifestEntry>>, manifest: &ManifestFile) -> Vec<FileEntry> {
    let mut next_row_id = manifest.first_row_id.and_then(|id| i64::try_from(id).ok());
    let mut out = vec![];
    for entry in entries {
        let snapshot_id = entry.snapshot_id.unwrap_or(manifest.added_snapshot_id);
        let sequence_number = entry.sequence_number.unwrap_or(manifest.sequence_number);
        let file_sequence_number = entry.file_sequence_number.unwrap_or(manifest.sequence_number);
        let file = &entry.data_file;
        let first_row_id = match (file.content_type(), file.first_row_id()) {
            (DataContentType::Data, Some(id)) => Some(id),
            (DataContentType::Data, None) if entry.status != ManifestStatus::Deleted => {
                let id = next_row_id;
                next_row_id = next_row_id.and_then(|n| n.checked_add(file.record_count() as i64));
                id
            }
            _ => None,
        };
        let spec_id = manifest.partition_spec_id;
        out.push(FileEntry { entry, snapshot_id, sequence_number, file_sequence_number, spec_id, first_row_id });
    }
    out
}

/// The file of `entry` as a rewritten manifest must hold it: with its inherited `first_row_id`
/// (v3) written in, as a new manifest's null ids would be assigned afresh and the rows get new
/// `_row_id`s (Iceberg's spec: "must be written into EXISTING and DELETED entries").
pub fn with_first_row_id(entry: &FileEntry) -> Result<DataFile> {
    let f = entry.file();
    if f.first_row_id().is_some() || entry.first_row_id.is_none() {
        return Ok(f.clone());
    }
    rebuilt(f, entry.spec_id, entry.first_row_id)
}

/// `f` with `first_row_id` (the crate's DataFile has no setters).
fn rebuilt(f: &DataFile, spec_id: i32, first_row_id: Option<i64>) -> Result<DataFile> {
    let mut b = DataFileBuilder::default();
    b.content(f.content_type())
        .file_path(f.file_path().to_string())
        .file_format(f.file_format())
        .partition(f.partition().clone())
        .partition_spec_id(spec_id)
        .record_count(f.record_count())
        .file_size_in_bytes(f.file_size_in_bytes())
        .column_sizes(f.column_sizes().clone())
        .value_counts(f.value_counts().clone())
        .null_value_counts(f.null_value_counts().clone())
        .nan_value_counts(f.nan_value_counts().clone())
        .lower_bounds(f.lower_bounds().clone())
        .upper_bounds(f.upper_bounds().clone())
        .key_metadata(f.key_metadata().map(<[u8]>::to_vec))
        .split_offsets(f.split_offsets().map(<[i64]>::to_vec))
        .equality_ids(f.equality_ids())
        .first_row_id(first_row_id)
        .referenced_data_file(f.referenced_data_file())
        .content_offset(f.content_offset())
        .content_size_in_bytes(f.content_size_in_bytes());
    if let Some(id) = f.sort_order_id() {
        b.sort_order_id(id);
    }
    b.build().map_err(|e| Error::internal(format!("cannot carry file {} over: {e}", f.file_path())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{DataFileFormat, ManifestContentType};

    #[test]
    fn a_pinned_list_is_served_without_its_file_until_unpinned() {
        use crate::format::metadata::tests::{created, with_snapshot};
        let table = with_snapshot(&created("/nowhere/t"), 7, "1"); // (its list, /t/metadata/snap-7.avro, does not exist)
        let snapshot = table.current_snapshot().unwrap();
        let cache = ManifestCache::default();
        let list = Arc::new(vec![manifest(None)]);
        cache.pin_list(snapshot.manifest_list(), list.clone());
        for i in 0..=MAX_CACHED_LISTS {
            cache.remember_list(&format!("/elsewhere/{i}"), Arc::new(vec![])); // (cleared on the way)
        }
        assert!(Arc::ptr_eq(&cache.manifest_list(&table, snapshot).unwrap(), &list), "a pin outlives eviction");
        cache.unpin_list(snapshot.manifest_list(), false);
        assert!(
            cache.manifest_list(&table, snapshot).is_err(),
            "unwritten and unpinned: the file is read, and missing"
        );
        cache.pin_list(snapshot.manifest_list(), list.clone());
        cache.unpin_list(snapshot.manifest_list(), true);
        assert!(Arc::ptr_eq(&cache.manifest_list(&table, snapshot).unwrap(), &list), "written: cached as any other");
    }

    fn entry(path: &str, rows: u64, first_row_id: Option<i64>, status: ManifestStatus) -> Arc<ManifestEntry> {
        let file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(path.to_string())
            .file_format(DataFileFormat::Parquet)
            .record_count(rows)
            .file_size_in_bytes(1)
            .first_row_id(first_row_id)
            .build()
            .unwrap();
        Arc::new(ManifestEntry::builder().status(status).snapshot_id(1).data_file(file).build())
    }

    fn manifest(first_row_id: Option<u64>) -> ManifestFile {
        ManifestFile {
            manifest_path: "m.avro".into(),
            manifest_length: 1,
            partition_spec_id: 0,
            content: ManifestContentType::Data,
            sequence_number: 3,
            min_sequence_number: 3,
            added_snapshot_id: 1,
            added_files_count: Some(3),
            existing_files_count: Some(0),
            deleted_files_count: Some(1),
            added_rows_count: Some(30),
            existing_rows_count: Some(0),
            deleted_rows_count: Some(5),
            partitions: None,
            key_metadata: None,
            first_row_id,
        }
    }

    /// A file's own id wins; the others take the manifest's plus the rows of the live files before
    /// them that had none (a DELETED entry takes no ids); a manifest without one gives none.
    #[test]
    fn data_files_inherit_first_row_ids_as_the_spec_says() {
        let entries = vec![
            entry("a", 10, None, ManifestStatus::Added),
            entry("gone", 5, None, ManifestStatus::Deleted),
            entry("b", 7, Some(500), ManifestStatus::Existing),
            entry("c", 3, None, ManifestStatus::Added),
        ];
        let ids = |m: &ManifestFile| inherit_all(entries.clone(), m).iter().map(|e| e.first_row_id).collect::<Vec<_>>();
        assert_eq!(ids(&manifest(Some(100))), vec![Some(100), None, Some(500), Some(110)]);
        assert_eq!(ids(&manifest(None)), vec![None, None, Some(500), None]);
        // (written into a rewritten manifest's entry, the inherited id stays the file's)
        let inherited = inherit_all(entries.clone(), &manifest(Some(100)));
        assert_eq!(with_first_row_id(&inherited[3]).unwrap().first_row_id(), Some(110));
        assert_eq!(with_first_row_id(&inherited[0]).unwrap().file_path(), "a");
    }

    /// Entries cached before their manifest got a first row id are inherited again once it has
    /// one (a review found a merge writing none after an upgrade).
    #[test]
    fn cached_entries_follow_the_manifests_first_row_id() {
        let cache = ManifestCache::default();
        let entries = vec![entry("a", 10, None, ManifestStatus::Added)];
        let before = manifest(None);
        cache.remember(&before, Arc::new(inherit_all(entries, &before)));
        assert_eq!(cache.manifest(&before).unwrap()[0].first_row_id, None);
        assert_eq!(cache.manifest(&manifest(Some(42))).unwrap()[0].first_row_id, Some(42));
    }
}
