//! The in-memory mirror of the catalog: which schemas, tables and macros exist and where each
//! table's current metadata.json is. Immutable once built; a commit publishes a new one, so a reader
//! (a transaction) holds a consistent view for as long as it likes.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::consumers::{ConsumerChange, ConsumerRecord};
use super::names::key;
use super::sinks::{SinkChange, SinkRecord};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct SchemaRecord {
    pub name: String,
    /// Properties other engines set on the namespace (the Iceberg REST protocol's); DuckDB
    /// keeps none. (Absent from records written before there were any.)
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub properties: std::collections::BTreeMap<String, String>,
}

impl SchemaRecord {
    pub fn named(name: &str) -> SchemaRecord {
        SchemaRecord { name: name.to_string(), properties: Default::default() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRecord {
    pub schema: String,
    pub name: String,
    /// The Iceberg table uuid: the table's identity, stable across renames, new after re-create.
    pub uuid: String,
    pub metadata_location: String,
    /// A table or a view: they share one namespace (as in DuckDB and Iceberg's REST catalog), so
    /// one record type holds both; a view's pointer is its Iceberg view metadata file. Absent in
    /// records of tables (files written before views existed read as tables).
    #[serde(default, skip_serializing_if = "EntryKind::is_table")]
    pub kind: EntryKind,
}

/// What a catalog entry of the table namespace is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EntryKind {
    #[default]
    Table,
    View,
}

impl EntryKind {
    pub fn is_table(&self) -> bool {
        *self == EntryKind::Table
    }

    /// As DuckDB's messages name it ("Table", "View").
    pub fn shown(&self) -> &'static str {
        match self {
            EntryKind::Table => "Table",
            EntryKind::View => "View",
        }
    }

    /// DuckDB's error for a statement about `wanted` that names an entry of this kind (DROP
    /// TABLE of a view, CREATE OR REPLACE VIEW over a table).
    pub fn mismatch(&self, name: &str, doing: &str, wanted: EntryKind) -> crate::error::Error {
        crate::error::Error::catalog(format!(
            "Existing object {name} is of type {}, trying to {doing} type {}",
            self.shown(),
            wanted.shown()
        ))
    }

    /// The commit-log operation of creating, dropping or renaming an entry of this kind.
    pub fn operation(&self, verb: &str) -> String {
        match self {
            EntryKind::Table => format!("{verb}_table"),
            EntryKind::View => format!("{verb}_view"),
        }
    }
}

/// A DuckDB macro (CREATE MACRO): Iceberg has none, so this record is all there is of one. It
/// keeps the statement DuckDB prints for the macro, which DuckDB parses back when the macro is
/// called (docs/design/catalog-surface.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MacroRecord {
    pub schema: String,
    pub name: String,
    pub kind: MacroKind,
    /// `CREATE MACRO name(params) AS body[, (params) AS body ...];` as DuckDB prints it (its
    /// `CreateMacroInfo::ToString`), the name unqualified: the catalog's name is the ATTACH's.
    pub sql: String,
}

/// A scalar macro or a table macro (`AS TABLE`): DuckDB keeps them in two namespaces (a scalar
/// macro and a table macro may share a name), and so does the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MacroKind {
    Scalar,
    Table,
}

impl MacroKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            MacroKind::Scalar => "scalar",
            MacroKind::Table => "table",
        }
    }

    pub fn parse(text: &str) -> Option<MacroKind> {
        match text {
            "scalar" => Some(MacroKind::Scalar),
            "table" => Some(MacroKind::Table),
            _ => None,
        }
    }

    /// As DuckDB's messages name it.
    pub fn shown(&self) -> &'static str {
        match self {
            MacroKind::Scalar => "Macro Function",
            MacroKind::Table => "Table Macro Function",
        }
    }
}

/// A macro's place: (schema key, kind, name key).
pub type MacroKey = (String, MacroKind, String);

impl MacroRecord {
    pub fn key(&self) -> MacroKey {
        (key(&self.schema), self.kind, key(&self.name))
    }

    /// The change that drops this macro.
    pub fn dropped(&self) -> StateChange {
        StateChange::DropMacro { schema: self.schema.clone(), kind: self.kind, name: self.name.clone() }
    }
}

impl TableRecord {
    pub fn key(&self) -> (String, String) {
        (key(&self.schema), key(&self.name))
    }
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }
}

#[derive(Debug, Clone, Default)]
pub struct CatalogState {
    pub schemas: BTreeMap<String, Arc<SchemaRecord>>,
    pub tables: BTreeMap<(String, String), Arc<TableRecord>>,
    pub macros: BTreeMap<MacroKey, Arc<MacroRecord>>,
    /// Named consumers by their name's key.
    pub consumers: BTreeMap<String, Arc<ConsumerRecord>>,
    /// Lineage sinks' cursors by sink name.
    pub sinks: BTreeMap<String, Arc<SinkRecord>>,
}

