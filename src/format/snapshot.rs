//! Produces a table's next snapshot: a manifest for the new files (written once, reusable when a
//! commit rebases onto a newer head), a manifest list, and the new metadata.json.
//!
//! iceberg 0.10 cannot commit delete files or let a catalog batch commits, so skade assembles
//! snapshots from the crate's writers itself (docs/design/commit.md).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, FormatVersion, ManifestContentType, ManifestEntry, ManifestFile,
    ManifestListWriter, ManifestStatus, ManifestWriter, ManifestWriterBuilder, Operation, Snapshot, SnapshotReference,
    SnapshotRetention, SnapshotSummaryCollector, Summary, TableMetadata, TableMetadataBuilder, MAIN_BRANCH,
    UNASSIGNED_SEQUENCE_NUMBER,
};
use uuid::Uuid;

use super::manifests::{inherit_all, with_first_row_id, FileEntry, ManifestCache};
use super::metadata::{self, MetadataCache};
use super::name_mapping;
use crate::error::{Error, Result};

/// The snapshot summary property counting the deleted positions its deletion vectors carry from
/// deletes committed before (`added-position-deletes` counts them again): what a consumer's
/// estimate of rows behind subtracts.
pub const CARRIED_DELETES: &str = "skade.carried-position-deletes";

/// New files staged for one table in one transaction, with the snapshot id they will commit as.
pub struct StagedSnapshot {
    pub snapshot_id: i64,
    pub operation: Operation,
    pub manifests: Vec<ManifestFile>,
    /// The entries of each of `manifests`, as written (their ids are inherited from the list).
    pub entries: Vec<Arc<Vec<Arc<ManifestEntry>>>>,
    pub summary: HashMap<String, String>,
    /// For a snapshot with deletes: the metadata location they were computed on. It may be
    /// rebased over snapshots that only appended, never over ones that deleted.
    pub delete_base: Option<String>,
    /// With appended files: the key their rows were checked under (none: a table without one)
    /// against the table at `checked_on`. A rebase is safe only onto a head with the same key,
    /// and, with a key, over appends whose keys cannot overlap.
    pub key_check: Option<KeyCheck>,
    /// Paths of live data and delete files the snapshot removes (a rewrite). They must still be
    /// live in the head it lands on.
    pub removed: Vec<String>,
    /// Deletion vectors (v3) the snapshot replaces by merged ones: (Puffin file, data file).
    /// Like `removed`, they must still be live in the head it lands on.
    pub replaced_dvs: Vec<(String, String)>,
    /// The column names files without field ids (adopted ones) use, by field id: merged into the
    /// table's name mapping of the head the snapshot lands on (see `name_mapping::merged`).
    pub names: BTreeMap<String, i32>,
    /// Paths of files adopted by `skade_add_files` (checked not live when the transaction read
    /// the table): on a rebase they must not be live in the head either (a concurrent adoption of
    /// the same file would hold its rows twice).
    pub adopted: Vec<String>,
    /// Whether the table was Iceberg v3 when the files were written (their deletes deletion
    /// vectors, their rewrites carrying row lineage).
    pub written_for_v3: bool,
}

pub struct KeyCheck {
    pub field_ids: Vec<i32>,
    pub appends: Vec<DataFile>,
    pub checked_on: String,
}

/// A table's changes in one transaction.
pub struct TableDelta {
    pub data: Vec<DataFile>,
    pub deletes: Vec<DataFile>,
    /// Live files removed (see [`StagedSnapshot::removed`]).
    pub removed: Vec<String>,
    /// See [`StagedSnapshot::replaced_dvs`].
    pub replaced_dvs: Vec<(String, String)>,
    /// Deleted positions the new deletion vectors carry from deletes committed before.
    pub carried_deletes: u64,
    /// Iceberg's operation when the caller knows better than the files tell (a compaction is a
    /// `replace`: same rows).
    pub operation: Option<Operation>,
    pub delete_base: Option<String>,
    /// The partition spec of each file not written with the table's default one (a position
    /// delete file has the spec and partition of the data file it deletes from), by path.
    pub spec_ids: HashMap<String, i32>,
    /// See [`StagedSnapshot::names`].
    pub names: BTreeMap<String, i32>,
}

