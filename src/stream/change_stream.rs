//! The push consume API for embedders (seed 000, f3): `ChangeStream::changes(from)` yields the
//! changelog of one table as windows, a catch-up window first, then one window per commit of the
//! table as the in-process commit broadcast announces it. A receiver that lagged behind the
//! broadcast recovers with one window up to the table's last commit, read from the durable log;
//! the polling variant reads only the log, on a timer.
//!
//! A window's end is a [`ConsumerCursor`]: persist it, and `changes(Some(cursor))` resumes with
//! only the rows strictly after it, so nothing is delivered twice.

use std::time::Duration;

use arrow::array::RecordBatch;
use futures::stream::BoxStream;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::broadcast::Receiver;

use crate::catalog::events::CATCH_UP_PAGE;
use crate::catalog::names;
use crate::catalog::store::CommitRecord;
use crate::catalog::{Catalog, CommitEvent};
use crate::changelog::window::{self, Bound, Request};
use crate::error::{Error, Result};

/// Where a consumer of one table stands: after this commit (and this snapshot of the table).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerCursor {
    pub table_uuid: String,
    /// The table's snapshot at the cursor (None: it had none yet).
    pub snapshot_id: Option<i64>,
    pub commit_seq: u64,
}

/// The changes of the table's snapshots after `from` up to `to`.
#[derive(Debug, Clone)]
pub struct ChangeWindow {
    pub from: Option<i64>,
    /// The resume key: the cursor after this window.
    pub to: ConsumerCursor,
    /// In `skade_changelog`'s columns.
    pub batches: Vec<RecordBatch>,
}

enum Source {
    Push(Receiver<CommitEvent>),
    Poll(Duration),
}

pub struct ChangeStream {
    catalog: Catalog,
    name: String,
    cursor: ConsumerCursor,
    source: Source,
    /// Commits of the table found in the log and not yet delivered (one window each).
    ready: std::collections::VecDeque<CommitRecord>,
    /// Deliver everything the log holds in one window (a catch-up, or recovery after a lag).
    catch_up: bool,
}

impl ChangeStream {
    /// The changes of `schema.table` after `from` (None: from now on). Subscribes to the
    /// commit broadcast before it reads where the table stands, so no commit falls between.
    pub fn changes(catalog: &Catalog, schema: &str, table: &str, from: Option<ConsumerCursor>) -> Result<ChangeStream> {
        let receiver = catalog.subscribe_commits();
        Self::start(catalog, schema, table, from, Source::Push(receiver))
    }

    /// The same stream without the broadcast: the durable log is read every `interval`.
    pub fn polling(
        catalog: &Catalog,
        schema: &str,
        table: &str,
        from: Option<ConsumerCursor>,
        interval: Duration,
    ) -> Result<ChangeStream> {
        Self::start(catalog, schema, table, from, Source::Poll(interval))
    }

    fn start(
        catalog: &Catalog,
        schema: &str,
        table: &str,
        from: Option<ConsumerCursor>,
        source: Source,
    ) -> Result<ChangeStream> {
        let head = catalog.head_seq();
        // (no DuckDB behind the Rust API: messages name the table by schema and table)
        let record = catalog.state().table(schema, table).cloned().ok_or_else(|| {
            Error::catalog(format!("Table with name {} does not exist!", names::table_shown(None, schema, table)))
        })?;
        let name = names::table_shown(None, &record.schema, &record.name);
        let cursor = match from {
            Some(c) if c.table_uuid != record.uuid => {
                return Err(Error::invalid(format!(
                    "the cursor is of another table than {name} (table {}): a table dropped and created again is \
                     another table",
                    c.table_uuid
                )))
            }
            Some(c) if c.commit_seq > head => {
                return Err(Error::invalid(format!(
                    "the cursor's commit_seq {} is past the last commit {head}",
                    c.commit_seq
                )))
            }
            Some(c) => c,
            None => {
                let snapshot = match catalog.last_commit_of(&record.uuid)? {
                    Some(c) if c.seq <= head => c.snapshot_id,
                    // (its last snapshot is not durable yet: it is delivered once it is)
                    _ => catalog.metadata_at(&record.metadata_location)?.current_snapshot_id(),
                };
                ConsumerCursor { table_uuid: record.uuid.clone(), snapshot_id: snapshot, commit_seq: head }
            }
        };
        Ok(ChangeStream { catalog: catalog.clone(), name, cursor, source, ready: Default::default(), catch_up: true })
    }

