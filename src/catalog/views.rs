//! Views within a transaction (issue 43). A view is an entry of the table namespace whose pointer
//! is an Iceberg view metadata file (`format::view`): created, replaced, renamed and dropped as
//! DDL of the transaction, committed with the same pointer swap and conflict checks as tables
//! (a view and a table of one name conflict as two tables do), and seen in the commit feed and
//! lineage as `create_view`, `replace_view`, `rename_view` and `drop_view`.

use std::sync::Arc;

use iceberg::spec::ViewMetadata;
use uuid::Uuid;

use super::names;
use super::state::{EntryKind, StateChange, TableRecord};
use super::transaction::{Ddl, OnConflict, Transaction};
use crate::error::{Error, Result};
use crate::format::metadata::next_version;
use crate::format::view::{self, ViewColumns, ViewDefinition};

/// A view as a transaction sees it.
pub struct ViewInfo {
    pub record: Arc<TableRecord>,
    pub definition: ViewDefinition,
}

impl Transaction {
    /// The views of a schema.
    pub fn views(&self, schema: &str) -> Result<Vec<Arc<TableRecord>>> {
        Ok(self.lock()?.view.views_in(schema).cloned().collect())
    }

    /// The view of that name, or None (a table of that name is not a view).
    pub fn view(&self, schema: &str, name: &str) -> Result<Option<ViewInfo>> {
        let Some(record) = self.lock()?.view.view(schema, name).cloned() else {
            return Ok(None);
        };
        let metadata = self.view_metadata(&record)?;
        let definition = view::definition(&metadata, &record.metadata_location)
            .map_err(|e| e.context(format!("view {}", self.shown_name(&record))))?;
        Ok(Some(ViewInfo { record, definition }))
    }

    fn view_metadata(&self, record: &TableRecord) -> Result<ViewMetadata> {
        view::read(&record.metadata_location).map_err(|e| e.context(format!("view {}", self.shown_name(record))))
    }

    /// CREATE [OR REPLACE] VIEW. Replacing a view keeps its identity and adds a version to its
    /// history; false when it existed and `on_conflict` is Ignore.
    pub fn create_view(
        &self,
        schema_name: &str,
        name: &str,
        definition: ViewDefinition,
        columns: &ViewColumns,
        on_conflict: OnConflict,
    ) -> Result<bool> {
        self.check_writable()?;
        self.check_not_reserved(schema_name, &format!("create view {}", names::shown(name)))?;
        let location = names::table_location(self.catalog().data_path(), schema_name, name)?;
        let (stored_schema, existing) = {
            let st = self.lock()?;
            let Some(schema) = st.view.schema(schema_name) else {
                return Err(Error::catalog(format!("Schema with name \"{schema_name}\" does not exist!")));
            };
            (schema.name.clone(), st.view.entry(schema_name, name).cloned())
        };
        let definition = ViewDefinition { namespace: stored_schema.clone(), ..definition };
        if let Some(existing) = existing {
            return match on_conflict {
                OnConflict::Ignore => Ok(false),
                OnConflict::Error => Err(Error::catalog(format!(
                    "{} with name \"{}\" already exists!",
                    existing.kind.shown(),
                    existing.name
                ))),
                OnConflict::Replace if existing.kind != EntryKind::View => {
                    Err(existing.kind.mismatch(&existing.name, "replace with", EntryKind::View))
                }
                OnConflict::Replace => {
                    let previous = self.view_metadata(&existing)?;
                    let next = view::replaced(&previous, &definition, columns)?;
                    self.stage_view_version(existing, &next, "replace_view")?;
                    Ok(true)
                }
            };
        }
        let view_uuid = Uuid::new_v4();
        let metadata = view::new_view(&location, view_uuid, &definition, columns)?;
        let md_location = view::metadata_location(&location, 0);
        self.lock()?.written.push(md_location.clone());
        view::write(&md_location, &metadata)?;
        let record = TableRecord {
            schema: stored_schema,
            name: name.to_string(),
            uuid: view_uuid.to_string(),
            metadata_location: md_location,
            kind: EntryKind::View,
        };
        let mut st = self.lock()?;
        Arc::make_mut(&mut st.view).apply(&StateChange::PutTable(record.clone()));
        st.ddl.push(Ddl::CreateTable(record));
        Ok(true)
    }

