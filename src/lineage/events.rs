//! The event model: one event per committed transaction that changed a table, built from its
//! commit-log records (a transaction's records share `transaction`, or it has one record).

use std::collections::BTreeMap;

use crate::catalog::names::{is_reserved, table_location};
use crate::catalog::store::{ColumnRecord, CommitRecord, InputRecord};
use crate::catalog::Catalog;
use crate::error::Result;
use crate::format::evolve::ALTER_OPERATIONS;

/// What a transaction did to its outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Append,
    Delete,
    Overwrite,
    Create,
    Drop,
    /// ALTER TABLE: a table's columns or name changed (no rows).
    Alter,
    /// A transaction that changed several tables at once.
    Release,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Append => "APPEND",
            Operation::Delete => "DELETE",
            Operation::Overwrite => "OVERWRITE",
            Operation::Create => "CREATE",
            Operation::Drop => "DROP",
            Operation::Alter => "ALTER",
            Operation::Release => "RELEASE",
        }
    }
}

/// A dataset, named as OpenLineage names it (a table of this catalog as Spark's Iceberg
/// integration does: namespace `file`, name its location), with the table name for a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetRef {
    pub namespace: String,
    pub name: String,
    /// `schema.table` for a table of this catalog or another skade catalog.
    pub table: Option<String>,
    /// Whether it is a table of this catalog (its catalog and symlinks facets).
    pub this_catalog: bool,
    pub snapshot_id: Option<i64>,
    /// A skade table's metadata.json: an output's after the commit (its schema and snapshot
    /// summary), an input's as it was read.
    pub metadata_location: Option<String>,
    /// The columns of a table of another DuckDB database (its schema facet).
    pub columns: Vec<ColumnRecord>,
    /// What the commit did to the dataset's existence (OpenLineage's lifecycle states).
    pub lifecycle: Option<Lifecycle>,
}

/// A change to a dataset's existence, as OpenLineage's `lifecycleStateChange` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lifecycle {
    Create,
    Drop,
    /// Replaced by a new table of the same name (CREATE OR REPLACE).
    Overwrite,
    /// Its columns or its name changed (ALTER TABLE; its location, the dataset's name, stays).
    Alter,
}

impl Lifecycle {
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Create => "CREATE",
            Lifecycle::Drop => "DROP",
            Lifecycle::Overwrite => "OVERWRITE",
            Lifecycle::Alter => "ALTER",
        }
    }
}

/// One committed transaction's lineage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineageEvent {
    /// The commit_seq range of its records (first == last for a one-table transaction).
    pub first_seq: u64,
    pub last_seq: u64,
    pub committed_at_us: i64,
    pub actor: String,
    pub operation: Operation,
    pub inputs: Vec<DatasetRef>,
    pub outputs: Vec<DatasetRef>,
}

/// The events of the commits after `since`, at most `limit` commit records' worth (a
/// transaction cut by the limit comes whole), and the last commit_seq read (None: none after
/// `since`). Schema and macro DDL and maintenance (compaction, expiry) change no dataset's rows or
/// shape: they make no event.
pub fn since(catalog: &Catalog, since: u64, limit: usize) -> Result<(Vec<LineageEvent>, Option<u64>)> {
    let mut records = catalog.commits_since(since, limit)?;
    // complete a transaction the page cut
    while let Some(last) = records.last() {
        let Some(t) = last.transaction else { break };
        let more = catalog.commits_since(last.seq, 1)?;
        match more.into_iter().next() {
            Some(r) if r.transaction == Some(t) => records.push(r),
            _ => break,
        }
    }
    let read = records.last().map(|r| r.seq);
    // records of a transaction that began at or before `since` belong to an event before it
    records.retain(|r| r.transaction.is_none_or(|t| t > since));
    let mut events = vec![];
    let mut group: Vec<CommitRecord> = vec![];
    for r in records {
        if group.last().is_some_and(|g| g.transaction.is_none() || g.transaction != r.transaction) {
            events.extend(event(catalog, &std::mem::take(&mut group)));
        }
        group.push(r);
    }
    events.extend(event(catalog, &group));
    Ok((events, read))
}

/// The event of one transaction's records, if it changed a table.
/// What one transaction did to one table (one uuid).
struct Touched {
    dataset: DatasetRef,
    operation: Operation,
    created: bool,
    dropped: bool,
    /// ALTERed (its columns or name), by this transaction.
    altered: bool,
    uuids: Vec<String>,
}