/// Writes the manifests of a transaction's changes to one table: one for new data files, one for
/// new delete files. The operation is Iceberg's: append, delete, or overwrite (both, or removals).
pub async fn stage_snapshot(
    file_io: &FileIO,
    table: &TableMetadata,
    snapshot_id: i64,
    delta: TableDelta,
    written: &mut Vec<String>,
) -> Result<StagedSnapshot> {
    let TableDelta { data, deletes, removed, replaced_dvs, carried_deletes, operation, delete_base, spec_ids, names } =
        delta;
    let operation = operation.unwrap_or(match (data.is_empty(), deletes.is_empty(), removed.is_empty()) {
        (false, true, true) => Operation::Append,
        (true, false, true) => Operation::Delete,
        _ => Operation::Overwrite,
    });
    let mut collector = SnapshotSummaryCollector::default();
    let dvs = deletes.iter().filter(|f| f.file_format() == DataFileFormat::Puffin).count();
    let schema = table.current_schema().clone();
    let default_spec = table.default_partition_spec_id();
    // one manifest per content and partition spec (a manifest's entries share its spec)
    let mut groups: BTreeMap<(bool, i32), Vec<DataFile>> = BTreeMap::new();
    for (files, is_delete) in [(data, false), (deletes, true)] {
        for f in files {
            let spec_id = spec_ids.get(f.file_path()).copied().unwrap_or(default_spec);
            let spec = spec_of(table, spec_id)?;
            check_partition(&spec, &f)?;
            collector.add_file(&f, schema.clone(), spec.clone());
            groups.entry((is_delete, spec_id)).or_default().push(f);
        }
    }
    let mut manifests = vec![];
    let mut entries = vec![];
    for ((is_delete, spec_id), files) in groups {
        let content = if is_delete { ManifestContentType::Deletes } else { ManifestContentType::Data };
        let mut writer = manifest_writer(file_io, table, snapshot_id, content, spec_id, written)?;
        let mut added = Vec::with_capacity(files.len());
        for f in files {
            // What `add_file` writes, kept so the commit need not parse the manifest back.
            added.push(Arc::new(
                ManifestEntry::builder()
                    .status(ManifestStatus::Added)
                    .snapshot_id(snapshot_id)
                    .data_file(f.clone())
                    .build(),
            ));
            // A negative sequence number leaves it unassigned: it is inherited from the manifest
            // list at commit, so the manifest stays valid whichever head the commit lands on.
            writer.add_file(f, -1)?;
        }
        manifests.push(writer.write_manifest_file().await?);
        entries.push(Arc::new(added));
    }
    let mut summary = collector.build();
    if dvs > 0 {
        // (Iceberg's summary counts deletion vectors apart from position delete files; the
        // crate's collector counts them as such)
        summary.insert("added-dvs".to_string(), dvs.to_string());
        if carried_deletes > 0 {
            summary.insert(CARRIED_DELETES.to_string(), carried_deletes.to_string());
        }
        let key = "added-position-delete-files";
        match summary.get(key).and_then(|v| v.parse::<usize>().ok()).unwrap_or(0).saturating_sub(dvs) {
            0 => summary.remove(key),
            n => summary.insert(key.to_string(), n.to_string()),
        };
    }
    Ok(StagedSnapshot {
        snapshot_id,
        operation,
        manifests,
        entries,
        summary,
        delete_base,
        key_check: None,
        removed,
        replaced_dvs,
        names,
        adopted: vec![],
        written_for_v3: table.format_version() >= FormatVersion::V3,
    })
}

/// A snapshot produced on top of a base whose manifest list and metadata.json are not written
/// yet ([`Unwritten::write`]). Until then both are pinned in the caches: a commit that builds on
/// this one while it is in flight (docs/design/many-writers.md) reads them from memory, and the
/// writes, most of a commit's work under its table's turn, happen after the turn is handed on.
/// Dropped unwritten, the pins go.
pub struct Unwritten<'a> {
    pub metadata: Arc<TableMetadata>,
    pub location: String,
    list_path: String,
    list: ListHeader,
    /// The list's manifests as its writer takes them (new ones without a sequence number).
    manifests: Vec<ManifestFile>,
    caches: &'a ManifestCache,
    metadata_files: &'a MetadataCache,
    written: bool,
}

