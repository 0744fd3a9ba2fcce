//! The in-memory mirror of the catalog: which schemas and tables exist and where each table's
//! current metadata.json is. Immutable once built; a commit publishes a new one, so a reader
//! (a transaction) holds a consistent view for as long as it likes.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::consumers::{ConsumerChange, ConsumerRecord};
use super::names::key;
use super::sinks::{SinkChange, SinkRecord};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchemaRecord {
    pub name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRecord {
    pub schema: String,
    pub name: String,
    /// The Iceberg table uuid: the table's identity, stable across renames, new after re-create.
    pub uuid: String,
    pub metadata_location: String,
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
    /// Named consumers by their name's key.
    pub consumers: BTreeMap<String, Arc<ConsumerRecord>>,
    /// Lineage sinks' cursors by sink name.
    pub sinks: BTreeMap<String, Arc<SinkRecord>>,
}

impl CatalogState {
    pub fn schema(&self, name: &str) -> Option<&Arc<SchemaRecord>> {
        self.schemas.get(&key(name))
    }

    pub fn table(&self, schema: &str, name: &str) -> Option<&Arc<TableRecord>> {
        self.tables.get(&(key(schema), key(name)))
    }

    pub fn table_by_uuid(&self, uuid: &str) -> Option<&Arc<TableRecord>> {
        self.tables.values().find(|t| t.uuid == uuid)
    }

    pub fn tables_in(&self, schema: &str) -> impl Iterator<Item = &Arc<TableRecord>> {
        let k = key(schema);
        self.tables.range((k.clone(), String::new())..).take_while(move |((s, _), _)| *s == k).map(|(_, t)| t)
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
}
