//! Tables other engines create through the Iceberg REST protocol (issue 45,
//! docs/design/rest-catalog.md): a create request, or a commit asserting the table's absence
//! (`assert-create`, what a staged create ends in) whose updates describe the table. Either way
//! the table is built as `CREATE TABLE` builds one (skade's location, properties and field ids)
//! and created in this transaction; a commit's snapshots (CREATE TABLE AS) are then applied as
//! any client commit is, in the same skade commit.

use std::collections::HashMap;

use iceberg::spec::{FormatVersion, Schema, SortOrder, TableMetadata, UnboundPartitionSpec};
use iceberg::TableUpdate;
use uuid::Uuid;

use super::names;
use super::state::{EntryKind, TableRecord};
use super::transaction::Transaction;
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
    /// The uuid a staged create answered with, which the client's commit assigns: kept only
    /// when the caller vouches for it (`create_table_by_commit`), else a new one.
    pub uuid: Option<Uuid>,
    /// The format version an `assert-create` commit asks for (`upgrade-format-version`).
    pub version: Option<FormatVersion>,
}

impl NewTable {
    /// The table an `assert-create` commit's updates describe, and the updates that follow its
    /// creation (snapshots, refs), in their order.
    pub fn from_updates(shown: &str, updates: Vec<TableUpdate>) -> Result<(NewTable, Vec<TableUpdate>)> {
        let (mut schema, mut spec, mut order, mut location, mut uuid) = (None, None, None, None, None);
        let mut version = None;
        let mut properties = HashMap::new();
        let mut rest = vec![];
        for update in updates {
            match update {
                TableUpdate::AssignUuid { uuid: u } => uuid = Some(u),
                TableUpdate::UpgradeFormatVersion { format_version } => {
                    check_version(shown, format_version)?;
                    version = Some(format_version);
                }
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
        Ok((NewTable { schema, spec, order, location, properties, uuid, version }, rest))
    }
}

/// skade serves Iceberg v2 and v3 tables (v1 has no sequence numbers, which its commits need).
fn check_version(shown: &str, version: FormatVersion) -> Result<()> {
    match version {
        FormatVersion::V2 | FormatVersion::V3 => Ok(()),
        other => Err(Error::not_implemented(format!(
            "table {shown}: format version {} is not served over the REST protocol: tables created through it are \
             Iceberg v2 or v3",
            other as u8
        ))),
    }
}

impl Transaction {
    /// The metadata a table created over the protocol gets (what a staged create answers; it is
    /// written nowhere). Refuses what `CREATE TABLE` would: an existing name, a missing schema;
    /// and a location other than the lake's, a format version other than 2 or 3 (the client's,
    /// else the lake's), skade's own properties, columns skade cannot read.
    pub fn new_external_table(&self, schema_name: &str, name: &str, new: NewTable) -> Result<TableMetadata> {
        self.check_writable()?;
        self.check_not_reserved(schema_name, &format!("create table {}", names::shown(name)))?;
        let uuid = new.uuid.unwrap_or_else(Uuid::new_v4);
        // A folder of its own, named after its uuid: a table renamed or dropped leaves its files
        // in the folder of its name, which a client's snapshots must not be able to name.
        let location = format!(
            "{}-{}",
            names::table_location(self.catalog().data_path(), schema_name, name)?,
            &uuid.simple().to_string()[..12]
        );
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
            if st.view.table_by_uuid(&uuid.to_string()).is_some() {
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
        // The version the client asks for (a property, or its commit's upgrade), else the lake's
        // (ATTACH ... FORMAT_VERSION).
        let asked = match properties.remove("format-version").map(|v| v.trim().to_string()).as_deref() {
            None => None,
            Some("2") => Some(FormatVersion::V2),
            Some("3") => Some(FormatVersion::V3),
            Some(other) => {
                return Err(Error::not_implemented(format!(
                    "table {shown}: format version {other} is not served over the REST protocol: tables created \
                     through it are Iceberg v2 or v3"
                )))
            }
        };
        let version = new.version.or(asked).unwrap_or_else(|| self.catalog().format_version());
        // (skade's own properties are skade's to set: a client echoing a staged answer sends them)
        properties.retain(|k, _| !k.starts_with(super::transaction_external::SKADE_PROPERTIES));
        let spec = new.spec.unwrap_or_else(|| UnboundPartitionSpec::builder().build());
        let order = new.order.unwrap_or_else(SortOrder::unsorted_order);
        let md = metadata::new_table_with(
            new.schema,
            spec,
            order,
            &location,
            uuid,
            &DuckdbTypes::default(),
            &[],
            properties,
            version,
        )
        .map_err(|e| Error::invalid(format!("table {shown}: {}", e.message)))?;
        // (what skade could not read, show or key, refused before anything is written)
        crate::format::client_schema::check_table(&shown, &md)?;
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
        self.created(stored_schema, name, md_location, md)
    }

    /// An `assert-create` commit: the table its updates describe, created, then its snapshots
    /// applied. Snapshots a client wrote before the commit name the field ids the staged create
    /// answered with, which the created table must have.
    /// The uuid it assigns is kept when `staged_here` says the caller handed it out in a staged
    /// answer (once), else replaced (its location with it, so its snapshots would be refused).
    pub fn create_table_by_commit(
        &self,
        schema_name: &str,
        name: &str,
        updates: Vec<TableUpdate>,
        staged_here: impl FnOnce(Uuid) -> bool,
    ) -> Result<Updated> {
        let shown = names::table_shown(self.database(), schema_name, name);
        let (mut new, rest) = NewTable::from_updates(&shown, updates)?;
        new.uuid = new.uuid.filter(|u| staged_here(*u));
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

impl Transaction {
    /// Registers a table whose metadata file a client wrote (`POST .../register`): the file must
    /// lie in the lake's place for the table (`<data>/<schema>/<name>/metadata/`), describe a v2
    /// table located there with only a main branch, a uuid no other table has, columns skade can
    /// read, and snapshots whose every file lies under the location. Nothing is written: the
    /// table's pointer names the client's file, and skade's next commit writes the version after.
    pub fn register_table(&self, schema_name: &str, name: &str, metadata_location: &str) -> Result<Updated> {
        self.check_writable()?;
        self.check_not_reserved(schema_name, &format!("register table {}", names::shown(name)))?;
        let location = names::table_location(self.catalog().data_path(), schema_name, name)?;
        let shown = names::table_shown(self.database(), schema_name, name);
        let stored_schema = {
            let st = self.lock()?;
            let Some(schema) = st.view.schema(schema_name) else {
                return Err(Error::catalog(format!("namespace {} does not exist", names::shown(schema_name))));
            };
            if let Some(existing) = st.view.entry(schema_name, name) {
                return Err(Error::conflict(format!(
                    "{} {shown} already exists",
                    existing.kind.shown().to_lowercase()
                )));
            }
            // (a table renamed away keeps its files in the folder of its old name: a table
            // registered there could name them, and its expiry remove them)
            let inside = format!("{location}/");
            if let Some(other) = st.view.tables_in(schema_name).find(|t| t.metadata_location.starts_with(&inside)) {
                return Err(Error::invalid(format!(
                    "table {shown}: its folder {location} holds table {}'s files (renamed from this name)",
                    other.name
                )));
            }
            schema.name.clone()
        };
        let refused = |why: String| Error::invalid(format!("table {shown}: {why}"));
        let folder = format!("{location}/metadata/");
        let file = metadata_location.strip_prefix(&folder).unwrap_or("");
        if file.is_empty() || file.contains('/') || !file.ends_with(".metadata.json") || file.starts_with('.') {
            return Err(refused(format!(
                "a table registered here has its metadata file in {folder} (a <name>.metadata.json), not \
                 {metadata_location}"
            )));
        }
        self.real_table_folder(&shown, &location)?;
        if !crate::io::object::is_object(&location) {
            let real = crate::io::canonical(metadata_location)
                .map_err(|e| refused(format!("cannot read {metadata_location}: {}", e.message)))?;
            let real_folder = crate::io::canonical(&format!("{location}/metadata"))?;
            if std::path::Path::new(&real).parent() != Some(std::path::Path::new(&real_folder)) {
                return Err(refused(format!("{metadata_location} leads to {real}, outside the table's location")));
            }
        }
        // (read afresh, never from the cache: the client may have rewritten the file since an
        // earlier attempt; the table will name skade's own copy of what was checked)
        let md = metadata::read(metadata_location)
            .map_err(|e| refused(format!("cannot read {metadata_location}: {}", e.message)))?;
        if md.location().trim_end_matches('/') != location {
            return Err(refused(format!("its metadata places it at {}, not at {location}", md.location())));
        }
        if md.format_version() != FormatVersion::V2 {
            // (a v3 table's row ranges would have to be checked as a commit's are)
            return Err(Error::not_implemented(format!(
                "table {shown}: registering an Iceberg {} table is not served yet; tables registered through the \
                 REST protocol are Iceberg v2",
                md.format_version()
            )));
        }
        // (skade keeps the main branch only: a snapshot off its line would belong to another)
        let mut on_main = std::collections::HashSet::new();
        let mut at = md.current_snapshot();
        while let Some(snapshot) = at {
            on_main.insert(snapshot.snapshot_id());
            at = snapshot.parent_snapshot_id().and_then(|p| md.snapshot_by_id(p));
        }
        if let Some(other) = md.snapshots().find(|s| !on_main.contains(&s.snapshot_id())) {
            return Err(Error::not_implemented(format!(
                "table {shown}: snapshot {} is not on the main branch's line: a table with other branches is not \
                 served yet",
                other.snapshot_id()
            )));
        }
        if self.lock()?.view.table_by_uuid(&md.uuid().to_string()).is_some() {
            return Err(refused(format!("uuid {} is another table's", md.uuid())));
        }
        crate::format::client_schema::check_table(&shown, &md)?;
        crate::format::schema::arrow_schema(md.current_schema())
            .map_err(|e| refused(format!("its columns cannot be read: {}", e.message)))?;
        let key = KeyColumns::of(md.current_schema())
            .map_err(|e| refused(format!("its identifier fields: {}", e.message)))?;
        // (expiry removes the files of the metadata log and statistics it trims: all the table's own)
        let own = |path: &str| {
            path.strip_prefix(&format!("{location}/"))
                .is_some_and(|rest| rest.split('/').all(|part| !matches!(part, "" | "." | "..")))
        };
        let logged = md.metadata_log().iter().map(|l| l.metadata_file.as_str());
        let statistics = md.statistics_iter().map(|s| s.statistics_path.as_str());
        let partition_statistics = md.partition_statistics_iter().map(|s| s.statistics_path.as_str());
        if let Some(path) = logged.chain(statistics).chain(partition_statistics).find(|p| !own(p)) {
            return Err(refused(format!("its metadata names {path}, which is not under the table's location")));
        }
        let now_ms = chrono::Utc::now().timestamp_millis();
        if let Some(s) = md.snapshots().find(|s| s.timestamp_ms() > now_ms + 60_000) {
            return Err(refused(format!("snapshot {} is stamped in the future", s.snapshot_id())));
        }
        // (skade allocates its snapshot ids counting up, lake-wide: a registered table's ids in
        // that range must lie below the next, or one of skade's commits could reuse one)
        let next_id = self.catalog().allocate_snapshot_id()?;
        for snapshot in md.snapshots() {
            let id = snapshot.snapshot_id();
            if id >= next_id && id < super::transaction_external::CLIENT_SNAPSHOT_IDS {
                return Err(refused(format!(
                    "snapshot id {id} lies in the range this lake allocates its own from (the next is {next_id})"
                )));
            }
            self.check_snapshot_files(&shown, &md, snapshot, true)?;
        }
        // its rows as skade's own checks hold them: the key, and the DuckDB types it keeps
        if let Some(key) = key {
            self.check_client_keys(&shown, &md, &key)?;
        }
        let every: Vec<i64> = md.snapshots().map(|s| s.snapshot_id()).collect();
        self.check_client_values(&shown, &md, &every)?;
        // the table names skade's copy of the file checked (a metadata file is never rewritten;
        // the client's stays the client's)
        let copy = metadata::metadata_location(&location, metadata::next_version(metadata_location));
        self.created(stored_schema, name, copy, md)
    }

    /// A table of `schema` named `name` whose metadata `md` is written at `md_location`, staged.
    fn created(&self, schema: String, name: &str, md_location: String, md: TableMetadata) -> Result<Updated> {
        let md = self.write_metadata(&md_location, md)?;
        let uuid = md.uuid().to_string();
        let kind = EntryKind::Table;
        let record = TableRecord { schema, name: name.to_string(), uuid, metadata_location: md_location.clone(), kind };
        self.stage_created(record)?;
        Ok(Updated { metadata_location: md_location, metadata: md })
    }
}