struct ListHeader {
    snapshot_id: i64,
    parent_id: Option<i64>,
    sequence_number: i64,
    /// Iceberg v3: the snapshot's first row id (a v3 list).
    first_row_id: Option<u64>,
}

impl Unwritten<'_> {
    /// Writes the manifest list, then the metadata.json that names it (neither synced: the
    /// commit syncs them with its other files).
    pub async fn write(mut self, file_io: &FileIO) -> Result<()> {
        let output = file_io.new_output(&self.list_path)?.writer().await?;
        let h = &self.list;
        let mut list = match h.first_row_id {
            Some(first) => ManifestListWriter::v3(output, h.snapshot_id, h.parent_id, h.sequence_number, Some(first)),
            None => ManifestListWriter::v2(output, h.snapshot_id, h.parent_id, h.sequence_number),
        };
        list.add_manifests(std::mem::take(&mut self.manifests).into_iter())?;
        list.close().await?;
        self.metadata_files.write(&self.location, &self.metadata)?;
        self.written = true;
        Ok(())
    }
}

/// Writes each of `unwritten` in turn (see [`Unwritten::write`]); those after a failure are
/// dropped unwritten.
pub async fn write_all(unwritten: Vec<Unwritten<'_>>, file_io: &FileIO) -> Result<()> {
    for u in unwritten {
        u.write(file_io).await?;
    }
    Ok(())
}

impl Drop for Unwritten<'_> {
    fn drop(&mut self) {
        self.caches.unpin_list(&self.list_path, self.written);
        self.metadata_files.unpin(&self.location, self.written);
    }
}

