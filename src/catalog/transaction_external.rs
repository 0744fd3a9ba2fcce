//! Commits other engines make through the Iceberg REST protocol (issue 45,
//! docs/design/rest-catalog.md): the client's requirements are checked against the table as this
//! transaction reads it, its updates applied onto that metadata, the result written as the
//! table's next metadata file and staged as a pointer change checked at commit against the
//! pointer read: skade's compare-and-swap, so a REST commit and a DuckDB commit never both win on
//! one base. The commit gets a `commit_seq` of its own, naming the client as its actor, and its
//! snapshots reach the changelog and consumers as DuckDB's do.

use std::sync::Arc;

use iceberg::spec::{Operation, TableMetadata};
use iceberg::{TableRequirement, TableUpdate};

use super::state::TableRecord;
use super::transaction::Transaction;
use crate::error::{Error, Result};
use crate::format::metadata;
use crate::read::keys::KeyColumns;

/// What an update request came to: the table's new metadata and where it was written.
pub struct Updated {
    pub metadata_location: String,
    pub metadata: Arc<TableMetadata>,
}

fn iceberg_error(table: &str, e: iceberg::Error) -> Error {
    match e.kind() {
        iceberg::ErrorKind::CatalogCommitConflicts => {
            Error::conflict(format!("commit to table {table} failed its requirement: {}", e.message()))
        }
        _ => Error::invalid(format!("cannot apply the update to table {table}: {}", e.message())),
    }
}

/// The updates served: snapshots and the main branch, properties, schema, partition spec and
/// sort order changes. Other branches and tags, and snapshot removal wait for later increments.
fn check_served(update: &TableUpdate, base: &TableMetadata, table: &str) -> Result<()> {
    let refused = |what: &str| {
        Err(Error::not_implemented(format!(
            "table {table}: {what} over the REST protocol is not served yet (snapshots on the main branch, \
             properties, schema, partition spec and sort order changes are)"
        )))
    };
    match update {
        TableUpdate::AddSnapshot { .. } => Ok(()),
        // (skade's own properties, which its reads depend on, are skade's to set)
        TableUpdate::SetProperties { updates } if updates.keys().any(|k| k.starts_with(SKADE_PROPERTIES)) => {
            refused("setting skade's own properties (skade.*)")
        }
        TableUpdate::RemoveProperties { removals } if removals.iter().any(|k| k.starts_with(SKADE_PROPERTIES)) => {
            refused("removing skade's own properties (skade.*)")
        }
        TableUpdate::SetProperties { .. } | TableUpdate::RemoveProperties { .. } => Ok(()),
        TableUpdate::SetSnapshotRef { ref_name, reference }
            if ref_name == iceberg::spec::MAIN_BRANCH && reference.is_branch() =>
        {
            Ok(())
        }
        TableUpdate::SetSnapshotRef { ref_name, .. } => refused(&format!("a ref other than main ({ref_name})")),
        TableUpdate::AssignUuid { uuid } if *uuid == base.uuid() => Ok(()),
        TableUpdate::AssignUuid { .. } => refused("a new table uuid"),
        // (checked once applied: `check_shape`)
        TableUpdate::AddSchema { .. }
        | TableUpdate::SetCurrentSchema { .. }
        | TableUpdate::AddSpec { .. }
        | TableUpdate::SetDefaultSpec { .. }
        | TableUpdate::AddSortOrder { .. }
        | TableUpdate::SetDefaultSortOrder { .. } => Ok(()),
        _ => refused("this update"),
    }
}

/// The prefix of skade's own table properties.
pub(super) const SKADE_PROPERTIES: &str = "skade.";

/// Snapshot ids skade allocates count up from 1 (`Catalog::allocate_snapshot_id`); a client's
/// must lie above them (clients draw 63 random bits), or skade's next id could collide with it.
pub(super) const CLIENT_SNAPSHOT_IDS: i64 = 1 << 32;

/// How far ahead of this host's clock a client's snapshot may be stamped (clocks differ a
/// little; a snapshot from the future would block every later commit's timestamp check).
const CLOCK_SKEW_MS: i64 = 60_000;

/// The operation a commit's record names: `append` when each of its snapshots appends, else
/// `overwrite` when one adds rows, `delete`; `update` for properties alone.
fn operation_of(next: &TableMetadata, added: &[i64]) -> &'static str {
    let ops: Vec<Operation> =
        added.iter().filter_map(|id| next.snapshot_by_id(*id)).map(|s| s.summary().operation.clone()).collect();
    if ops.is_empty() {
        "update"
    } else if ops.iter().all(|o| *o == Operation::Append) {
        "append"
    } else if ops.iter().any(|o| matches!(o, Operation::Append | Operation::Overwrite)) {
        "overwrite"
    } else {
        "delete"
    }
}

