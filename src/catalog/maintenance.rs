//! Table maintenance that commits on its own, outside any user transaction: snapshot expiry and
//! compaction; and the removal of files no commit references (orphans).

use arrow::array::StructArray;
use iceberg::spec::{Operation, TableMetadata, TableMetadataBuilder};

use super::commit::{Change, CommitRequest, Expect};
use super::names::table_shown;
use super::open::Catalog;
use super::state::{CatalogState, StateChange, TableRecord};
use crate::error::{Error, ErrorKind, Result};
use crate::format::expire::{
    expired_snapshots, referenced_files, trim_metadata_log, unlisted_metadata_files, unreferenced_files, Retention,
};
use crate::format::metadata;
use crate::io::input::list_all;
use crate::io::{local_path, remove_files, remove_files_checked, sync_files};
use crate::write::writer::Carries;

/// What an expiry did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ExpireReport {
    pub expired_snapshots: u64,
    pub removed_files: u64,
    /// Snapshots the retention would have expired that a consumer still needs.
    pub kept_for_consumers: u64,
}

const MAX_ATTEMPTS: usize = 32;

/// Whether a read failed because the file is not there (not because the store answered badly).
fn gone(e: &Error) -> bool {
    e.message.contains("does not exist") || e.message.contains("No such file or directory")
}

/// Whether a folder is the one at `location`: the same path, or on disk the same directory
/// (a case-insensitive file system gives two names one folder).
fn same_folder(location: &str) -> impl Fn(&str) -> bool + '_ {
    // (an object's key is its own name: only folders on disk are resolved, no request made)
    let canonical = |f: &str| (!crate::io::object::is_object(f)).then(|| crate::io::canonical(f).ok()).flatten();
    let mine = canonical(location);
    move |other: &str| {
        other == location
            || local_path(other) == local_path(location)
            || mine.as_ref().is_some_and(|m| canonical(other).as_ref() == Some(m))
    }
}

/// What a compaction did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CompactReport {
    pub removed_data_files: u64,
    pub removed_delete_files: u64,
    pub added_data_files: u64,
    pub rows: u64,
}

impl Catalog {
    /// Drops the snapshots of `schema.name` that `retention` does not keep, as one commit (a
    /// snapshot-less `expire_snapshots` entry in the commit log), then removes the files only
    /// they referenced. Time travel to an expired snapshot is an error afterwards.
    pub fn expire_snapshots(&self, schema: &str, name: &str, retention: Retention) -> Result<ExpireReport> {
        self.expire_snapshots_as(None, schema, name, retention)
    }

