//! ALTER TABLE within a transaction (issue 24): a change of a table's columns is a new
//! metadata.json with a new current schema, written at once and staged as DDL (the transaction's
//! own later statements see it and write their files in it); RENAME TO moves the table's pointer
//! to a new name (its uuid, location and files stay). Each is a change of its own at commit (a
//! commit_seq), checked against the table's pointer as read: a concurrent commit to the table
//! makes it a retryable conflict, never a file written in the wrong schema.

use std::collections::HashSet;
use std::sync::Arc;

use iceberg::spec::TableMetadata;

use super::names;
use super::state::{CatalogState, StateChange, TableRecord};
use super::transaction::{Ddl, TableInfo, Transaction, TxnState};
use crate::error::{Error, Result};
use crate::format::evolve::{evolve, SchemaChange};
use crate::format::metadata;
use crate::read::keys::KeyColumns;
use crate::runtime::block_on;
use crate::write::key_check::{check_new_key, KeyBudget, KeyFault};

impl Transaction {
    /// Applies `change` to the columns of `schema.name`; false when it changed nothing (IF [NOT]
    /// EXISTS, a constraint already so).
    pub fn alter_table(&self, schema: &str, name: &str, change: &SchemaChange) -> Result<bool> {
        self.check_writable()?;
        let table = self.table(schema, name)?.ok_or_else(|| self.missing(schema, name))?;
        self.check_table_writable(&table)?;
        let record = table.record.clone();
        // (the files a transaction stages for a table are all of one partition spec)
        let wrote = self.lock()?.wrote_to(&record.uuid);
        if wrote && matches!(change, SchemaChange::SetPartitioning { .. }) {
            return Err(Error::invalid(format!(
                "cannot change how table {} is partitioned in a transaction that already wrote to it: \
                 commit the writes first",
                table.shown_name()
            )));
        }
        let location = record.metadata_location.clone();
        let shown = table.shown_name();
        let Some(next) = evolve(&table.metadata, &location, change, self.catalog().nanoseconds(), &shown)? else {
            return Ok(false);
        };
        if let SchemaChange::AddPrimaryKey { .. } = change {
            if wrote {
                return Err(Error::invalid(format!(
                    "cannot add a PRIMARY KEY to table {shown} in a transaction that already wrote to it: \
                     commit the writes first"
                )));
            }
            self.check_rows_take_key(&table, &next)?;
        }
        let table_location = next.location().to_string();
        let md_location = metadata::metadata_location(&table_location, metadata::next_version(&location));
        self.write_metadata(&md_location, next)?;
        let after = TableRecord { metadata_location: md_location, ..(*record).clone() };
        // (a new key's rows were checked on the rows as read: rows appended since were not)
        let replay = (!matches!(change, SchemaChange::AddPrimaryKey { .. })).then(|| change.clone());
        self.stage_alter(record, after, change.operation(), None, replay)?;
        Ok(true)
    }

    /// At commit, with the table's turn held and `head` its newest state: each ALTER whose table
    /// moved on since the statement only by snapshots (appends, deletes; no change of columns,
    /// partitioning, sort order, properties or format) is made again on the head, where it
    /// means what it meant on the table as read. A stream of appends otherwise starves an ALTER,
    /// whose premise was the exact pointer. Not rebuilt, so a conflict as before: an ALTER of a
    /// table this transaction also wrote to (its rows were checked, and its deletes made, on the
    /// table as read), renamed, dropped or altered twice, or one adding a key (rows checked).
    /// The metadata files it writes go to `written`; the ones they replace to `superseded`.
    pub(super) fn rebuild_alters(
        &self,
        st: &mut TxnState,
        head: &CatalogState,
        wrote: &HashSet<&str>,
        written: &mut Vec<String>,
        superseded: &mut Vec<String>,
    ) -> Result<()> {
        let inner = &self.catalog().inner;
        for i in 0..st.ddl.len() {
            let Ddl::AlterTable { before, after, replay: Some(change), .. } = &st.ddl[i] else {
                continue;
            };
            let uuid = before.uuid.as_str();
            let Some(now) = head.table_by_uuid(uuid) else { continue };
            let alone = st.ddl.iter().filter(|d| d.table_uuid() == Some(uuid)).count() == 1;
            if now.metadata_location == before.metadata_location
                || !alone
                || wrote.contains(uuid)
                || now.key() != before.key()
            {
                continue;
            }
            // (an expiry since may have removed the files read: then it is not made again, and
            // its premise decides, a conflict)
            let got = |location: &str| inner.metadata.get(location).ok();
            let (Some(read), Some(made), Some(newest)) =
                (got(&before.metadata_location), got(&after.metadata_location), got(&now.metadata_location))
            else {
                continue;
            };
            if !metadata::same_but_snapshots(&read, &newest) {
                continue;
            }
            let shown = names::table_shown(self.database(), &now.schema, &now.name);
            let Some(next) = evolve(&newest, &now.metadata_location, change, self.catalog().nanoseconds(), &shown)?
            else {
                continue;
            };
            // (the same columns, field ids and specs as the statement made: the same change)
            if !metadata::same_but_snapshots(&made, &next) {
                continue;
            }
            let location = metadata::metadata_location(next.location(), metadata::next_version(&now.metadata_location));
            written.push(location.clone());
            inner.metadata.write(&location, &next)?;
            inner.metadata.insert(&location, Arc::new(next));
            let replaced = after.metadata_location.clone();
            written.retain(|w| *w != replaced);
            superseded.push(replaced);
            let after = TableRecord { metadata_location: location, ..(**now).clone() };
            Arc::make_mut(&mut st.view).apply(&StateChange::PutTable(after.clone()));
            if let Ddl::AlterTable { before, after: made, .. } = &mut st.ddl[i] {
                *before = now.clone();
                *made = after;
            }
        }
        Ok(())
    }