/// Produces the next snapshot for `staged` on top of `base`: its metadata and location, with
/// the manifest list and metadata.json to write (manifests merged on the way are written now).
/// Every file it creates is added to `written` first.
pub async fn produce<'a>(
    file_io: &FileIO,
    caches: &'a ManifestCache,
    metadata_files: &'a MetadataCache,
    base: &TableMetadata,
    base_location: &str,
    staged: &StagedSnapshot,
    written: &mut Vec<String>,
) -> Result<Unwritten<'a>> {
    let parent = base.current_snapshot().cloned();
    let mut manifests: Vec<ManifestFile> = staged.manifests.clone();
    let mut summary = staged.summary.clone();
    if let Some(parent) = &parent {
        // Manifests holding only removed entries (of an earlier rewrite) are not carried on.
        let mut inherited: Vec<ManifestFile> = caches
            .manifest_list(base, parent)?
            .iter()
            .filter(|m| m.added_files_count.unwrap_or(1) + m.existing_files_count.unwrap_or(1) > 0)
            .cloned()
            .collect();
        if !staged.removed.is_empty() || !staged.replaced_dvs.is_empty() {
            let removing = Removing { files: &staged.removed, dvs: &staged.replaced_dvs };
            let (kept, removals) =
                remove_files(file_io, caches, base, staged.snapshot_id, inherited, removing, written).await?;
            inherited = kept;
            for file in &removals.1 {
                add_removed(&mut summary, file);
            }
            manifests.extend(removals.0);
        }
        // (a v3 table's merged entries carry their inherited first_row_id: `with_first_row_id`)
        manifests.extend(merge_small_manifests(file_io, caches, base, staged.snapshot_id, &inherited, written).await?);
    } else if let Some(path) = staged.removed.first().or(staged.replaced_dvs.first().map(|dv| &dv.0)) {
        return Err(Error::conflict(format!("{path} is no longer part of the table: a concurrent commit removed it")));
    }
    let sequence_number = base.next_sequence_number();
    let list_path = format!("{}/metadata/snap-{}-{}.avro", base.location(), staged.snapshot_id, Uuid::new_v4());
    written.push(list_path.clone());
    // Row lineage (v3): the data manifests without a first row id get the next ones, in list
    // order, as the list writer would assign them (assigned here so the list as cached below and
    // the snapshot's range agree with the file).
    let v3 = base.format_version() >= FormatVersion::V3;
    let position_deletes = staged.entries.iter().flat_map(|e| e.iter()).any(|e| {
        e.data_file.content_type() != DataContentType::Data && e.data_file.file_format() != DataFileFormat::Puffin
    });
    if v3 && !staged.written_for_v3 && (position_deletes || !staged.removed.is_empty()) {
        // (the table became v3 since this transaction read it: v3 takes no position delete
        // files, and a rewrite would give carried-over rows new ids)
        return Err(Error::conflict(format!(
            "transaction conflict on table at {}: it was upgraded to Iceberg v3 meanwhile, which takes deletion \
             vectors, not position delete files, and rewrites that keep row ids; nothing was committed (retry the \
             transaction)",
            base.location()
        )));
    }
    let first_row_id = base.next_row_id();
    let next_row_id = match v3 {
        true => assign_row_ids(&mut manifests, first_row_id)?,
        false => first_row_id,
    };
    let parent_id = parent.as_ref().map(|p| p.snapshot_id());
    let header = ListHeader {
        snapshot_id: staged.snapshot_id,
        parent_id,
        sequence_number,
        first_row_id: v3.then_some(first_row_id),
    };
    // The list as a reader will see it: new manifests get this snapshot's sequence number.
    let listed: Vec<ManifestFile> = manifests.iter().cloned().map(|m| listed(m, sequence_number)).collect();
    // The new manifests' entries, ids inherited from the list just written (see `parse_manifest`):
    // a later merge of small manifests finds them cached instead of parsing each one.
    for (m, entries) in staged.manifests.iter().zip(&staged.entries) {
        if let Some(m) = listed.iter().find(|l| l.manifest_path == m.manifest_path) {
            caches.remember(m, Arc::new(inherit_all(entries.iter().cloned(), m)));
        }
    }

    let mut properties = with_totals(&summary, parent.as_ref().map(|p| p.summary()));
    // the DuckDB types the snapshot was written with (time travel reads them back, whatever
    // ALTERs widen later: see `duckdb_types`)
    if let Some(kept) = base.properties().get(super::duckdb_types::PROPERTY) {
        properties.insert(super::duckdb_types::PROPERTY.to_string(), kept.clone());
    }
    let summary = Summary { operation: staged.operation.clone(), additional_properties: properties };
    let timestamp_ms = chrono::Utc::now().timestamp_millis().max(base.last_updated_ms());
    let snapshot = Snapshot::builder()
        .with_snapshot_id(staged.snapshot_id)
        .with_parent_snapshot_id(parent.as_ref().map(|p| p.snapshot_id()))
        .with_sequence_number(sequence_number)
        .with_timestamp_ms(timestamp_ms)
        .with_manifest_list(list_path.clone())
        .with_summary(summary)
        .with_schema_id(base.current_schema_id());
    let snapshot = match v3 {
        true => snapshot.with_row_range(first_row_id, next_row_id - first_row_id).build(),
        false => snapshot.build(),
    };
    let mut builder = TableMetadataBuilder::new_from_metadata(base.clone(), Some(base_location.to_string()));
    if !staged.names.is_empty() {
        // (merged into the head's mapping, not the one the files were checked on: a concurrent
        // adoption's names stay)
        let mapping = name_mapping::merged(
            base.properties().get(name_mapping::PROPERTY).map(String::as_str),
            base.current_schema(),
            &staged.names,
        )?;
        builder = builder.set_properties(HashMap::from([(name_mapping::PROPERTY.to_string(), mapping)]))?;
    }
    let metadata = builder
        .add_snapshot(snapshot)?
        .set_ref(MAIN_BRANCH, SnapshotReference::new(staged.snapshot_id, SnapshotRetention::branch(None, None, None)))?
        .build()?
        .metadata;
    let location = metadata::metadata_location(base.location(), metadata::next_version(base_location));
    written.push(location.clone());
    let metadata = Arc::new(metadata);
    // (pinned together, once nothing can fail: the returned value unpins them)
    caches.pin_list(&list_path, Arc::new(listed));
    metadata_files.pin(&location, metadata.clone());
    Ok(Unwritten { metadata, location, list_path, list: header, manifests, caches, metadata_files, written: false })
}