impl CatalogState {
    pub fn schema(&self, name: &str) -> Option<&Arc<SchemaRecord>> {
        self.schemas.get(&key(name))
    }

    /// The table or view of that name.
    pub fn entry(&self, schema: &str, name: &str) -> Option<&Arc<TableRecord>> {
        self.tables.get(&(key(schema), key(name)))
    }

    /// The table of that name (not a view).
    pub fn table(&self, schema: &str, name: &str) -> Option<&Arc<TableRecord>> {
        self.entry(schema, name).filter(|t| t.kind.is_table())
    }

    /// The view of that name.
    pub fn view(&self, schema: &str, name: &str) -> Option<&Arc<TableRecord>> {
        self.entry(schema, name).filter(|t| t.kind == EntryKind::View)
    }

    /// The table whose uuid this is (never a view).
    pub fn table_by_uuid(&self, uuid: &str) -> Option<&Arc<TableRecord>> {
        self.tables.values().find(|t| t.uuid == uuid && t.kind.is_table())
    }

    /// The tables and views of a schema.
    pub fn entries_in(&self, schema: &str) -> impl Iterator<Item = &Arc<TableRecord>> {
        let k = key(schema);
        self.tables.range((k.clone(), String::new())..).take_while(move |((s, _), _)| *s == k).map(|(_, t)| t)
    }

    /// The tables of a schema (not its views).
    pub fn tables_in(&self, schema: &str) -> impl Iterator<Item = &Arc<TableRecord>> {
        self.entries_in(schema).filter(|t| t.kind.is_table())
    }

    /// The views of a schema.
    pub fn views_in(&self, schema: &str) -> impl Iterator<Item = &Arc<TableRecord>> {
        self.entries_in(schema).filter(|t| t.kind == EntryKind::View)
    }

    /// The macro of that kind and name.
    pub fn find_macro(&self, schema: &str, kind: MacroKind, name: &str) -> Option<&Arc<MacroRecord>> {
        self.macros.get(&(key(schema), kind, key(name)))
    }

    /// The macros of a schema, of both kinds.
    pub fn macros_in(&self, schema: &str) -> impl Iterator<Item = &Arc<MacroRecord>> {
        let k = key(schema);
        let from = (k.clone(), MacroKind::Scalar, String::new());
        self.macros.range(from..).take_while(move |((s, _, _), _)| *s == k).map(|(_, m)| m)
    }

    /// The name of a table a consumer follows as it is now (renamed since: the new name), the
    /// recorded one for a table gone.
    pub fn name_of(&self, table: &super::consumers::ConsumedTable) -> String {
        self.table_by_uuid(&table.uuid).map(|t| t.qualified_name()).unwrap_or_else(|| table.qualified_name())
    }

    pub fn consumer(&self, name: &str) -> Option<&Arc<ConsumerRecord>> {
        self.consumers.get(&key(name))
    }

    /// Applies one committed change to a consumer.
    pub fn apply_consumer(&mut self, change: &ConsumerChange) {
        match change.applied(self.consumers.get(&change.key).map(|c| c.as_ref())) {
            Some(record) => self.consumers.insert(change.key.clone(), Arc::new(record)),
            None => self.consumers.remove(&change.key),
        };
    }

    /// Applies one committed change to a lineage sink's cursor.
    pub fn apply_sink(&mut self, change: &SinkChange) {
        self.sinks.insert(change.name.clone(), Arc::new(change.record.clone()));
    }

    /// Applies one committed (or staged) change.
    pub fn apply(&mut self, change: &StateChange) {
        match change {
            StateChange::PutSchema(s) => {
                self.schemas.insert(key(&s.name), Arc::new(s.clone()));
            }
            StateChange::DropSchema(name) => {
                self.schemas.remove(&key(name));
            }
            StateChange::PutTable(t) => {
                self.tables.insert(t.key(), Arc::new(t.clone()));
            }
            StateChange::DropTable { schema, name } => {
                self.tables.remove(&(key(schema), key(name)));
            }
            StateChange::PutMacro(m) => {
                self.macros.insert(m.key(), Arc::new(m.clone()));
            }
            StateChange::DropMacro { schema, kind, name } => {
                self.macros.remove(&(key(schema), *kind, key(name)));
            }
        }
    }
}

/// A change to the catalog's pointers, as staged by a transaction and applied by a commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StateChange {
    PutSchema(SchemaRecord),
    DropSchema(String),
    PutTable(TableRecord),
    DropTable { schema: String, name: String },
    PutMacro(MacroRecord),
    DropMacro { schema: String, kind: MacroKind, name: String },
}