    /// DROP VIEW.
    pub fn drop_view(&self, schema: &str, name: &str, if_exists: bool) -> Result<()> {
        self.check_writable()?;
        self.check_not_reserved(schema, &format!("drop view {}", names::shown(name)))?;
        let mut st = self.lock()?;
        match st.view.entry(schema, name).cloned() {
            Some(t) if t.kind != EntryKind::View => Err(t.kind.mismatch(&t.name, "drop", EntryKind::View)),
            Some(t) => {
                Self::stage_drop_table(&mut st, t);
                Ok(())
            }
            None if if_exists => Ok(()),
            None => Err(Error::catalog(format!("View with name {name} does not exist!"))),
        }
    }

    /// ALTER VIEW ... RENAME TO `to`, in the same schema.
    pub fn rename_view(&self, schema: &str, name: &str, to: &str) -> Result<()> {
        self.check_writable()?;
        self.check_not_reserved(schema, &format!("rename a view to {}", names::shown(to)))?;
        let before = self.existing_view(schema, name)?;
        names::table_location(self.catalog().data_path(), &before.schema, to)?;
        let mut st = self.lock()?;
        if st.view.entry(schema, to).is_some_and(|t| t.uuid != before.uuid) {
            return Err(Error::catalog(format!(
                "Could not rename \"{name}\" to \"{to}\": another entry with this name already exists!"
            )));
        }
        let after = TableRecord { name: to.to_string(), ..(*before).clone() };
        let view = Arc::make_mut(&mut st.view);
        view.apply(&StateChange::DropTable { schema: before.schema.clone(), name: before.name.clone() });
        view.apply(&StateChange::PutTable(after.clone()));
        st.ddl.push(Ddl::RenameTable { before, after });
        Ok(())
    }

    /// COMMENT ON VIEW (`comment`: Some) or on one of its columns (`column`: Some); None removes
    /// the comment (COMMENT ... IS NULL).
    pub fn comment_view(&self, schema: &str, name: &str, column: Option<&str>, comment: Option<&str>) -> Result<()> {
        self.check_writable()?;
        self.check_not_reserved(schema, &format!("comment on view {}", names::shown(name)))?;
        let record = self.existing_view(schema, name)?;
        let previous = self.view_metadata(&record)?;
        let mut definition = view::definition(&previous, &record.metadata_location)?;
        match column {
            None => definition.comment = comment.map(str::to_string),
            Some(column) => {
                let schema = view::current_schema(&previous)?;
                let Some(field) = schema.as_struct().fields().iter().find(|f| f.name.eq_ignore_ascii_case(column))
                else {
                    return Err(Error::catalog(format!(
                        "View \"{}\" does not have a column with name \"{column}\"",
                        record.name
                    )));
                };
                definition.column_comments.retain(|(c, _)| !c.eq_ignore_ascii_case(column));
                if let Some(text) = comment {
                    definition.column_comments.push((field.name.clone(), text.to_string()));
                }
            }
        }
        let next = view::commented(&previous, &definition)?;
        self.stage_view_version(record, &next, "comment_view")
    }

    fn existing_view(&self, schema: &str, name: &str) -> Result<Arc<TableRecord>> {
        match self.lock()?.view.entry(schema, name).cloned() {
            Some(t) if t.kind == EntryKind::View => Ok(t),
            Some(_) => Err(Error::catalog("Can only modify table with ALTER TABLE statement")),
            None => Err(Error::catalog(format!("View with name {name} does not exist!"))),
        }
    }

    /// Writes the view's next metadata file and stages the move of its pointer to it.
    fn stage_view_version(&self, before: Arc<TableRecord>, next: &ViewMetadata, operation: &'static str) -> Result<()> {
        let md_location = view::metadata_location(next.location(), next_version(&before.metadata_location));
        self.lock()?.written.push(md_location.clone());
        view::write(&md_location, next)?;
        let after = TableRecord { metadata_location: md_location, ..(*before).clone() };
        let mut st = self.lock()?;
        Arc::make_mut(&mut st.view).apply(&StateChange::PutTable(after.clone()));
        st.ddl.push(Ddl::AlterTable { before, after, operation, snapshot_id: None, replay: None });
        Ok(())
    }
}