    /// [`Self::expire_snapshots`], its messages naming the table in the attached database
    /// `database` (see [`Catalog::begin_as`]).
    pub fn expire_snapshots_as(
        &self,
        database: Option<&str>,
        schema: &str,
        name: &str,
        retention: Retention,
    ) -> Result<ExpireReport> {
        let shown = || table_shown(database, schema, name);
        if self.read_only() {
            return Err(Error::permission(format!("skade catalog {} is attached read-only", self.path().display())));
        }
        for _ in 0..MAX_ATTEMPTS {
            // (through a commit log, what other processes committed up to now: a consumer made
            // there a moment ago keeps what it needs)
            let (_, taken) = self.table_now(schema, name, &shown)?;
            // Take the table's commit turn, as committers do: expiry queues behind them (and
            // behind the appends in flight: it decides on the committed head).
            let lock = self.table_lock(&taken.uuid);
            let _turn = loop {
                let turn = lock.take();
                if turn.settled() {
                    break turn;
                }
                drop(turn);
                lock.wait_settled();
            };
            let _shared_turn = self.settled_cross_process_turns(&[taken.uuid.as_str()], true)?;
            // (what landed while it waited for the turns: the head it decides on)
            let (head, record) = self.table_now(schema, name, &shown)?;
            if record.uuid != taken.uuid {
                continue; // (dropped and created again meanwhile: the new table's turns)
            }
            let before = self.inner.metadata.get(&record.metadata_location)?;
            let mut expired = expired_snapshots(&before, retention);
            let kept = self.keep_for_consumers(&head, &record.uuid, &before, &mut expired)?;
            if expired.is_empty() {
                return Ok(ExpireReport { kept_for_consumers: kept, ..ExpireReport::default() });
            }
            let after =
                TableMetadataBuilder::new_from_metadata((*before).clone(), Some(record.metadata_location.clone()))
                    .remove_snapshots(&expired)
                    .build()?
                    .metadata;
            let (after, stale_metadata) = trim_metadata_log(after)?;
            let location =
                metadata::metadata_location(after.location(), metadata::next_version(&record.metadata_location));
            self.inner.metadata.write(&location, &after)?;
            if self.durable_at_commit() {
                sync_files([location.as_str()])?;
            }
            let request = CommitRequest {
                changes: vec![Change {
                    effect: StateChange::PutTable(TableRecord {
                        metadata_location: location.clone(),
                        ..(*record).clone()
                    }),
                    expect: Expect::TableAt(record.metadata_location.clone()),
                    operation: "expire_snapshots".into(),
                    snapshot_id: None,
                }],
                actor: self.actor().to_string(),
                dropped_uuids: Default::default(),
                files: vec![location.clone()],
                consumers: vec![],
                sinks: vec![],
                inputs: vec![],
                database: database.map(str::to_string),
                awaits: vec![],
            };
            match self.commit(request) {
                Ok(_) => {
                    let mut files = unreferenced_files(&self.inner.read_caches.manifests, &before, &after, &expired)?;
                    files.extend(stale_metadata);
                    files.extend(unlisted_metadata_files(&after, &location));
                    self.inner.metadata.insert(&location, std::sync::Arc::new(after));
                    self.inner.lookup_cache.forget(files.iter().map(String::as_str));
                    remove_files(files.iter().map(String::as_str));
                    return Ok(ExpireReport {
                        expired_snapshots: expired.len() as u64,
                        removed_files: files.len() as u64,
                        kept_for_consumers: kept,
                    });
                }
                Err(e) if e.kind == ErrorKind::Conflict => remove_files([location.as_str()]),
                Err(e) => return Err(e),
            }
        }
        Err(Error::conflict(format!("table {} kept changing during snapshot expiry; retry", shown())))
    }