/// Assigns row ids (Iceberg v3 row lineage) to the data manifests of a new list that have none,
/// from `next`, in list order, each taking as many as it holds rows (added and existing), as the
/// spec and the list writer do; delete manifests have none. The next free row id.
fn assign_row_ids(manifests: &mut [ManifestFile], mut next: u64) -> Result<u64> {
    for manifest in manifests.iter_mut() {
        match manifest.content {
            ManifestContentType::Deletes => manifest.first_row_id = None,
            ManifestContentType::Data if manifest.first_row_id.is_none() => {
                let (Some(added), Some(existing)) = (manifest.added_rows_count, manifest.existing_rows_count) else {
                    return Err(Error::internal(format!(
                        "manifest {} has no row counts: it cannot take row ids",
                        manifest.manifest_path
                    )));
                };
                manifest.first_row_id = Some(next);
                next = next.checked_add(added).and_then(|n| n.checked_add(existing)).ok_or_else(|| {
                    Error::invalid(format!("row ids overflow at manifest {}", manifest.manifest_path))
                })?;
            }
            ManifestContentType::Data => {}
        }
    }
    Ok(next)
}

/// A manifest as its entry in a new list reads back: the list's writer assigns the snapshot's
/// sequence number to the manifests this snapshot added (`ManifestListWriter::add_manifests`).
fn listed(mut manifest: ManifestFile, sequence_number: i64) -> ManifestFile {
    if manifest.sequence_number == UNASSIGNED_SEQUENCE_NUMBER {
        manifest.sequence_number = sequence_number;
    }
    if manifest.min_sequence_number == UNASSIGNED_SEQUENCE_NUMBER {
        manifest.min_sequence_number = sequence_number;
    }
    manifest
}

/// A writer of a new manifest of `content` for snapshot `snapshot_id` of `table` (its path is
/// added to `written` first).
fn manifest_writer(
    file_io: &FileIO,
    table: &TableMetadata,
    snapshot_id: i64,
    content: ManifestContentType,
    spec_id: i32,
    written: &mut Vec<String>,
) -> Result<ManifestWriter> {
    let spec = spec_of(table, spec_id)?;
    let path = format!("{}/metadata/{}-m0.avro", table.location(), Uuid::new_v4());
    written.push(path.clone());
    let builder = ManifestWriterBuilder::new(
        file_io.new_output(&path)?,
        Some(snapshot_id),
        table.current_schema().clone(),
        spec.as_ref().clone(),
    );
    let v3 = table.format_version() >= FormatVersion::V3;
    Ok(match content {
        ManifestContentType::Data if v3 => builder.build_v3_data(),
        ManifestContentType::Deletes if v3 => builder.build_v3_deletes(),
        ManifestContentType::Data => builder.build_v2_data(),
        ManifestContentType::Deletes => builder.build_v2_deletes(),
    })
}

/// The table's partition spec `spec_id`.
fn spec_of(table: &TableMetadata, spec_id: i32) -> Result<iceberg::spec::PartitionSpecRef> {
    table
        .partition_spec_by_id(spec_id)
        .cloned()
        .ok_or_else(|| Error::corrupt(format!("table {} has no partition spec {spec_id}", table.location())))
}

/// A file's partition values must be a tuple of its spec's (the crate's manifest writer panics on
/// one of another length).
fn check_partition(spec: &iceberg::spec::PartitionSpec, f: &DataFile) -> Result<()> {
    let (have, want) = (f.partition().fields().len(), spec.fields().len());
    if have != want {
        return Err(Error::invalid(format!(
            "file {} has {have} partition values, its partition spec {} has {want} fields",
            f.file_path(),
            spec.spec_id()
        )));
    }
    Ok(())
}

/// Removed entries written by [`remove_files`]: the manifests holding them, and the files.
type Removals = (Vec<ManifestFile>, Vec<DataFile>);

/// What [`remove_files`] takes out: files by path, and deletion vectors by (Puffin file, data
/// file) (a Puffin file may hold the deletion vectors of several data files).
struct Removing<'a> {
    files: &'a [String],
    dvs: &'a [(String, String)],
}