impl Transaction {
    /// Applies another engine's commit of `schema.name` (`requirements` checked, `updates`
    /// applied) in this transaction: staged, it lands when the transaction commits, unless the
    /// table moved meanwhile (a conflict, retryable by the client).
    pub fn update_table(
        &self,
        schema: &str,
        name: &str,
        requirements: &[TableRequirement],
        updates: Vec<TableUpdate>,
    ) -> Result<Updated> {
        self.check_writable()?;
        let table = self.table(schema, name)?.ok_or_else(|| {
            Error::catalog(format!(
                "table {}.{} does not exist",
                super::names::shown(schema),
                super::names::shown(name)
            ))
        })?;
        self.check_table_writable(&table)?;
        let shown = table.shown_name();
        if self.lock()?.wrote_to(&table.record.uuid) {
            return Err(Error::invalid(format!("table {shown} has other changes in this transaction")));
        }
        let base = &table.metadata;
        for requirement in requirements {
            requirement.check(Some(base)).map_err(|e| iceberg_error(&shown, e))?;
        }
        for update in &updates {
            check_served(update, base, &shown)?;
        }
        // (a v3 snapshot without its row range would fail inside the builder with the crate's
        // words: said here in the protocol's)
        if base.format_version() >= iceberg::spec::FormatVersion::V3 {
            for update in &updates {
                if let TableUpdate::AddSnapshot { snapshot } = update {
                    if snapshot.row_range().is_none() {
                        return Err(Error::invalid(format!(
                            "table {shown} is an Iceberg v3 table: snapshot {} must carry first-row-id and added-rows",
                            snapshot.snapshot_id()
                        )));
                    }
                }
            }
        }
        let location = table.record.metadata_location.clone();
        let mut builder = TableMetadata::clone(base).into_builder(Some(location.clone()));
        for update in updates {
            builder = update.apply(builder).map_err(|e| iceberg_error(&shown, e))?;
        }
        let next = builder.build().map_err(|e| iceberg_error(&shown, e))?.metadata;
        let added: Vec<i64> = next
            .snapshots()
            .filter(|s| base.snapshot_by_id(s.snapshot_id()).is_none())
            .map(|s| s.snapshot_id())
            .collect();
        check_shape(&shown, base, &next)?;
        self.check_added_snapshots(&shown, base, &next, &added)?;
        let md_location = metadata::metadata_location(next.location(), metadata::next_version(&location));
        let next = self.write_metadata(&md_location, next)?;
        let record = table.record.clone();
        let after = TableRecord { metadata_location: md_location.clone(), ..(*record).clone() };
        if !added.is_empty() {
            if let Some(key) = KeyColumns::of(next.current_schema())? {
                self.check_client_keys(&shown, &next, &key)?;
            }
            self.check_client_values(&shown, &next, &added)?;
        }
        let snapshot_id = match added.is_empty() {
            true => None,
            false => next.current_snapshot().map(|s| s.snapshot_id()),
        };
        self.stage_alter(record, after, operation_of(&next, &added), snapshot_id, None)?;
        Ok(Updated { metadata_location: md_location, metadata: next })
    }

