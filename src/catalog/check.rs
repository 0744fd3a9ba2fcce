//! `skade_check`: reads every record of a catalog file (consumers, lineage sinks and macros included) and the metadata file of every table it
//! names, reporting what is damaged instead of stopping at the first problem. Each redb table is
//! read in an access of its own (a damaged page panics inside redb; the store turns that into an
//! error), so damage in one does not hide the state of the others. Nothing is written or repaired.

use redb::{ReadTransaction, ReadableTable, ReadableTableMetadata, TableDefinition, TableHandle};

use super::consumers::ConsumerRecord;
use super::open::Catalog;
use super::sinks::SinkRecord;
use super::state::{EntryKind, MacroRecord, SchemaRecord, TableRecord};
use super::store::{CommitRecord, Store};
use super::tables::{
    COMMITS, COMMIT_LOG, COMMIT_SEQ, CONSUMERS, COUNTERS, LINEAGE_SINKS, MACROS, META, SCHEMAS, TABLES,
};
use crate::error::{Error, Result};

/// One part of the catalog and what is wrong with it (None: nothing found).
pub struct Finding {
    pub part: String,
    pub problem: Option<String>,
}

impl Catalog {
    /// Checks the catalog file and every table's current metadata file.
    pub fn check(&self) -> Result<Vec<Finding>> {
        self.inner.usable_store()?;
        let store = &self.inner.store;
        let mut findings = vec![];
        let mut part = |part: &str, result: Result<()>| {
            findings.push(Finding { part: part.to_string(), problem: result.err().map(|e| e.message) });
        };
        part("meta", store.read(|tx| each_row(store, tx, META, |_, _| Ok(()))));
        part("counters", store.read(|tx| each_row(store, tx, COUNTERS, |_, _| Ok(()))));
        part(
            "schemas",
            store.read(|tx| {
                each_row(store, tx, SCHEMAS, |k, v| {
                    store.parse::<SchemaRecord>(v, || format!("schemas row \"{k}\"")).map(drop)
                })
            }),
        );
        let mut tables: Vec<TableRecord> = vec![];
        part(
            "tables",
            store.read(|tx| {
                each_row(store, tx, TABLES, |(s, t), v| {
                    tables.push(store.parse(v, || format!("tables row \"{s}.{t}\""))?);
                    Ok(())
                })
            }),
        );
        part("commits", store.read(|tx| each_row(store, tx, COMMITS, |_, _| Ok(()))));
        part(
            "commit_log",
            store.read(|tx| {
                // the counter in the same read as the log: a commit between two reads is no damage
                let seq = tx.open_table(COUNTERS)?.get(COMMIT_SEQ)?.map(|v| v.value());
                let mut expected = 1u64;
                each_row(store, tx, COMMIT_LOG, |k, v| {
                    let record: CommitRecord = store.parse(v, || format!("commit_log row {k}"))?;
                    if k != expected || record.seq != k {
                        return Err(store.corrupt(&format!("its commit log skips from {} to {k}", expected - 1)));
                    }
                    expected += 1;
                    Ok(())
                })?;
                match seq {
                    Some(seq) if seq != expected - 1 => Err(store.corrupt(&format!(
                        "its commit log ends at {} but its commit_seq counter is {seq}",
                        expected - 1
                    ))),
                    _ => Ok(()),
                }
            }),
        );
        // (a file from before consumers, read unmigrated, has no consumers table; one no lineage
        // sink ever delivered from has no lineage_sinks table, one without macros no macros
        // table: nothing to check)
        let present = store.read(|tx| Ok(tx.list_tables()?.map(|t| t.name().to_string()).collect::<Vec<_>>()))?;
        if present.iter().any(|t| t == CONSUMERS.name()) {
            part("consumers", store.read(|tx| records::<ConsumerRecord>(store, tx, CONSUMERS)));
        }
        if present.iter().any(|t| t == LINEAGE_SINKS.name()) {
            part("lineage_sinks", store.read(|tx| records::<SinkRecord>(store, tx, LINEAGE_SINKS)));
        }
        if present.iter().any(|t| t == MACROS.name()) {
            part(
                "macros",
                store.read(|tx| {
                    each_row(store, tx, MACROS, |(s, _, n), v| {
                        store.parse::<MacroRecord>(v, || format!("macros row \"{s}.{n}\"")).map(drop)
                    })
                }),
            );
        }
        for table in tables {
            let loaded = match table.kind {
                EntryKind::Table => self.table_there(&table),
                EntryKind::View => crate::format::view::read(&table.metadata_location).map(drop),
            };
            findings.push(Finding {
                part: format!("{} {}", table.kind.shown().to_lowercase(), table.qualified_name()),
                problem: loaded.err().map(|e| e.message),
            });
        }
        Ok(findings)
    }
}