/// Takes the files `removed` out of the `inherited` manifests: each manifest holding one is
/// rewritten with its other live entries (EXISTING, ids and sequence numbers kept); the removed
/// entries go to new manifests as DELETED. Every removed file must be live in `inherited`, else
/// a concurrent commit removed it first (a conflict).
async fn remove_files(
    file_io: &FileIO,
    caches: &ManifestCache,
    base: &TableMetadata,
    snapshot_id: i64,
    inherited: Vec<ManifestFile>,
    removing: Removing<'_>,
    written: &mut Vec<String>,
) -> Result<(Vec<ManifestFile>, Removals)> {
    let files: HashSet<&str> = removing.files.iter().map(String::as_str).collect();
    let dvs: HashSet<(&str, &str)> = removing.dvs.iter().map(|(p, d)| (p.as_str(), d.as_str())).collect();
    let wanted = |f: &DataFile| {
        files.contains(f.file_path())
            || (f.file_format() == DataFileFormat::Puffin
                && f.referenced_data_file().is_some_and(|d| dvs.contains(&(f.file_path(), d.as_str()))))
    };
    let mut kept = vec![];
    let mut gone: BTreeMap<(bool, i32), Vec<FileEntry>> = BTreeMap::new();
    let mut found = 0;
    for m in inherited {
        let entries = caches.manifest(&m)?;
        if !entries.iter().any(|e| e.is_live() && wanted(e.file())) {
            kept.push(m);
            continue;
        }
        let mut writer = manifest_writer(file_io, base, snapshot_id, m.content, m.partition_spec_id, written)?;
        let mut rest = 0;
        for e in entries.iter().filter(|e| e.is_live()) {
            if wanted(e.file()) {
                found += 1;
                gone.entry((m.content != ManifestContentType::Data, m.partition_spec_id)).or_default().push(e.clone());
            } else {
                rest += 1;
                writer.add_existing_file(
                    with_first_row_id(e)?,
                    e.snapshot_id,
                    e.sequence_number,
                    Some(e.file_sequence_number),
                )?;
            }
        }
        if rest > 0 {
            kept.push(writer.write_manifest_file().await?);
        } else {
            written.pop(); // nothing left to write
        }
    }
    if found < files.len() + dvs.len() {
        return Err(Error::conflict(
            "a file this commit removes is no longer part of the table: a concurrent commit removed it",
        ));
    }
    let mut manifests = vec![];
    let mut files = vec![];
    for ((deletes, spec_id), entries) in gone {
        let content = if deletes { ManifestContentType::Deletes } else { ManifestContentType::Data };
        let mut writer = manifest_writer(file_io, base, snapshot_id, content, spec_id, written)?;
        for e in entries {
            writer.add_delete_file(with_first_row_id(&e)?, e.sequence_number, Some(e.file_sequence_number))?;
            files.push(e.file().clone());
        }
        manifests.push(writer.write_manifest_file().await?);
    }
    Ok((kept, (manifests, files)))
}

/// Counts a removed file in a snapshot summary's `deleted-*`/`removed-*` properties.
fn add_removed(summary: &mut HashMap<String, String>, file: &DataFile) {
    let mut add = |key: &str, n: u64| {
        let v = summary.get(key).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) + n;
        summary.insert(key.to_string(), v.to_string());
    };
    match file.content_type() {
        DataContentType::Data => {
            add("deleted-data-files", 1);
            add("deleted-records", file.record_count());
        }
        DataContentType::PositionDeletes => {
            if file.file_format() == DataFileFormat::Puffin {
                add("removed-dvs", 1);
            }
            add("removed-delete-files", 1);
            add("removed-position-deletes", file.record_count());
        }
        DataContentType::EqualityDeletes => {
            add("removed-delete-files", 1);
            add("removed-equality-deletes", file.record_count());
        }
    }
    add("removed-files-size", file.file_size_in_bytes());
}

/// A snapshot carries at most this many small manifests of each content (data, deletes) and
/// tier from its parent; beyond it they are merged into one, so many small commits keep the
/// manifest count, and with it commit and scan planning time, bounded (Iceberg's merge-append).
pub const MAX_INHERITED_MANIFESTS: usize = 16;
/// Manifests at least this large are left as they are (Iceberg's default target size).
const SMALL_MANIFEST_BYTES: i64 = 8 << 20;

/// A small manifest's tier: the power of [`MAX_INHERITED_MANIFESTS`] (16) of its live file count
/// (tier 0: 1-15 files, tier 1: 16-255, ...). Only manifests of one tier merge, so a file's entry
/// is rewritten once per tier, a handful of times in a table's life. Merging every small manifest
/// into one instead rewrote the whole history of the table every 16 commits: in a table of 1,000
/// one-row commits, ~60 entries per commit and a third of a commit's CPU.
pub fn manifest_tier(manifest: &ManifestFile) -> u32 {
    let files = manifest.added_files_count.unwrap_or(0) + manifest.existing_files_count.unwrap_or(0);
    files.max(1).ilog(MAX_INHERITED_MANIFESTS as u32)
}