fn event(catalog: &Catalog, records: &[CommitRecord]) -> Option<LineageEvent> {
    let (first, last) = (records.first()?, records.last()?);
    let mut by_uuid: BTreeMap<String, Touched> = BTreeMap::new();
    for r in records {
        let (Some(table), Some(uuid)) = (r.table.as_deref(), r.table_uuid.as_deref()) else {
            continue; // a schema's or a macro's DDL (a macro holds no rows: no dataset)
        };
        if is_reserved(&r.schema) {
            continue; // the lineage history itself: writing it is no event
        }
        let op = match r.operation.as_str() {
            "create_table" | "create_view" => Operation::Create,
            "drop_table" | "drop_view" => Operation::Drop,
            "rename_view" | "replace_view" | "comment_view" => Operation::Alter,
            "append" => Operation::Append,
            "delete" => Operation::Delete,
            "overwrite" => Operation::Overwrite,
            op if ALTER_OPERATIONS.contains(&op) => Operation::Alter,
            _ => continue, // compaction (replace), expiry
        };
        let mut dataset = own_dataset(catalog, &r.schema, table, r.snapshot_id);
        dataset.metadata_location = r.metadata_location.clone();
        if let Some(location) = r.metadata_location.as_deref().and_then(table_location_of) {
            // (a renamed table's files stay where they were; a bucket's key is the name)
            dataset.name = match crate::io::object::split(&location) {
                Ok((_, key)) => key.to_string(),
                Err(_) => location,
            };
        }
        let t = by_uuid.entry(uuid.to_string()).or_insert_with(|| Touched {
            dataset: dataset.clone(),
            operation: op,
            created: false,
            dropped: false,
            altered: false,
            uuids: vec![uuid.to_string()],
        });
        // CREATE TABLE ... AS: created with rows; a later snapshot names the version
        if dataset.snapshot_id.is_some() {
            t.dataset.snapshot_id = dataset.snapshot_id;
        }
        if op == Operation::Alter {
            t.dataset.table = dataset.table.clone(); // RENAME TO: the name it has now
            t.altered = true;
        }
        if dataset.metadata_location.is_some() {
            t.dataset.metadata_location = dataset.metadata_location;
        }
        t.created |= op == Operation::Create;
        t.dropped |= op == Operation::Drop;
        if !matches!(t.operation, Operation::Create | Operation::Drop) || op == Operation::Drop {
            t.operation = op;
        }
    }
    // A table created and dropped within the transaction never existed outside it; one dropped
    // and created again under its name (CREATE OR REPLACE) is that name overwritten.
    let mut by_name: BTreeMap<(Option<String>, String), Touched> = BTreeMap::new();
    for (_, t) in by_uuid.into_iter().filter(|(_, t)| !(t.created && t.dropped)) {
        let key = (t.dataset.table.clone(), t.dataset.name.clone());
        match by_name.remove(&key) {
            None => {
                by_name.insert(key, t);
            }
            Some(other) => {
                let (new, old) = if t.created { (t, other) } else { (other, t) };
                let mut uuids = new.uuids.clone();
                uuids.extend(old.uuids);
                let mut dataset = new.dataset.clone();
                dataset.lifecycle = Some(Lifecycle::Overwrite);
                by_name.insert(key, Touched { operation: Operation::Overwrite, uuids, dataset, ..new });
            }
        }
    }
    for t in by_name.values_mut() {
        if t.dataset.lifecycle.is_none() {
            t.dataset.lifecycle = match (t.created, t.dropped, t.altered) {
                (true, _, _) => Some(Lifecycle::Create),
                (_, true, _) => Some(Lifecycle::Drop),
                (_, _, true) => Some(Lifecycle::Alter),
                _ => None,
            };
        }
    }
    if by_name.is_empty() {
        return None;
    }
    let operation = match by_name.values().map(|t| t.operation).collect::<Vec<_>>().as_slice() {
        [one] => *one,
        _ => Operation::Release,
    };
    // A table read to change only itself (an UPDATE, a DELETE, CREATE OR REPLACE ... AS SELECT
    // from it) is not its own input; in a transaction over several tables, one read to write
    // another is.
    let sole: Vec<String> = match by_name.values().collect::<Vec<_>>().as_slice() {
        [one] => one.uuids.clone(),
        _ => vec![],
    };
    let inputs = first
        .inputs
        .iter()
        .filter(|i| !i.table_uuid.as_ref().is_some_and(|u| sole.contains(u)))
        .map(|i| input_dataset(catalog, i))
        .collect();
    // (outputs by name: a transaction's records come in no meaningful order)
    let outputs = by_name.into_values().map(|t| t.dataset).collect();
    Some(LineageEvent {
        first_seq: first.seq,
        last_seq: last.seq,
        committed_at_us: last.committed_at_us,
        actor: last.actor.clone(),
        operation,
        inputs,
        outputs,
    })
}

/// The table folder a metadata.json lies in (`<table>/metadata/<file>`).
fn table_location_of(metadata_location: &str) -> Option<String> {
    let path = crate::io::local_path(metadata_location);
    let dir = std::path::Path::new(path).parent()?;
    (dir.file_name()? == "metadata").then(|| dir.parent().map(|p| p.display().to_string()))?
}

fn own_dataset(catalog: &Catalog, schema: &str, table: &str, snapshot_id: Option<i64>) -> DatasetRef {
    let location = table_location(catalog.data_path(), schema, table)
        .unwrap_or_else(|_| format!("{}/{schema}/{table}", catalog.data_path()));
    // (OpenLineage names a bucket's dataset by namespace `s3://bucket` and its key as the name)
    let (namespace, name) = match crate::io::object::split(&location) {
        Ok((bucket, key)) => (format!("s3://{bucket}"), key.to_string()),
        Err(_) => ("file".to_string(), location),
    };
    DatasetRef {
        namespace,
        name,
        table: Some(format!("{schema}.{table}")),
        this_catalog: true,
        snapshot_id,
        metadata_location: None,
        columns: vec![],
        lifecycle: None,
    }
}

fn input_dataset(catalog: &Catalog, input: &InputRecord) -> DatasetRef {
    match &input.table_uuid {
        Some(uuid) => {
            let mut d = own_dataset(catalog, &input.namespace, &input.name, input.snapshot_id);
            // (older records: the table's current metadata, while it exists)
            d.metadata_location = input
                .metadata_location
                .clone()
                .or_else(|| catalog.state().table_by_uuid(uuid).map(|t| t.metadata_location.clone()));
            d
        }
        None => DatasetRef {
            namespace: input.namespace.clone(),
            name: input.name.clone(),
            table: input.table.clone(),
            this_catalog: false,
            snapshot_id: input.snapshot_id,
            metadata_location: input.metadata_location.clone(),
            columns: input.columns.clone(),
            lifecycle: None,
        },
    }
}
