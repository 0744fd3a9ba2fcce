//! Macros within a transaction (issue 43). Iceberg has no macros, so a macro is a catalog record
//! only (`state::MacroRecord`: the CREATE MACRO statement DuckDB prints for it), created, replaced
//! and dropped as DDL of the transaction and committed with the rest of it; each is one commit
//! (`create_macro`, `replace_macro`, `drop_macro` in the commit feed) and no lineage event, since
//! a macro holds no rows. Scalar and table macros are two namespaces, as in DuckDB, and neither is
//! the namespace of tables and views.

use std::sync::Arc;

use super::names;
use super::state::StateChange;
pub use super::state::{MacroKind, MacroRecord};
use super::transaction::{Ddl, OnConflict, Transaction};
use crate::error::{Error, Result};

impl Transaction {
    /// The macros of a schema, both kinds.
    pub fn macros(&self, schema: &str) -> Result<Vec<Arc<MacroRecord>>> {
        Ok(self.lock()?.view.macros_in(schema).cloned().collect())
    }

    /// CREATE [OR REPLACE] MACRO: `sql` the statement as DuckDB prints it. False when the macro
    /// existed and `on_conflict` is Ignore.
    pub fn create_macro(
        &self,
        schema_name: &str,
        name: &str,
        kind: MacroKind,
        sql: &str,
        on_conflict: OnConflict,
    ) -> Result<bool> {
        self.check_writable()?;
        self.check_not_reserved(schema_name, &format!("create macro {}", names::shown(name)))?;
        let mut st = self.lock()?;
        let Some(schema) = st.view.schema(schema_name) else {
            return Err(Error::catalog(format!("Schema with name \"{schema_name}\" does not exist!")));
        };
        let after = MacroRecord { schema: schema.name.clone(), name: name.to_string(), kind, sql: sql.to_string() };
        let before = st.view.find_macro(schema_name, kind, name).cloned();
        if let Some(existing) = &before {
            match on_conflict {
                OnConflict::Ignore => return Ok(false),
                OnConflict::Error => {
                    return Err(Error::catalog(format!(
                        "{} with name \"{}\" already exists!",
                        kind.shown(),
                        existing.name
                    )))
                }
                OnConflict::Replace => {}
            }
        }
        Arc::make_mut(&mut st.view).apply(&StateChange::PutMacro(after.clone()));
        st.ddl.push(Ddl::PutMacro { before, after });
        Ok(true)
    }

    /// DROP MACRO [TABLE].
    pub fn drop_macro(&self, schema: &str, name: &str, kind: MacroKind, if_exists: bool) -> Result<()> {
        self.check_writable()?;
        self.check_not_reserved(schema, &format!("drop macro {}", names::shown(name)))?;
        let mut st = self.lock()?;
        match st.view.find_macro(schema, kind, name).cloned() {
            Some(m) => {
                Self::stage_drop_macro(&mut st, m);
                Ok(())
            }
            None if if_exists => Ok(()),
            None => Err(Error::catalog(format!("{} with name {name} does not exist!", kind.shown()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::options::AttachOptions;
    use crate::catalog::Catalog;

    fn catalog(dir: &std::path::Path) -> Catalog {
        Catalog::open(&dir.join("lake.skade"), AttachOptions::default()).unwrap()
    }

    #[test]
    fn macros_commit_roll_back_and_survive_a_reopen() {
        let dir = std::env::temp_dir().join(format!("skade-macros-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let cat = catalog(&dir);
        let txn = cat.begin();
        assert!(txn
            .create_macro("main", "m", MacroKind::Scalar, "CREATE MACRO m(a) AS a;", OnConflict::Error)
            .unwrap());
        // another namespace: a table macro of the same name
        assert!(txn
            .create_macro("MAIN", "M", MacroKind::Table, "CREATE MACRO M() AS TABLE SELECT 1;", OnConflict::Error)
            .unwrap());
        let e = txn.create_macro("main", "M", MacroKind::Scalar, "x", OnConflict::Error).unwrap_err();
        assert_eq!(e.message, "Macro Function with name \"m\" already exists!");
        assert!(!txn.create_macro("main", "m", MacroKind::Scalar, "x", OnConflict::Ignore).unwrap());
        let records = txn.commit().unwrap();
        assert_eq!(records.iter().map(|r| r.operation.as_str()).collect::<Vec<_>>(), ["create_macro", "create_macro"]);

        // a rollback leaves nothing
        let txn = cat.begin();
        txn.drop_macro("main", "m", MacroKind::Scalar, false).unwrap();
        txn.create_macro("main", "n", MacroKind::Scalar, "CREATE MACRO n() AS 1;", OnConflict::Error).unwrap();
        txn.rollback();
        let txn = cat.begin();
        let names: Vec<String> =
            txn.macros("main").unwrap().iter().map(|m| format!("{:?} {}", m.kind, m.name)).collect();
        assert_eq!(names, ["Scalar m", "Table M"]);

        txn.create_macro("main", "m", MacroKind::Scalar, "CREATE MACRO m(a) AS (a + 1);", OnConflict::Replace).unwrap();
        let e = txn.drop_macro("main", "nope", MacroKind::Table, false).unwrap_err();
        assert_eq!(e.message, "Table Macro Function with name nope does not exist!");
        txn.drop_macro("main", "nope", MacroKind::Table, true).unwrap();
        txn.create_schema("s", false).unwrap();
        txn.create_macro("s", "sm", MacroKind::Scalar, "CREATE MACRO sm() AS 1;", OnConflict::Error).unwrap();
        let records = txn.commit().unwrap();
        assert_eq!(
            records.iter().map(|r| r.operation.as_str()).collect::<Vec<_>>(),
            ["replace_macro", "create_schema", "create_macro"]
        );

        // a schema holding a macro is dropped with CASCADE only
        let txn = cat.begin();
        let e = txn.drop_schema("s", false, false).unwrap_err();
        assert!(
            e.message.contains("still holds 1 table(s), view(s) or macro(s) (for example \"sm\")"),
            "{}",
            e.message
        );
        txn.drop_schema("s", false, true).unwrap();
        let records = txn.commit().unwrap();
        assert_eq!(records.iter().map(|r| r.operation.as_str()).collect::<Vec<_>>(), ["drop_macro", "drop_schema"]);

        cat.detach().unwrap();
        drop(cat);
        let cat = catalog(&dir);
        let txn = cat.begin();
        let kept: Vec<String> = txn.macros("main").unwrap().iter().map(|m| m.sql.clone()).collect();
        assert_eq!(kept, ["CREATE MACRO m(a) AS (a + 1);", "CREATE MACRO M() AS TABLE SELECT 1;"]);
        assert!(txn.macros("s").unwrap().is_empty());
        drop(txn);
        cat.detach().unwrap();
        drop(cat);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
