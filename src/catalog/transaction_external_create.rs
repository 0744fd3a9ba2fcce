//! Tables other engines create through the Iceberg REST protocol (issue 45,
//! docs/design/rest-catalog.md): a create request, or a commit asserting the table's absence
//! (`assert-create`, what a staged create ends in) whose updates describe the table. Either way
//! the table is built as `CREATE TABLE` builds one (skade's location, properties and field ids)
//! and created in this transaction; a commit's snapshots (CREATE TABLE AS) are then applied as
//! any client commit is, in the same skade commit.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{FormatVersion, Schema, SortOrder, TableMetadata, UnboundPartitionSpec};
use iceberg::TableUpdate;
use uuid::Uuid;

use super::names;
use super::state::{EntryKind, StateChange, TableRecord};
use super::transaction::{Ddl, Transaction};
use super::transaction_external::Updated;
use crate::error::{Error, Result};
use crate::format::duckdb_types::DuckdbTypes;
use crate::format::metadata;
use crate::read::keys::KeyColumns;

/// A table as a client describes it.
pub struct NewTable {
    pub schema: Schema,
    pub spec: Option<UnboundPartitionSpec>,
    pub order: Option<SortOrder>,
    /// Where the client asks for it: only the lake's own place for it is taken.
    pub location: Option<String>,
    pub properties: HashMap<String, String>,
    /// The uuid a staged create answered with, which the client's commit assigns.
    pub uuid: Option<Uuid>,
}

impl NewTable {
    /// The table an `assert-create` commit's updates describe, and the updates that follow its
    /// creation (snapshots, refs), in their order.
    pub fn from_updates(shown: &str, updates: Vec<TableUpdate>) -> Result<(NewTable, Vec<TableUpdate>)> {
        let (mut schema, mut spec, mut order, mut location, mut uuid) = (None, None, None, None, None);
        let mut properties = HashMap::new();
        let mut rest = vec![];
        for update in updates {
            match update {
                TableUpdate::AssignUuid { uuid: u } => uuid = Some(u),
                TableUpdate::UpgradeFormatVersion { format_version } => check_version(shown, format_version)?,
                TableUpdate::AddSchema { schema: s } => schema = Some(s),
                TableUpdate::SetCurrentSchema { schema_id } => {
                    let added = schema.as_ref().map(|s: &Schema| s.schema_id());
                    if schema_id != -1 && Some(schema_id) != added {
                        return Err(Error::invalid(format!(
                            "table {shown}: the new table's current schema must be the one its commit adds, not \
                             {schema_id}"
                        )));
                    }
                }
                TableUpdate::AddSpec { spec: s } => spec = Some(s),
                TableUpdate::AddSortOrder { sort_order } => order = Some(sort_order),
                TableUpdate::SetDefaultSpec { .. } | TableUpdate::SetDefaultSortOrder { .. } => {}
                TableUpdate::SetLocation { location: l } => location = Some(l),
                TableUpdate::SetProperties { updates } => properties.extend(updates),
                TableUpdate::RemoveProperties { removals } => {
                    for key in removals {
                        properties.remove(&key);
                    }
                }
                other => rest.push(other),
            }
        }
        let schema = schema.ok_or_else(|| {
            Error::invalid(format!("table {shown}: a commit that creates a table must add its schema (add-schema)"))
        })?;
        Ok((NewTable { schema, spec, order, location, properties, uuid }, rest))
    }
}

/// skade writes v2 tables; v3 (row lineage, deletion vectors) is issue 46's.
fn check_version(shown: &str, version: FormatVersion) -> Result<()> {
    match version {
        FormatVersion::V2 => Ok(()),
        other => Err(Error::not_implemented(format!(
            "table {shown}: format version {other} is not served: a skade lake's tables are Iceberg v2"
        ))),
    }
}

