//! A consumer's read: the rows of its pending commits, and (a consuming read) the advance of
//! its cursor past them. The caller stages the advance once every row was delivered (it alone
//! knows, e.g. a query that stops early at a LIMIT did not deliver them all): a read that is not
//! staged moves nothing, its rows are delivered again.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use arrow::array::{RecordBatch, RecordBatchIterator};
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

/// The rows of a read, in the schema it was bound with.
pub type Rows = RecordBatchIterator<std::vec::IntoIter<std::result::Result<RecordBatch, ArrowError>>>;

/// The rows of the consumer `name`'s pending commits, in `schema` (bound earlier), and for a
/// consuming read the advance past them (None: there is nothing to pass). A wait polls
/// `interrupted` while it sleeps.
pub fn read(
    txn: &Arc<Transaction>,
    name: &str,
    options: ReadOptions,
    schema: SchemaRef,
    interrupted: &dyn Fn() -> bool,
) -> Result<(Rows, Option<Advance>)> {
    if options.advance {
        txn.check_writable()?;
    }
    let consumer = txn.consumer(name)?;
    let mut pending = Pending::of(txn.catalog(), &consumer, options.max_commits)?;
    if let Some(timeout) = options.wait.filter(|_| pending.commits.is_empty() && options.max_commits != Some(0)) {
        let tables: HashSet<String> = consumer.tables.iter().map(|t| t.uuid.clone()).collect();
        let wait = WaitFor { after: pending.to, tables: Some(&tables), timeout, consumer: Some(&consumer) };
        if !wait_for_commit(txn.catalog(), &wait, interrupted)?.is_empty() {
            pending = Pending::of(txn.catalog(), &consumer, options.max_commits)?;
        }
    }
    let batches = rows::rows(txn.catalog(), &pending, &schema, &options.used)?;
    let advance = (options.advance && pending.to > consumer.cursor).then(|| Advance { txn: txn.clone(), pending });
    Ok((RecordBatchIterator::new(batches.into_iter().map(Ok).collect::<Vec<_>>().into_iter(), schema), advance))
}

/// A consuming read's advance of its consumer's cursor past the commits it read.
pub struct Advance {
    txn: Arc<Transaction>,
    pending: Pending,
}

impl Advance {
    /// Stages the advance in the reading transaction: the cursor moves when it commits (an
    /// error if something else moved the cursor since the read).
    pub fn stage(&self) -> Result<()> {
        self.txn.stage_consumed(&self.pending.consumer, self.pending.to)
    }
}