    /// Removes the files in the folders of `schema.name` (`data/` and `metadata/`, sub-folders
    /// too) that no snapshot or metadata file of it references and that were last written before
    /// `older_than_ms` (ms since the epoch): what killed writers and hosts left (an upload never
    /// committed, a commit that lost its host before its log position), as Iceberg's
    /// `remove_orphan_files`. The files of every table of this catalog that lives in the same
    /// folder stay; files of another catalog given the same warehouse cannot be told apart (never
    /// share one). Returns the files removed, or only found with `dry_run`.
    pub fn remove_orphan_files_as(
        &self,
        database: Option<&str>,
        schema: &str,
        name: &str,
        older_than_ms: i64,
        dry_run: bool,
    ) -> Result<Vec<String>> {
        let shown = || table_shown(database, schema, name);
        if self.read_only() && !dry_run {
            return Err(Error::permission(format!("skade catalog {} is attached read-only", self.path().display())));
        }
        let (head, record) = self.table_now(schema, name, &shown)?;
        let metadata = self.inner.metadata.get(&record.metadata_location)?;
        let location = metadata.location().trim_end_matches('/').to_string();
        let here = same_folder(&location);
        let folder_of = |m: &str| m.rsplit_once("/metadata/").map(|(f, _)| f.trim_end_matches('/').to_string());
        let caches = &self.inner.read_caches.manifests;
        let mut referenced = std::collections::HashSet::new();
        // every table living in this folder now (one made again under a dropped one's name, a
        // name on a case-insensitive file system): what its metadata references
        for t in head.tables.values() {
            let shares = folder_of(&t.metadata_location).is_some_and(|f| here(&f));
            if t.kind.is_table() && (shares || t.uuid == record.uuid) {
                let m = self.inner.metadata.get(&t.metadata_location)?;
                referenced.extend(referenced_files(caches, &m, &t.metadata_location)?);
            } else if shares {
                referenced.insert(local_path(&t.metadata_location).to_string());
                // (a view's file)
            }
        }
        // and what the commit history still reads: every metadata file a commit names (consumers
        // and lineage read those past the metadata log's last 100), and the files of the last
        // metadata of a table that lived in this folder and was dropped or renamed away, while a
        // consumer behind that may still read it or it went after `older_than`
        let mut here_memo: std::collections::HashMap<String, bool> = Default::default();
        // (uuid -> its last metadata here, its last commit_seq and time)
        let mut others: std::collections::HashMap<String, (String, u64, i64)> = Default::default();
        let mut since = 0;
        loop {
            let chunk = self.inner.store.commits_since(since, 10_000)?;
            let Some(last) = chunk.last() else { break };
            since = last.seq;
            for r in chunk {
                let uuid = r.table_uuid.filter(|u| *u != record.uuid);
                if let Some(m) = &r.metadata_location {
                    let Some(f) = folder_of(m) else { continue };
                    if !*here_memo.entry(f.clone()).or_insert_with(|| here(&f)) {
                        continue;
                    }
                    referenced.insert(local_path(m).to_string());
                    if let Some(uuid) = &uuid {
                        others.insert(uuid.clone(), (m.clone(), r.seq, r.committed_at_us));
                    }
                } else if let Some(entry) = uuid.and_then(|u| others.get_mut(&u)) {
                    (entry.1, entry.2) = (r.seq, r.committed_at_us); // (its drop)
                }
            }
        }
        for (uuid, (m, last_seq, last_us)) in others {
            let live = head.tables.values().any(|t| t.uuid == uuid); // (counted above)
            let behind =
                head.consumers.values().any(|c| c.cursor < last_seq && c.tables.iter().any(|t| t.uuid == uuid));
            if live || !(behind || last_us / 1000 >= older_than_ms) {
                continue;
            }
            let files = self.inner.metadata.get(&m).and_then(|old| referenced_files(caches, &old, &m));
            match files {
                Ok(files) => referenced.extend(files),
                // (a view's metadata; or gone with its table's expired history: nothing to keep)
                Err(_) if crate::format::view::read(&m).is_ok() => {}
                Err(e) if gone(&e) => eprintln!("skade: remove_orphan_files: {}; its files are not kept", e.message),
                // (anything else, a 503 or a timeout, says nothing: nothing is removed)
                Err(e) => return Err(e),
            }
        }
        let older_than = std::time::UNIX_EPOCH + std::time::Duration::from_millis(older_than_ms.max(0) as u64);
        let mut orphans = vec![];
        for folder in ["data", "metadata"] {
            for f in list_all(&format!("{location}/{folder}"))? {
                let old = f.modified.is_some_and(|t| t < older_than);
                if old && !referenced.contains(local_path(&f.location)) {
                    orphans.push(f.location);
                }
            }
        }
        orphans.sort();
        if !dry_run {
            self.inner.lookup_cache.forget(orphans.iter().map(String::as_str));
            remove_files_checked(orphans.iter().map(String::as_str))?;
        }
        Ok(orphans)
    }

    /// The catalog as of now (through a commit log, with what other processes committed up to
    /// now) and the table `schema.name` in it.
    fn table_now(
        &self,
        schema: &str,
        name: &str,
        shown: &dyn Fn() -> String,
    ) -> Result<(std::sync::Arc<CatalogState>, std::sync::Arc<TableRecord>)> {
        self.catch_up()?;
        let head = self.state();
        let record = head
            .table(schema, name)
            .ok_or_else(|| Error::catalog(format!("Table with name {} does not exist!", shown())))?
            .clone();
        Ok((head, record))
    }