impl Catalog {
    /// Whether the table's current metadata and every file its current snapshot reads are there.
    /// A file found missing while the table moved on (another connection or host compacted and
    /// expired meanwhile) is no damage: the table is looked at again, at its new metadata.
    fn table_there(&self, table: &TableRecord) -> Result<()> {
        let mut location = table.metadata_location.clone();
        for _ in 0..3 {
            let found = self.inner.metadata.get(&location).and_then(|m| self.files_there(&m));
            if found.is_ok() {
                return found;
            }
            self.catch_up()?;
            let now = self.state().table(&table.schema, &table.name).map(|t| t.metadata_location.clone());
            match now {
                Some(now) if now != location => location = now,
                _ => return found,
            }
        }
        Ok(()) // (it kept moving: no damage seen at rest)
    }

    /// Whether every file the current snapshot of a table reads is there: its manifest list and
    /// manifests, and its data and delete files in the table's folder, found by listing the
    /// folders (1 LIST per 1,000 objects in a bucket, not a request per file). Files adopted from
    /// elsewhere (`skade_add_files`) are the user's and not looked for.
    fn files_there(&self, metadata: &iceberg::spec::TableMetadata) -> Result<()> {
        let Some(current) = metadata.current_snapshot() else { return Ok(()) };
        let location = metadata.location().trim_end_matches('/');
        let mut listed = std::collections::HashSet::new();
        for folder in ["data", "metadata"] {
            let found = crate::io::input::list_all(&format!("{location}/{folder}"))?;
            listed.extend(found.into_iter().map(|f| crate::io::local_path(&f.location).to_string()));
        }
        let caches = &self.inner.read_caches.manifests;
        let mut wanted = vec![current.manifest_list().to_string()];
        wanted.extend(caches.manifest_list(metadata, current)?.iter().map(|m| m.manifest_path.clone()));
        let files = caches.snapshot_files(metadata, current)?;
        wanted.extend(files.data.iter().chain(&files.deletes).map(|e| e.file().file_path().to_string()));
        let ours = format!("{}/", crate::io::local_path(location));
        let missing: Vec<&String> = wanted
            .iter()
            .filter(|f| crate::io::local_path(f).starts_with(&ours) && !listed.contains(crate::io::local_path(f)))
            .collect();
        match missing.first() {
            None => Ok(()),
            Some(first) => Err(Error::corrupt(format!(
                "{} file(s) its current snapshot reads are missing, among them {first}",
                missing.len()
            ))),
        }
    }
}

/// Parses every row of `table`, JSON records keyed by name, as a `T`.
fn records<T: serde::de::DeserializeOwned>(
    store: &Store,
    tx: &ReadTransaction,
    table: TableDefinition<&str, &[u8]>,
) -> Result<()> {
    each_row(store, tx, table, |k, v| store.parse::<T>(v, || format!("{table} row \"{k}\"")).map(drop))
}

/// Reads every row of `table`, handing each to `f` (keys as their values).
fn each_row<K: redb::Key + 'static, V: redb::Value + 'static>(
    store: &Store,
    tx: &ReadTransaction,
    table: redb::TableDefinition<K, V>,
    mut f: impl for<'a> FnMut(K::SelfType<'a>, V::SelfType<'a>) -> Result<()>,
) -> Result<()> {
    let t = tx.open_table(table)?;
    let expected = t.len()?;
    let mut n = 0;
    for row in t.iter()? {
        let (k, v) = row?;
        f(k.value(), v.value())?;
        n += 1;
    }
    if n != expected {
        return Err(store.corrupt(&format!("its {table} table holds {n} rows but counts {expected}")));
    }
    Ok(())
}
