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

use super::state::{StateChange, TableRecord};
use super::transaction::{Ddl, Transaction};
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

/// The updates served: snapshots and the main branch, properties. Schema, partition and sort
/// changes, other branches and tags, and snapshot removal wait for later increments.
fn check_served(update: &TableUpdate, base: &TableMetadata, table: &str) -> Result<()> {
    let refused = |what: &str| {
        Err(Error::not_implemented(format!(
            "table {table}: {what} over the REST protocol is not served yet (snapshots on the main branch and \
             properties are)"
        )))
    };
    match update {
        TableUpdate::AddSnapshot { .. } | TableUpdate::SetProperties { .. } | TableUpdate::RemoveProperties { .. } => {
            Ok(())
        }
        TableUpdate::SetSnapshotRef { ref_name, .. } if ref_name == iceberg::spec::MAIN_BRANCH => Ok(()),
        TableUpdate::SetSnapshotRef { ref_name, .. } => refused(&format!("a ref other than main ({ref_name})")),
        TableUpdate::AssignUuid { uuid } if *uuid == base.uuid() => Ok(()),
        TableUpdate::AssignUuid { .. } => refused("a new table uuid"),
        TableUpdate::AddSchema { .. } | TableUpdate::SetCurrentSchema { .. } => refused("a schema change"),
        TableUpdate::AddSpec { .. } | TableUpdate::SetDefaultSpec { .. } => refused("a partition spec change"),
        TableUpdate::AddSortOrder { .. } | TableUpdate::SetDefaultSortOrder { .. } => refused("a sort order change"),
        _ => refused("this update"),
    }
}

/// The operation a commit's record names: its newest snapshot's, or `update` for properties.
fn operation_of(next: &TableMetadata, added: &[i64]) -> &'static str {
    let newest = added.iter().filter_map(|id| next.snapshot_by_id(*id)).max_by_key(|s| s.sequence_number());
    match newest.map(|s| s.summary().operation.clone()) {
        Some(Operation::Append) => "append",
        Some(Operation::Overwrite) => "overwrite",
        Some(Operation::Delete) => "delete",
        Some(Operation::Replace) => "replace",
        None => "update",
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
        self.check_added_snapshots(&shown, base, &next, &added)?;
        let md_location = metadata::metadata_location(next.location(), metadata::next_version(&location));
        let inner = &self.catalog().inner;
        self.lock()?.written.push(md_location.clone());
        inner.metadata.write(&md_location, &next)?;
        let next = Arc::new(next);
        inner.metadata.insert(&md_location, next.clone());
        let record = table.record.clone();
        let after = TableRecord { metadata_location: md_location.clone(), ..(*record).clone() };
        let snapshot_id = match added.is_empty() {
            true => None,
            false => next.current_snapshot().map(|s| s.snapshot_id()),
        };
        let operation = operation_of(&next, &added);
        let mut st = self.lock()?;
        Arc::make_mut(&mut st.view).apply(&StateChange::PutTable(after.clone()));
        st.ddl.push(Ddl::AlterTable { before: record, after, operation, snapshot_id });
        Ok(Updated { metadata_location: md_location, metadata: next })
    }

    /// New snapshots must build on the table's current schema, on a table whose key skade checks
    /// itself (none yet over REST), with every file (manifest lists, data and delete files)
    /// under the table's location: a client must not make a DuckDB user read files elsewhere.
    fn check_added_snapshots(
        &self,
        shown: &str,
        base: &TableMetadata,
        next: &TableMetadata,
        added: &[i64],
    ) -> Result<()> {
        if added.is_empty() {
            return Ok(());
        }
        if KeyColumns::of(base.current_schema())?.is_some() {
            return Err(Error::not_implemented(format!(
                "table {shown} has a PRIMARY KEY: commits over the REST protocol to it are not served yet (its key \
                 is checked by DuckDB's writes only)"
            )));
        }
        let root = format!("{}/", next.location().trim_end_matches('/'));
        let outside = |path: &str| !path.starts_with(&root) || path.split('/').any(|part| part == "..");
        let caches = &self.catalog().inner.read_caches;
        for id in added {
            let snapshot = next.snapshot_by_id(*id).ok_or_else(|| Error::internal("an added snapshot is missing"))?;
            if snapshot.schema_id().is_some_and(|s| s != next.current_schema_id()) {
                return Err(Error::invalid(format!(
                    "snapshot {id} of table {shown} is written in schema {}, not the table's current schema {}",
                    snapshot.schema_id().unwrap_or_default(),
                    next.current_schema_id()
                )));
            }
            if outside(snapshot.manifest_list()) {
                return Err(Error::invalid(format!(
                    "snapshot {id} of table {shown}: its manifest list {} is not under the table's location {root}",
                    snapshot.manifest_list()
                )));
            }
            let files = caches.manifests.snapshot_files(next, snapshot)?;
            if let Some(file) =
                files.data.iter().chain(&files.deletes).map(|e| e.file().file_path()).find(|p| outside(p))
            {
                return Err(Error::invalid(format!(
                    "snapshot {id} of table {shown}: file {file} is not under the table's location {root}"
                )));
            }
        }
        Ok(())
    }
}
