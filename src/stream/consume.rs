//! A consumer's read: the rows of its pending commits, and (a consuming read) the advance of
//! its cursor past them, staged in the reading transaction once every row was read. A read that
//! stops early (a LIMIT) moves nothing: its rows are delivered again.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{RecordBatch, RecordBatchReader};
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;

use super::pending::Pending;
use super::rows;
use super::wait::{wait_for_commit, WaitFor};
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
}

/// The columns of the consumer `name`'s rows.
pub fn schema(txn: &Transaction, name: &str) -> Result<SchemaRef> {
    rows::schema(txn.catalog(), &txn.consumer(name)?)
}

/// The rows of the consumer `name`'s pending commits, in `schema` (bound earlier). A wait polls
/// `interrupted` while it sleeps.
pub fn read(
    txn: &Arc<Transaction>,
    name: &str,
    options: ReadOptions,
    schema: SchemaRef,
    interrupted: &dyn Fn() -> bool,
) -> Result<ConsumeRead> {
    if options.advance {
        txn.check_writable()?;
    }
    let consumer = txn.consumer(name)?;
    let mut pending = Pending::of(txn.catalog(), &consumer, options.max_commits)?;
    if let Some(timeout) = options.wait.filter(|_| pending.commits.is_empty() && options.max_commits != Some(0)) {
        let tables: HashSet<String> = consumer.tables.iter().map(|t| t.uuid.clone()).collect();
        let wait = WaitFor { after: pending.to, tables: Some(&tables), timeout };
        if !wait_for_commit(txn.catalog(), &wait, interrupted)?.is_empty() {
            pending = Pending::of(txn.catalog(), &consumer, options.max_commits)?;
        }
    }
    let batches = rows::rows(txn.catalog(), &pending, &schema, &options.used)?;
    let advance = (options.advance && pending.to > consumer.cursor).then(|| (txn.clone(), pending));
    Ok(ConsumeRead { schema, batches: batches.into_iter(), advance })
}

/// The rows of a read; staging the advance when the last was taken.
pub struct ConsumeRead {
    schema: SchemaRef,
    batches: std::vec::IntoIter<RecordBatch>,
    advance: Option<(Arc<Transaction>, Pending)>,
}

impl Iterator for ConsumeRead {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(batch) = self.batches.next() {
            return Some(Ok(batch));
        }
        let (txn, pending) = self.advance.take()?;
        match txn.stage_consumed(&pending.consumer, pending.to) {
            Ok(()) => None,
            Err(e) => Some(Err(ArrowError::ExternalError(Box::new(e)))),
        }
    }
}

impl RecordBatchReader for ConsumeRead {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}