    /// Where the stream stands: the end of the last window it yielded.
    pub fn cursor(&self) -> &ConsumerCursor {
        &self.cursor
    }

    /// The next window, waiting for a commit of the table when there is none.
    pub async fn next(&mut self) -> Result<ChangeWindow> {
        loop {
            if self.catch_up {
                self.catch_up = false;
                let commits = self.read_log()?;
                if let Some(last) = commits.last() {
                    return self.window(last);
                }
            }
            if let Some(commit) = self.ready.pop_front() {
                return self.window(&commit);
            }
            match &mut self.source {
                Source::Poll(interval) => {
                    tokio::time::sleep(*interval).await;
                    self.catch_up = true;
                }
                Source::Push(receiver) => match receiver.recv().await {
                    Ok(e) if e.seq <= self.cursor.commit_seq => {}
                    Ok(e) if e.table_uuid.as_deref() == Some(self.cursor.table_uuid.as_str()) => {
                        // One window per commit, in order: the log fills anything in between.
                        let commits = self.read_log()?;
                        self.ready.extend(commits.into_iter().filter(|c| c.seq <= e.seq));
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => self.catch_up = true,
                    Err(RecvError::Closed) => return Err(Error::catalog("the catalog was closed")),
                },
            }
        }
    }

    /// The table's commits after the cursor with a snapshot (DDL and expiry move no row; they
    /// move the cursor with the next window). Its drop is an error.
    fn read_log(&mut self) -> Result<Vec<CommitRecord>> {
        let mut out = vec![];
        let mut after = self.ready.back().map_or(self.cursor.commit_seq, |c| c.seq);
        loop {
            let page = self.catalog.commits_since(after, CATCH_UP_PAGE)?;
            let Some(last) = page.last() else {
                return Ok(out);
            };
            after = last.seq;
            for c in page {
                if c.table_uuid.as_deref() != Some(self.cursor.table_uuid.as_str()) {
                    continue;
                }
                if c.operation == "drop_table" {
                    if out.is_empty() && self.ready.is_empty() {
                        return Err(Error::catalog(format!(
                            "table {} was dropped at commit_seq {}: its change stream ends",
                            self.name, c.seq
                        )));
                    }
                    return Ok(out);
                }
                if c.snapshot_id.is_some() {
                    out.push(c);
                }
            }
        }
    }

    /// The window from the cursor up to the commit `to` of the table; the cursor moves there.
    fn window(&mut self, to: &CommitRecord) -> Result<ChangeWindow> {
        self.ready.retain(|c| c.seq > to.seq);
        let location = to.metadata_location.as_deref().ok_or_else(|| Error::internal("a commit without metadata"))?;
        let metadata = self.catalog.metadata_at(location)?;
        let from = self.cursor.snapshot_id;
        let request =
            Request { from: from.map(Bound::Snapshot), to: to.snapshot_id.map(Bound::Snapshot), ..Request::default() };
        let batches = window::rows(&metadata, &self.catalog.read_caches(), &self.name, request)?;
        self.cursor = ConsumerCursor {
            table_uuid: self.cursor.table_uuid.clone(),
            snapshot_id: to.snapshot_id,
            commit_seq: to.seq,
        };
        Ok(ChangeWindow { from, to: self.cursor.clone(), batches })
    }

    /// The stream as a `futures` stream (it ends at the first error).
    pub fn into_stream(self) -> BoxStream<'static, Result<ChangeWindow>> {
        futures::stream::unfold(Some(self), |state| async move {
            let mut stream = state?;
            match stream.next().await {
                Ok(w) => Some((Ok(w), Some(stream))),
                Err(e) => Some((Err(e), None)),
            }
        })
        .boxed()
    }
}