/// The parent's manifests for the next snapshot, with the small ones of a content and tier merged
/// into one once there are more than [`MAX_INHERITED_MANIFESTS`] (the merged one lands in a higher
/// tier). Merged entries keep their snapshot ids and sequence numbers (status EXISTING); entries of
/// removed files are dropped.
async fn merge_small_manifests(
    file_io: &FileIO,
    caches: &ManifestCache,
    base: &TableMetadata,
    snapshot_id: i64,
    inherited: &[ManifestFile],
    written: &mut Vec<String>,
) -> Result<Vec<ManifestFile>> {
    let mut out = vec![];
    // (manifests of one content, partition spec and tier merge)
    let mut groups: BTreeMap<(bool, i32, u32), Vec<&ManifestFile>> = BTreeMap::new();
    for m in inherited {
        if m.manifest_length < SMALL_MANIFEST_BYTES {
            let key = (m.content != ManifestContentType::Data, m.partition_spec_id, manifest_tier(m));
            groups.entry(key).or_default().push(m);
        } else {
            out.push(m.clone());
        }
    }
    for ((deletes, spec_id, _), small) in groups {
        if small.len() <= MAX_INHERITED_MANIFESTS {
            out.extend(small.into_iter().cloned());
            continue;
        }
        let content = if deletes { ManifestContentType::Deletes } else { ManifestContentType::Data };
        let mut writer = manifest_writer(file_io, base, snapshot_id, content, spec_id, written)?;
        let mut merged = vec![];
        for m in small {
            for e in caches.manifest(m)?.iter().filter(|e| e.is_live()) {
                let file = with_first_row_id(e)?;
                writer.add_existing_file(
                    file.clone(),
                    e.snapshot_id,
                    e.sequence_number,
                    Some(e.file_sequence_number),
                )?;
                merged.push(existing(e, file));
            }
        }
        let manifest = writer.write_manifest_file().await?;
        // The next merge reads this manifest again (it stays small): its entries as written, every
        // id explicit, are what parsing it would give (inherited again once the list gives the
        // manifest a first row id: `ManifestCache::manifest`).
        caches.remember(&manifest, Arc::new(inherit_all(merged, &manifest)));
        out.push(manifest);
    }
    Ok(out)
}

/// `e` as an EXISTING entry of a merged manifest holding `file` (`ManifestWriter::add_existing_file`).
fn existing(e: &FileEntry, file: DataFile) -> Arc<ManifestEntry> {
    let entry = ManifestEntry::builder()
        .status(ManifestStatus::Existing)
        .snapshot_id(e.snapshot_id)
        .sequence_number(e.sequence_number)
        .file_sequence_number(e.file_sequence_number)
        .data_file(file)
        .build();
    Arc::new(entry)
}

const TOTALS: [(&str, &str, &str); 6] = [
    ("total-data-files", "added-data-files", "deleted-data-files"),
    ("total-delete-files", "added-delete-files", "removed-delete-files"),
    ("total-records", "added-records", "deleted-records"),
    ("total-files-size", "added-files-size", "removed-files-size"),
    ("total-position-deletes", "added-position-deletes", "removed-position-deletes"),
    ("total-equality-deletes", "added-equality-deletes", "removed-equality-deletes"),
];

/// Iceberg's `total-*` summary properties: the parent's totals plus this snapshot's additions.
fn with_totals(added: &HashMap<String, String>, parent: Option<&Summary>) -> HashMap<String, String> {
    let num = |m: &HashMap<String, String>, k: &str| m.get(k).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
    let mut out = added.clone();
    for (total, plus, minus) in TOTALS {
        // A parent (written by another engine) without a total: the total is unknown.
        if parent.is_some_and(|p| !p.additional_properties.contains_key(total)) {
            continue;
        }
        let prev = parent.map(|p| num(&p.additional_properties, total)).unwrap_or(0);
        let value = (prev + num(added, plus) - num(added, minus)).max(0);
        out.insert(total.to_string(), value.to_string());
    }
    out
}