    /// Takes out of `expired` the snapshots of table `uuid` a consumer still needs: every one
    /// committed after its cursor, and the last one at or before it (the deletes of the next one
    /// are read at it). Returns how many it kept.
    fn keep_for_consumers(
        &self,
        head: &CatalogState,
        uuid: &str,
        metadata: &TableMetadata,
        expired: &mut Vec<i64>,
    ) -> Result<u64> {
        let cursors: Vec<u64> =
            head.consumers.values().filter(|c| c.tables.iter().any(|t| t.uuid == uuid)).map(|c| c.cursor).collect();
        let Some(cursor) = cursors.into_iter().min() else {
            return Ok(0);
        };
        let mut snapshots: Vec<_> = metadata.snapshots().collect();
        snapshots.sort_by_key(|s| std::cmp::Reverse(s.sequence_number()));
        let mut oldest = None;
        for s in snapshots {
            oldest = Some(s.sequence_number());
            if self.commit_seq_of(uuid, s.snapshot_id())?.is_some_and(|seq| seq <= cursor) {
                break; // the base of the consumer's next window
            }
        }
        let Some(oldest) = oldest else {
            return Ok(0);
        };
        let before = expired.len();
        expired.retain(|id| metadata.snapshot_by_id(*id).is_none_or(|s| s.sequence_number() < oldest));
        Ok((before - expired.len()) as u64)
    }

    /// Rewrites the live rows of `schema.name` into new data files, deletes applied, as one
    /// `replace` snapshot that removes every data and delete file live before: scans and lookups
    /// then read fewer, larger files and no deletes. Rows, keys and the changelog are unchanged
    /// (a `replace` snapshot changes no row). It rebases over appends committed meanwhile and
    /// fails with a conflict if rows were deleted or updated meanwhile. The old files stay for
    /// time travel until their snapshots expire. On a table with a sort order the new files are
    /// sorted by it, as every write's are. Nothing to gain (at most one data file, sorted by the
    /// table's order if it has one, and no deletes): no commit.
    pub fn compact(&self, schema: &str, name: &str) -> Result<CompactReport> {
        self.compact_as(None, schema, name)
    }

    /// [`Self::compact`], its messages naming the table in the attached database `database` (see
    /// [`Catalog::begin_as`]).
    pub fn compact_as(&self, database: Option<&str>, schema: &str, name: &str) -> Result<CompactReport> {
        if self.read_only() {
            return Err(Error::permission(format!("skade catalog {} is attached read-only", self.path().display())));
        }
        // skade's own rewrite, changing no row: it may maintain the reserved lineage history too
        let txn = self.begin_system().attached_as(database);
        let table = txn.table(schema, name)?.ok_or_else(|| {
            Error::catalog(format!("Table with name {} does not exist!", table_shown(database, schema, name)))
        })?;
        let Some(current) = table.metadata.current_snapshot() else {
            return Ok(CompactReport::default());
        };
        let live = self.inner.read_caches.manifests.snapshot_files(&table.metadata, current)?;
        let order = table.metadata.default_sort_order();
        let in_order = |f: &iceberg::spec::DataFile| {
            order.is_unsorted() || f.sort_order_id().is_some_and(|id| i64::from(id) == order.order_id)
        };
        if live.deletes.is_empty() && live.data.len() <= 1 && live.data.iter().all(|e| in_order(e.file())) {
            return Ok(CompactReport::default());
        }
        let width = table.metadata.current_schema().as_struct().fields().len();
        // An Iceberg v3 table's rows keep their lineage: each row's `_row_id` and
        // `_last_updated_sequence_number`, read and stored in the new files (a compaction changes
        // no row, so no reader sees a difference).
        let v3 = table.metadata.format_version() >= iceberg::spec::FormatVersion::V3;
        let plan = txn.scan_with_lineage(&table, (0..width).collect(), None, false, v3)?;
        let mut writer =
            txn.writer_carrying(&table.record.uuid, if v3 { Carries::Lineage } else { Carries::Nothing })?;
        for task in 0..plan.task_count() {
            for batch in plan.open(task)? {
                let batch = batch?;
                let table_columns = batch.project(&(0..width).collect::<Vec<_>>())?;
                writer.write_carried(&StructArray::from(table_columns), &batch.columns()[width..])?;
            }
        }
        let rows = writer.rows();
        let added = writer.finish()?.files;
        let report = CompactReport {
            removed_data_files: live.data.len() as u64,
            removed_delete_files: live.deletes.len() as u64,
            added_data_files: added.len() as u64,
            rows,
        };
        let removed = live.data.iter().chain(&live.deletes).map(|e| e.file().file_path().to_string()).collect();
        txn.rewrite_files(&table.record.uuid, added, removed, Operation::Replace)?;
        txn.commit()?;
        Ok(report)
    }
}