    /// New snapshots must extend the table's history in a line (each the child of the one
    /// before, the first of the current one) and end it (main moves to the newest), on the
    /// table's current schema, stamped no later than now, with every file (manifest lists,
    /// manifests, data and delete files) under the table's location, and be what their summary
    /// says (an append removes nothing; a replace, which would change no row, is not taken from
    /// a client).
    fn check_added_snapshots(
        &self,
        shown: &str,
        base: &TableMetadata,
        next: &TableMetadata,
        added: &[i64],
    ) -> Result<()> {
        let refused = |why: String| Err(Error::invalid(format!("table {shown}: {why}")));
        let head = next.current_snapshot().map(|s| s.snapshot_id());
        if added.is_empty() {
            return match head == base.current_snapshot().map(|s| s.snapshot_id()) {
                true => Ok(()),
                false => Err(Error::not_implemented(format!(
                    "table {shown}: moving main to another snapshot (a rollback) over the REST protocol is not served                      yet"
                ))),
            };
        }
        let mut chain: Vec<&iceberg::spec::SnapshotRef> =
            added.iter().filter_map(|id| next.snapshot_by_id(*id)).collect();
        chain.sort_by_key(|s| s.sequence_number());
        let mut parent = base.current_snapshot().map(|s| s.snapshot_id());
        for snapshot in &chain {
            if snapshot.parent_snapshot_id() != parent {
                return refused(format!(
                    "snapshot {} does not follow the table's history: its parent is {:?}, not {:?}",
                    snapshot.snapshot_id(),
                    snapshot.parent_snapshot_id(),
                    parent
                ));
            }
            parent = Some(snapshot.snapshot_id());
        }
        if head != parent {
            return refused(format!("main must move to the newest snapshot added ({parent:?}), not {head:?}"));
        }
        let now_ms = chrono::Utc::now().timestamp_millis();
        let caches = &self.catalog().inner.read_caches;
        let unreadable =
            |what: &str, e: Error| Error::invalid(format!("table {shown}: cannot read {what}: {}", e.message));
        for snapshot in chain {
            let id = snapshot.snapshot_id();
            if id < CLIENT_SNAPSHOT_IDS {
                return refused(format!(
                    "snapshot id {id} is one skade allocates for its own snapshots: a client's is at least \
                     {CLIENT_SNAPSHOT_IDS} (a random 63-bit id)"
                ));
            }
            if snapshot.schema_id().is_some_and(|s| s != next.current_schema_id()) {
                return refused(format!(
                    "snapshot {id} is written in schema {}, not the table's current schema {}",
                    snapshot.schema_id().unwrap_or_default(),
                    next.current_schema_id()
                ));
            }
            // (skade's own summary properties, the DuckDB types time travel reads with, are skade's)
            if let Some(k) = snapshot.summary().additional_properties.keys().find(|k| k.starts_with(SKADE_PROPERTIES)) {
                return refused(format!("snapshot {id}: summary property {k} is skade's own"));
            }
            if snapshot.timestamp_ms() > now_ms + CLOCK_SKEW_MS {
                return refused(format!(
                    "snapshot {id} is stamped {} ms in the future",
                    snapshot.timestamp_ms() - now_ms
                ));
            }
            let files = self.check_snapshot_files(shown, next, snapshot, false)?;
            self.check_row_range(shown, next, snapshot)?;
            match snapshot.summary().operation {
                Operation::Replace => {
                    return Err(Error::not_implemented(format!(
                        "table {shown}: a replace snapshot (a rewrite that changes no row) from another engine is not                          served yet"
                    )))
                }
                Operation::Append => {
                    let parent_files = match snapshot.parent_snapshot_id().and_then(|p| next.snapshot_by_id(p)) {
                        Some(p) => caches.manifests.snapshot_files(next, p).map_err(|e| unreadable("its parent", e))?,
                        None => Default::default(),
                    };
                    let kept: std::collections::HashSet<&str> =
                        files.data.iter().map(|e| e.file().file_path()).collect();
                    let removed = parent_files.data.iter().any(|e| !kept.contains(e.file().file_path()));
                    // (a delete file by its place: a Puffin file holds several deletion vectors)
                    let place = |e: &crate::format::manifests::FileEntry| {
                        (e.file().file_path().to_string(), e.file().content_offset())
                    };
                    let had: std::collections::HashSet<_> = parent_files.deletes.iter().map(place).collect();
                    if removed || files.deletes.iter().any(|e| !had.contains(&place(e))) {
                        return refused(format!("snapshot {id} says it appends, yet it removes rows"));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A client's schema, partition spec and sort order changes, checked against the table before
/// them as skade's own ALTER TABLE checks them (`format::client_schema`).
fn check_shape(shown: &str, base: &TableMetadata, next: &TableMetadata) -> Result<()> {
    let same = next.current_schema_id() == base.current_schema_id()
        && next.schemas_iter().len() == base.schemas_iter().len()
        && next.default_partition_spec_id() == base.default_partition_spec_id()
        && next.partition_specs_iter().len() == base.partition_specs_iter().len()
        && next.default_sort_order_id() == base.default_sort_order_id()
        && next.sort_orders_iter().len() == base.sort_orders_iter().len();
    if same {
        return Ok(());
    }
    // The columns skade checks on its own writes keep their types: a key's (its rows are
    // compared as they are), and those whose DuckDB types are narrower than Iceberg's (the kept
    // type says how to read them); ALTER TABLE changes those.
    let (old, new) = (base.current_schema(), next.current_schema());
    let kept = crate::format::duckdb_types::DuckdbTypes::of(base.properties())?;
    for id in old.identifier_field_ids().chain(kept.0.keys().copied()) {
        if let (Some(was), Some(is)) = (old.field_by_id(id), new.field_by_id(id)) {
            if was.field_type != is.field_type {
                return Err(Error::not_implemented(format!(
                    "table {shown}: column {} is a PRIMARY KEY column or keeps a DuckDB type narrower than Iceberg's: \
                     its type changes through DuckDB's ALTER TABLE only",
                    was.name
                )));
            }
        }
    }
    crate::format::client_schema::check_change(shown, base, next)?;
    crate::format::defaults::check_initial_defaults_kept(shown, base, next)?;
    crate::format::client_schema::check_table(shown, next)?;
    crate::format::schema::arrow_schema(next.current_schema())
        .map_err(|e| Error::invalid(format!("table {shown}: its new columns cannot be read: {}", e.message)))?;
    Ok(())
}

impl Transaction {
    /// Every file `snapshot` names (its manifest list, its manifests, and the data and delete
    /// files of their entries in any status: expiry removes an expired manifest's entries
    /// whatever their status) must lie under the table's location, with no `.` or `..` segment.
    /// On disk, the table's folder and its `data` and `metadata` folders must be what they seem
    /// (no symbolic link), and the files the snapshot adds (with `every`, all it names) must
    /// resolve under the folder. Object keys have no links: a HEAD per file would cost a request
    /// each.
    pub(super) fn check_snapshot_files(
        &self,
        shown: &str,
        md: &TableMetadata,
        snapshot: &iceberg::spec::Snapshot,
        every: bool,
    ) -> Result<crate::format::manifests::SnapshotFiles> {
        let refused = |why: String| Err(Error::invalid(format!("table {shown}: {why}")));
        let unreadable =
            |what: &str, e: Error| Error::invalid(format!("table {shown}: cannot read {what}: {}", e.message));
        let id = snapshot.snapshot_id();
        let root = format!("{}/", md.location().trim_end_matches('/'));
        let outside = |path: &str| {
            let rest = path.strip_prefix(&root);
            rest.is_none_or(|rest| rest.split('/').any(|part| matches!(part, "" | "." | "..")))
        };
        if outside(snapshot.manifest_list()) {
            return refused(format!(
                "snapshot {id}: its manifest list {} is not under the table's location {root}",
                snapshot.manifest_list()
            ));
        }
        let caches = &self.catalog().inner.read_caches;
        let manifests = caches.manifests.manifest_list(md, snapshot).map_err(|e| unreadable("a manifest list", e))?;
        let mut named: Vec<String> = vec![snapshot.manifest_list().to_string()];
        for manifest in manifests.iter() {
            if outside(&manifest.manifest_path) {
                return refused(format!(
                    "snapshot {id}: manifest {} is not under the table's location {root}",
                    manifest.manifest_path
                ));
            }
            let added_here = every || manifest.added_snapshot_id == id;
            if added_here {
                named.push(manifest.manifest_path.clone());
            }
            for entry in caches.manifests.manifest(manifest).map_err(|e| unreadable("its manifests", e))?.iter() {
                let file = entry.file().file_path();
                if outside(file) {
                    return refused(format!("snapshot {id}: file {file} is not under the table's location {root}"));
                }
                if added_here {
                    named.push(file.to_string());
                }
            }
        }
        let files = caches.manifests.snapshot_files(md, snapshot).map_err(|e| unreadable("its manifests", e))?;
        let Some(real_root) = self.real_table_folder(shown, md.location())? else {
            return Ok(files);
        };
        for path in &named {
            let real = crate::io::canonical(path).map_err(|e| unreadable(path, e))?;
            if !real.starts_with(real_root.as_str()) {
                return refused(format!(
                    "snapshot {id}: {path} leads to {real}, outside the table's location (a symbolic link)"
                ));
            }
        }
        Ok(files)
    }

    /// On disk, the real path of the table's folder (with a trailing `/`), which must be the
    /// lake's data folder's real path joined with the rest of the location, and whose `data` and
    /// `metadata` folders, where they exist, must be its own: a folder that is a symbolic link
    /// would lead the table's maintenance (orphan removal, expiry) to files elsewhere. None for a
    /// bucket.
    pub(super) fn real_table_folder(&self, shown: &str, location: &str) -> Result<Option<String>> {
        if crate::io::object::is_object(location) {
            return Ok(None);
        }
        let data = self.catalog().data_path().trim_end_matches('/').to_string();
        let linked =
            |what: &str| Error::invalid(format!("table {shown}: {what} is a symbolic link, or leads through one"));
        let rest = location.strip_prefix(&format!("{data}/")).ok_or_else(|| linked("its folder"))?;
        let real_data = crate::io::canonical(&data)?;
        let real = crate::io::canonical(location)?;
        if real != format!("{}/{rest}", real_data.trim_end_matches('/')) {
            return Err(linked(&format!("its folder {location}")));
        }
        for folder in ["data", "metadata"] {
            let path = format!("{location}/{folder}");
            if std::path::Path::new(&path).exists() && crate::io::canonical(&path)? != format!("{real}/{folder}") {
                return Err(linked(&format!("its folder {path}")));
            }
        }
        Ok(Some(format!("{real}/")))
    }
}

impl Transaction {
    /// A client's rows on a table with a PRIMARY KEY: the table as the commit leaves it (its
    /// deletes applied, its rows added) must have no key column NULL and no key twice, as
    /// ADD PRIMARY KEY checks a table. It reads every live row's key (a client's files carry no
    /// promise about them), hash-partitioned within the memory limit; the pointer this was
    /// checked on is the one the commit expects, so no commit lands in between. (Not a read of
    /// the transaction's: lineage names no input for it.)
    pub(super) fn check_client_keys(&self, shown: &str, md: &TableMetadata, key: &KeyColumns) -> Result<()> {
        use crate::read::scan::{ScanPlan, ScanRequest};
        use crate::write::key_check::{check_new_key, KeyBudget, KeyFault};
        let unreadable =
            |e: Error| Error::invalid(format!("table {shown}: cannot read the commit's rows: {}", e.message));
        let request = ScanRequest {
            version: crate::read::time_travel::Version::Current,
            columns: (0..md.current_schema().as_struct().fields().len()).collect(),
            prune: None,
            staged: &[],
            staged_deletes: &[],
            row_ids: None,
        };
        let caches = self.catalog().inner.read_caches.clone();
        let (plan, snapshot) = ScanPlan::prepare(md, caches, &request).map_err(unreadable)?;
        let plan = plan.plan_files(md, snapshot.as_deref(), request).map_err(unreadable)?.read_only(Some(&key.indexes));
        let budget = KeyBudget::for_memory_limit(self.memory_limit()).limit();
        match check_new_key(&plan, key, budget).map_err(unreadable)? {
            None => Ok(()),
            Some(KeyFault::Null(column)) => Err(Error::constraint(format!(
                "table {shown}: the commit's rows hold NULL in PRIMARY KEY column \"{column}\""
            ))),
            Some(KeyFault::Repeated(k)) => {
                let shown_key = key.converter().map(|c| key.describe(&c, &k)).unwrap_or_default();
                Err(Error::constraint(format!(
                    "table {shown}: the commit's rows break its PRIMARY KEY: duplicate key \"{shown_key}\""
                )))
            }
        }
    }

    /// A client's rows on a table whose DuckDB types are narrower than their Iceberg types
    /// (TINYINT kept as int, ...): every value the data files of `snapshots` add (whatever a
    /// later snapshot deletes: time travel and the changelog read them) must fit its DuckDB
    /// type, or every read of them would fail. Read through the checked conversion DuckDB's
    /// reads use: a client's files carry no promise about their values (bounds are optional).
    pub(super) fn check_client_values(&self, shown: &str, md: &TableMetadata, snapshots: &[i64]) -> Result<()> {
        use crate::format::duckdb_types::{DuckdbTypes, Facing};
        use crate::read::scan::ScanPlan;
        let facing = Facing::of(md)?;
        if facing.is_empty() {
            return Ok(());
        }
        let unreadable =
            |e: Error| Error::invalid(format!("table {shown}: cannot read the commit's rows: {}", e.message));
        let caches = &self.catalog().inner.read_caches;
        let mut files = vec![];
        for snapshot in snapshots.iter().filter_map(|id| md.snapshot_by_id(*id)) {
            let manifests = caches.manifests.manifest_list(md, snapshot).map_err(unreadable)?;
            for manifest in manifests.iter().filter(|m| m.added_snapshot_id == snapshot.snapshot_id()) {
                for entry in caches.manifests.manifest(manifest).map_err(unreadable)?.iter() {
                    let file = entry.file();
                    let added = entry.snapshot_id == snapshot.snapshot_id();
                    if added && file.content_type() == iceberg::spec::DataContentType::Data {
                        files.push((file.file_path().to_string(), file.record_count(), Default::default()));
                    }
                }
            }
        }
        let kept = DuckdbTypes::of(md.properties())?;
        let schema = md.current_schema().clone();
        let fields = schema.as_struct().fields();
        let holds_kept = |field: &iceberg::spec::NestedFieldRef| {
            crate::format::field_path::ids(field).iter().any(|id| kept.0.contains_key(id))
        };
        let columns: Vec<usize> = (0..fields.len()).filter(|i| holds_kept(&fields[*i])).collect();
        let plan = ScanPlan::for_files(schema.clone(), caches.clone(), files, None).map_err(unreadable)?;
        let plan = plan.read_only(Some(&columns));
        for task in 0..plan.task_count() {
            for batch in plan.open(task).map_err(unreadable)? {
                let batch = batch.map_err(|e| unreadable(e.into()))?;
                let target = facing.schema(&batch.schema());
                facing
                    .batch(batch, &target)
                    .map_err(|e| Error::constraint(format!("table {shown}: the commit's rows: {}", e.message)))?;
            }
        }
        Ok(())
    }

    /// A client's snapshot of a v3 table: every data manifest of its list has row ids; those
    /// carried from the parent keep the ones they had there; the others (its own, and the
    /// parent's that had none, written before an upgrade) take disjoint ranges within the one the
    /// snapshot claims (`first-row-id`, `added-rows`), each as many ids as it holds rows (counted
    /// in its entries, not taken from the list): the table's `next-row-id` moves past them all,
    /// so no id is handed out twice.
    fn check_row_range(&self, shown: &str, md: &TableMetadata, snapshot: &iceberg::spec::Snapshot) -> Result<()> {
        let Some((first, added)) = snapshot.row_range() else { return Ok(()) };
        let id = snapshot.snapshot_id();
        let refused = |why: String| Err(Error::invalid(format!("table {shown}: snapshot {id}: {why}")));
        let unreadable = |e: Error| Error::invalid(format!("table {shown}: snapshot {id}: {}", e.message));
        let Some(end) = first.checked_add(added).filter(|end| *end <= i64::MAX as u64) else {
            return refused(format!("its row ids {first} + {added} overflow"));
        };
        let caches = &self.catalog().inner.read_caches.manifests;
        let before: std::collections::HashMap<String, Option<u64>> =
            match snapshot.parent_snapshot_id().and_then(|p| md.snapshot_by_id(p)) {
                Some(parent) => caches
                    .manifest_list(md, parent)
                    .map_err(unreadable)?
                    .iter()
                    .map(|m| (m.manifest_path.clone(), m.first_row_id))
                    .collect(),
                None => Default::default(),
            };
        let mut ranges = vec![];
        let manifests = caches.manifest_list(md, snapshot).map_err(unreadable)?;
        for m in manifests.iter().filter(|m| m.content == iceberg::spec::ManifestContentType::Data) {
            let Some(start) = m.first_row_id else {
                return refused(format!("data manifest {} has no first_row_id", m.manifest_path));
            };
            if let Some(Some(had)) = before.get(&m.manifest_path) {
                if *had != start {
                    return refused(format!("data manifest {} had row ids from {had}, not {start}", m.manifest_path));
                }
                continue;
            }
            let rows: u64 = caches
                .manifest(m)
                .map_err(unreadable)?
                .iter()
                .filter(|e| e.is_live())
                .map(|e| e.file().record_count())
                .sum();
            let listed = m.added_rows_count.unwrap_or(0) + m.existing_rows_count.unwrap_or(0);
            if rows != listed {
                return refused(format!(
                    "data manifest {} holds {rows} rows, its list entry says {listed}",
                    m.manifest_path
                ));
            }
            if start < first || start.saturating_add(rows) > end {
                return refused(format!(
                    "data manifest {} takes row ids {start}..{} outside the snapshot's range {first}..{end}",
                    m.manifest_path,
                    start.saturating_add(rows)
                ));
            }
            ranges.push((start, start + rows));
        }
        ranges.sort_unstable();
        if let Some(w) = ranges.windows(2).find(|w| w[1].0 < w[0].1) {
            return refused(format!("two data manifests share row ids {}..{}", w[1].0, w[0].1));
        }
        Ok(())
    }
}
