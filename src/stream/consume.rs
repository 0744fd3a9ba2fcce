//! A consumer's read: the rows of its pending commits, and (a consuming read) the advance of
//! its cursor past them, staged in the reading transaction when the read opens. As with
//! Snowflake's streams, the window is consumed when that transaction commits, whatever the
//! statement did with its rows (a WHERE, a LIMIT, a result not read to its end); a ROLLBACK or a
//! failed statement moves nothing. A statement reads a consumer once.

use std::collections::HashSet;
use std::time::Duration;

use arrow::array::{RecordBatch, RecordBatchIterator};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;

use super::pending::Pending;
use super::rows;
use super::wait::{wait_for_commit, WaitFor};
use crate::catalog::store::InputRecord;
use crate::catalog::Transaction;
use crate::error::Result;

/// What a read asks for.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// At most this many commits of the consumer's tables (None: every pending one).
    pub max_commits: Option<u64>,
    /// Whether the cursor advances (a consuming read) or stays (a peek).
    pub advance: bool,
    /// With nothing pending, wait this long for a commit of the consumer's tables.
    pub wait: Option<Duration>,
    /// The columns (of the read's schema) the caller uses; the others may be NULL (empty: all).
    pub used: Vec<usize>,
    /// The caller's statement (DuckDB's query id): a second consuming read of the consumer in
    /// the same statement is an error.
    pub statement: u64,
}

/// The columns of the consumer `name`'s rows.
pub fn schema(txn: &Transaction, name: &str) -> Result<SchemaRef> {
    rows::schema(txn.catalog(), txn.database(), &txn.consumer(name)?)
}

/// The rows of a read, in the schema it was bound with.
pub type Rows = RecordBatchIterator<std::vec::IntoIter<std::result::Result<RecordBatch, ArrowError>>>;

/// The rows of the consumer `name`'s pending commits, in `schema` (bound earlier); a consuming
/// read stages the advance past them. A wait polls `interrupted` while it sleeps.
pub fn read(
    txn: &Transaction,
    name: &str,
    options: ReadOptions,
    schema: SchemaRef,
    interrupted: &dyn Fn() -> bool,
) -> Result<Rows> {
    if options.advance {
        txn.check_writable()?;
    }
    let mut consumer = txn.consumer(name)?;
    let mut pending = Pending::of(txn.catalog(), txn.database(), &consumer, options.max_commits)?;
    if let Some(timeout) = options.wait.filter(|_| pending.commits.is_empty() && options.max_commits != Some(0)) {
        let tables: HashSet<String> = consumer.tables.iter().map(|t| t.uuid.clone()).collect();
        let wait = WaitFor { after: pending.to, tables: Some(&tables), timeout, consumer: Some(&consumer) };
        wait_for_commit(txn.catalog(), &wait, interrupted)?;
        // read afresh: another transaction may have moved (reset) the consumer meanwhile
        consumer = txn.consumer(name)?;
        pending = Pending::of(txn.catalog(), txn.database(), &consumer, options.max_commits)?;
    }
    let batches = rows::rows(txn.catalog(), txn.database(), &pending, &schema, &options.used)?;
    // lineage: the read's tables, at the last snapshot it delivers of each
    for table in &consumer.tables {
        let last = pending.commits.iter().rev().find(|c| c.table_uuid.as_deref() == Some(table.uuid.as_str()));
        if let Some((snapshot_id, last)) = last.and_then(|c| Some((c.snapshot_id?, c))) {
            txn.note_input(InputRecord {
                table_uuid: Some(table.uuid.clone()),
                namespace: table.schema.clone(),
                name: table.name.clone(),
                snapshot_id: Some(snapshot_id),
                table: None,
                metadata_location: last.metadata_location.clone(),
                columns: vec![],
            })?;
        }
    }
    if options.advance {
        txn.stage_consumed(&pending.consumer, pending.to, options.statement)?;
    }
    Ok(RecordBatchIterator::new(batches.into_iter().map(Ok).collect::<Vec<_>>().into_iter(), schema))
}