    /// ADD PRIMARY KEY: the live rows of `table` (as this transaction sees them) must hold no NULL
    /// in the key of `next` (its metadata after the change) and no key twice. A commit meanwhile
    /// makes the ALTER a conflict at commit, so the rows checked are the rows it commits over.
    fn check_rows_take_key(&self, table: &TableInfo, next: &TableMetadata) -> Result<()> {
        let key =
            KeyColumns::of(next.current_schema())?.ok_or_else(|| Error::internal("a PRIMARY KEY of no columns"))?;
        let shown = table.shown_name();
        let refused = |why: String| {
            Error::constraint(format!("cannot add PRIMARY KEY ({}) to table {shown}: {why}", key.names.join(", ")))
        };
        let columns = (0..table.metadata.current_schema().as_struct().fields().len()).collect();
        let plan = self.scan(table, columns, None, false)?.read_only(Some(&key.indexes));
        let budget = KeyBudget::for_memory_limit(self.memory_limit()).limit();
        match check_new_key(&plan, &key, budget)? {
            None => {}
            Some(KeyFault::Null(column)) => return Err(refused(format!("column \"{column}\" is NULL in a row"))),
            Some(KeyFault::Repeated(k)) => {
                let shown = key.converter().map(|c| key.describe(&c, &k)).unwrap_or_default();
                return Err(refused(format!("more than one row has the key \"{shown}\"")));
            }
        }
        // A key column becomes required, and readers (skade's, PyIceberg's) then take a file's
        // column as holding no NULL before they apply deletes: a deleted row holding NULL in it
        // would fail every later read. The live rows hold none; the files' null counts
        // (written with every file; none: the column is not in the file) vouch for the rest.
        if let Some(snapshot) = table.metadata.current_snapshot() {
            let live = self.catalog().inner.read_caches.manifests.snapshot_files(&table.metadata, snapshot)?;
            let was = table.metadata.current_schema();
            for entry in &live.data {
                let file = entry.file();
                for (id, name) in key.field_ids.iter().zip(&key.names) {
                    let required = was.field_by_id(*id).is_some_and(|f| f.required);
                    if !required && file.null_value_counts().get(id).is_none_or(|&n| n > 0) {
                        return Err(refused(format!(
                            "data file {} may hold NULL in column \"{name}\" (in rows deleted since): rewrite \
                             the table's files first with skade_compact, then add the key",
                            file.file_path()
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    /// ALTER TABLE ... RENAME TO `to`, in the same schema.
    pub fn rename_table(&self, schema: &str, name: &str, to: &str) -> Result<()> {
        self.check_writable()?;
        let table = self.table(schema, name)?.ok_or_else(|| self.missing(schema, name))?;
        self.check_table_writable(&table)?;
        self.check_not_reserved(schema, &format!("rename a table to {}", names::shown(to)))?;
        // (the new name must be one a table could be created with; the files stay where they are)
        names::table_location(self.catalog().data_path(), &table.record.schema, to)?;
        let mut st = self.lock()?;
        if st.view.entry(schema, to).is_some_and(|t| t.uuid != table.record.uuid) {
            return Err(Error::catalog(format!(
                "Could not rename \"{name}\" to \"{to}\": another table with this name exists"
            )));
        }
        let before = table.record.clone();
        let after = TableRecord { name: to.to_string(), ..(*before).clone() };
        let view = Arc::make_mut(&mut st.view);
        view.apply(&StateChange::DropTable { schema: before.schema.clone(), name: before.name.clone() });
        view.apply(&StateChange::PutTable(after.clone()));
        st.ddl.push(Ddl::RenameTable { before, after });
        Ok(())
    }

    fn missing(&self, schema: &str, name: &str) -> Error {
        if self.lock().is_ok_and(|st| st.view.view(schema, name).is_some()) {
            return Error::catalog("Can only modify view with ALTER VIEW statement");
        }
        Error::catalog(format!("Table with name {} does not exist!", names::table_shown(self.database(), schema, name)))
    }

    /// `skade_upgrade_table`: the table's Iceberg format version raised to `version` in place,
    /// as one commit (Iceberg allows upgrades only; 2 -> 3 starts row lineage: the rows written
    /// before have no row id, the ones after do). Returns the versions before and after; none
    /// committed when the table has the version already.
    pub fn upgrade_table(&self, schema: &str, name: &str, version: i64) -> Result<(u8, u8)> {
        use iceberg::spec::FormatVersion;
        self.check_writable()?;
        let table = self.table(schema, name)?.ok_or_else(|| self.missing(schema, name))?;
        self.check_table_writable(&table)?;
        let shown = table.shown_name();
        let number = |v: FormatVersion| v as u8;
        let target = match version {
            2 => FormatVersion::V2,
            3 => FormatVersion::V3,
            other => {
                return Err(Error::invalid(format!(
                    "skade_upgrade_table: format version {other} is not one skade writes (2 or 3)"
                )))
            }
        };
        let before = table.metadata.format_version();
        if target < before {
            return Err(Error::invalid(format!(
                "table {shown} is Iceberg v{}: it cannot go back to v{} (Iceberg tables are upgraded, never downgraded)",
                number(before),
                number(target)
            )));
        }
        if target == before {
            return Ok((number(before), number(target)));
        }
        if self.lock()?.wrote_to(&table.record.uuid) {
            return Err(Error::invalid(format!(
                "cannot upgrade table {shown} in a transaction that already wrote to it: commit the writes first"
            )));
        }
        let record = table.record.clone();
        let location = record.metadata_location.clone();
        if target >= FormatVersion::V3 && table.metadata.current_snapshot().is_some() {
            // The rows written before get their ids at once, in a snapshot of the upgrade's own
            // that changes no row (a `replace`): another v3 writer's next commit then assigns ids
            // to its own rows only (DuckDB's iceberg extension counts no others).
            let upgraded = iceberg::spec::TableMetadata::clone(&table.metadata)
                .into_builder(None)
                .upgrade_format_version(target)?;
            let (md_location, snapshot_id) = self.commit_row_ids(&upgraded.build()?.metadata, &location)?;
            let after = TableRecord { metadata_location: md_location, ..(*record).clone() };
            self.stage_alter(record, after, "upgrade_format_version", Some(snapshot_id), None)?;
            return Ok((number(before), number(target)));
        }
        let next = iceberg::spec::TableMetadata::clone(&table.metadata)
            .into_builder(Some(location.clone()))
            .upgrade_format_version(target)?
            .build()?
            .metadata;
        let md_location = metadata::metadata_location(next.location(), metadata::next_version(&location));
        self.write_metadata(&md_location, next)?;
        let after = TableRecord { metadata_location: md_location, ..(*record).clone() };
        self.stage_alter(record, after, "upgrade_format_version", None, None)?;
        Ok((number(before), number(target)))
    }

    /// Writes a `replace` snapshot of `base` (a table just made v3, whose metadata was at
    /// `location`) that adds no file: its manifest list gives the manifests without row ids
    /// their ranges. Returns the new metadata's location and the snapshot's id.
    fn commit_row_ids(&self, base: &iceberg::spec::TableMetadata, location: &str) -> Result<(String, i64)> {
        use crate::format::snapshot::{produce, StagedSnapshot};
        let inner = &self.catalog().inner;
        let snapshot_id = self.catalog().allocate_snapshot_id()?;
        let staged = StagedSnapshot {
            snapshot_id,
            operation: iceberg::spec::Operation::Replace,
            manifests: vec![],
            entries: vec![],
            summary: Default::default(),
            delete_base: None,
            key_check: None,
            removed: vec![],
            replaced_dvs: vec![],
            names: Default::default(),
            adopted: vec![],
            written_for_v3: true,
        };
        let mut written = vec![];
        let caches = &inner.read_caches.manifests;
        let produced = block_on(async {
            let unwritten =
                produce(&inner.file_io, caches, &inner.metadata, base, location, &staged, &mut written).await?;
            let md_location = unwritten.location.clone();
            unwritten.write(&inner.file_io).await?;
            Ok::<_, crate::error::Error>(md_location)
        });
        self.lock()?.written.extend(written);
        Ok((produced?, snapshot_id))
    }
}