impl Transaction {
    /// The metadata a table created over the protocol gets (what a staged create answers; it is
    /// written nowhere). Refuses what `CREATE TABLE` would: an existing name, a missing schema;
    /// and a location other than the lake's, a format version other than 2, skade's own
    /// properties, columns skade cannot read.
    pub fn new_external_table(&self, schema_name: &str, name: &str, new: NewTable) -> Result<TableMetadata> {
        self.check_writable()?;
        self.check_not_reserved(schema_name, &format!("create table {}", names::shown(name)))?;
        let location = names::table_location(self.catalog().data_path(), schema_name, name)?;
        let shown = names::table_shown(self.database(), schema_name, name);
        {
            let st = self.lock()?;
            if st.view.schema(schema_name).is_none() {
                return Err(Error::catalog(format!("namespace {} does not exist", names::shown(schema_name))));
            }
            if let Some(existing) = st.view.entry(schema_name, name) {
                return Err(Error::conflict(format!(
                    "{} {shown} already exists",
                    existing.kind.shown().to_lowercase()
                )));
            }
            if let Some(uuid) = new.uuid.filter(|u| st.view.table_by_uuid(&u.to_string()).is_some()) {
                return Err(Error::invalid(format!("table {shown}: uuid {uuid} is another table's")));
            }
        }
        if let Some(asked) = &new.location {
            if asked.trim_end_matches('/') != location {
                return Err(Error::invalid(format!(
                    "table {shown}: the lake places its tables itself ({location}), not at {asked}"
                )));
            }
        }
        let mut properties = new.properties;
        if let Some(version) = properties.remove("format-version") {
            if version.trim() != "2" {
                return Err(Error::not_implemented(format!(
                    "table {shown}: format version {version} is not served: a skade lake's tables are Iceberg v2"
                )));
            }
        }
        // (skade's own properties are skade's to set: a client echoing a staged answer sends them)
        properties.retain(|k, _| !k.starts_with(super::transaction_external::SKADE_PROPERTIES));
        let spec = new.spec.unwrap_or_else(|| UnboundPartitionSpec::builder().build());
        let order = new.order.unwrap_or_else(SortOrder::unsorted_order);
        let uuid = new.uuid.unwrap_or_else(Uuid::new_v4);
        let md = metadata::new_table_with(
            new.schema,
            spec,
            order,
            &location,
            uuid,
            &DuckdbTypes::default(),
            &[],
            properties,
        )
        .map_err(|e| Error::invalid(format!("table {shown}: {}", e.message)))?;
        // (what skade could not read or key, refused before anything is written)
        crate::format::schema::arrow_schema(md.current_schema())
            .map_err(|e| Error::invalid(format!("table {shown}: its columns cannot be read: {}", e.message)))?;
        KeyColumns::of(md.current_schema())
            .map_err(|e| Error::invalid(format!("table {shown}: its identifier fields: {}", e.message)))?;
        Ok(md)
    }

    /// Creates a table a client describes, in this transaction: it lands when the transaction
    /// commits, unless the name was taken meanwhile (a conflict).
    pub fn create_external_table(&self, schema_name: &str, name: &str, new: NewTable) -> Result<Updated> {
        let md = self.new_external_table(schema_name, name, new)?;
        self.create_with_metadata(schema_name, name, md)
    }

    /// A staged create's answer: the table's metadata, and its folders made on disk, where the
    /// client writes its files before its commit creates the table (DuckDB's iceberg extension
    /// makes no folder for a local path).
    pub fn stage_external_table(&self, schema_name: &str, name: &str, new: NewTable) -> Result<TableMetadata> {
        let md = self.new_external_table(schema_name, name, new)?;
        if !crate::io::object::is_object(md.location()) {
            for folder in ["metadata", "data"] {
                crate::io::create_dirs(&std::path::Path::new(md.location()).join(folder))?;
            }
        }
        Ok(md)
    }

    fn create_with_metadata(&self, schema_name: &str, name: &str, md: TableMetadata) -> Result<Updated> {
        let stored_schema = self
            .schema(schema_name)?
            .map(|s| s.name.clone())
            .ok_or_else(|| Error::catalog(format!("namespace {} does not exist", names::shown(schema_name))))?;
        let md_location = metadata::metadata_location(md.location(), 0);
        let inner = &self.catalog().inner;
        self.lock()?.written.push(md_location.clone());
        inner.metadata.write(&md_location, &md)?;
        let md = Arc::new(md);
        inner.metadata.insert(&md_location, md.clone());
        let record = TableRecord {
            schema: stored_schema,
            name: name.to_string(),
            uuid: md.uuid().to_string(),
            metadata_location: md_location.clone(),
            kind: EntryKind::Table,
        };
        let mut st = self.lock()?;
        Arc::make_mut(&mut st.view).apply(&StateChange::PutTable(record.clone()));
        st.ddl.push(Ddl::CreateTable(record));
        Ok(Updated { metadata_location: md_location, metadata: md })
    }

    /// An `assert-create` commit: the table its updates describe, created, then its snapshots
    /// applied. Snapshots a client wrote before the commit name the field ids the staged create
    /// answered with, which the created table must have.
    pub fn create_table_by_commit(&self, schema_name: &str, name: &str, updates: Vec<TableUpdate>) -> Result<Updated> {
        let shown = names::table_shown(self.database(), schema_name, name);
        let (new, rest) = NewTable::from_updates(&shown, updates)?;
        let sent = new.schema.clone();
        let sent_spec = new.spec.clone();
        let created = self.create_external_table(schema_name, name, new)?;
        if rest.is_empty() {
            return Ok(created);
        }
        let schema = created.metadata.current_schema();
        let same_spec = sent_spec.is_none_or(|s| {
            let fields = |f: &[iceberg::spec::UnboundPartitionField]| -> Vec<(i32, String)> {
                f.iter().map(|f| (f.source_id, f.transform.to_string())).collect()
            };
            let ours: Vec<(i32, String)> = created
                .metadata
                .default_partition_spec()
                .fields()
                .iter()
                .map(|f| (f.source_id, f.transform.to_string()))
                .collect();
            fields(s.fields()) == ours
        });
        if sent.as_struct() != schema.as_struct() || !same_spec {
            return Err(Error::invalid(format!(
                "table {shown}: the commit's schema or partition spec names other field ids than the table gets \
                 (create it staged first and write with the ids its answer gives)"
            )));
        }
        self.update_table(schema_name, name, &[], rest)
    }
}
