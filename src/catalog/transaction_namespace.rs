//! A schema's properties, which other engines set on it as a namespace's (the Iceberg REST
//! protocol's `properties`; Spark's `DBPROPERTIES`). DuckDB keeps none, so they are kept for
//! those engines only, in the schema's record: a change is checked at commit against the
//! record read (a concurrent change or drop is a conflict).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::names;
use super::state::{SchemaRecord, StateChange};
use super::transaction::{Ddl, Transaction};
use crate::error::{Error, Result};

/// What a change of properties did, as the protocol answers it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PropertiesChanged {
    pub updated: Vec<String>,
    pub removed: Vec<String>,
    /// Removals of properties the schema did not have.
    pub missing: Vec<String>,
}

impl Transaction {
    /// Sets `updates` and removes `removals` on schema `name`'s properties.
    pub fn alter_schema_properties(
        &self,
        name: &str,
        updates: BTreeMap<String, String>,
        removals: Vec<String>,
    ) -> Result<PropertiesChanged> {
        self.check_writable()?;
        self.check_not_reserved(name, &format!("change the properties of schema {}", names::shown(name)))?;
        if let Some(both) = removals.iter().find(|k| updates.contains_key(*k)) {
            return Err(Error::invalid(format!("property {} is both set and removed", names::shown(both))));
        }
        let mut st = self.lock()?;
        let before = st
            .view
            .schema(name)
            .cloned()
            .ok_or_else(|| Error::catalog(format!("namespace {} does not exist", names::shown(name))))?;
        let mut after = SchemaRecord::clone(&before);
        let mut changed = PropertiesChanged::default();
        for key in removals {
            match after.properties.remove(&key) {
                Some(_) => changed.removed.push(key),
                None => changed.missing.push(key),
            }
        }
        for (key, value) in updates {
            after.properties.insert(key.clone(), value);
            changed.updated.push(key);
        }
        if after != *before {
            Arc::make_mut(&mut st.view).apply(&StateChange::PutSchema(after.clone()));
            st.ddl.push(Ddl::AlterSchema { before, after });
        }
        Ok(changed)
    }
}
