//! What a consumer has not consumed yet: the commits after its cursor, each commit of its tables
//! whole, and where its cursor goes once they are delivered. Commits of other tables move the
//! cursor without rows; a gap in the history it cannot read (a table of it dropped, a snapshot
//! expired) is an error naming it, never a silent skip.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use iceberg::spec::{Operation, TableMetadata};

use crate::catalog::consumers::ConsumerRecord;
use crate::catalog::events::CATCH_UP_PAGE;
use crate::catalog::names;
use crate::catalog::store::CommitRecord;
use crate::catalog::Catalog;
use crate::error::{Error, Result};
use crate::format::snapshot::CARRIED_DELETES;

/// The commits a consumer's next read delivers.
#[derive(Debug, Clone)]
pub struct Pending {
    /// The consumer as read (the cursor the window starts after).
    pub consumer: ConsumerRecord,
    /// The cursor once they are delivered: the last commit_seq looked at.
    pub to: u64,
    /// The commits of its tables in (cursor, to] that made a snapshot, in order.
    pub commits: Vec<CommitRecord>,
}

impl Pending {
    /// The commits after `consumer`'s cursor, at most `max_commits` of its tables' (None: all
    /// there are), but never part of a transaction: one that wrote several of its tables is
    /// delivered whole, even past `max_commits`. `database`: the name the catalog is attached
    /// under, for messages.
    pub fn of(
        catalog: &Catalog,
        database: Option<&str>,
        consumer: &ConsumerRecord,
        max_commits: Option<u64>,
    ) -> Result<Pending> {
        let uuids: HashSet<&str> = consumer.tables.iter().map(|t| t.uuid.as_str()).collect();
        let mut pending = Pending { consumer: consumer.clone(), to: consumer.cursor, commits: vec![] };
        if max_commits == Some(0) {
            return Ok(pending);
        }
        // max_commits was reached inside this transaction: the rest of it comes too (whole).
        let mut finishing: Option<u64> = None;
        loop {
            let page = catalog.commits_since(pending.to, CATCH_UP_PAGE)?;
            let Some(last) = page.last().map(|r| r.seq) else {
                return Ok(pending);
            };
            for record in page {
                if finishing.is_some() && record.transaction != finishing {
                    return Ok(pending);
                }
                let ours = record.table_uuid.as_deref().is_some_and(|u| uuids.contains(u));
                if ours && record.operation == "drop_table" {
                    if pending.commits.is_empty() {
                        return Err(dropped(database, consumer, &record));
                    }
                    return Ok(pending); // delivered up to the drop; the next read says so
                }
                pending.to = record.seq;
                // A commit of its table without a snapshot (a CREATE TABLE) has no rows to deliver.
                if ours && record.snapshot_id.is_some() {
                    let transaction = record.transaction;
                    pending.commits.push(record);
                    if finishing.is_none() && max_commits.is_some_and(|n| pending.commits.len() as u64 >= n) {
                        if transaction.is_none() {
                            return Ok(pending);
                        }
                        finishing = transaction;
                    }
                }
            }
            debug_assert_eq!(pending.to, last);
        }
    }

    /// How many changelog rows the pending commits hold, estimated from their snapshots'
    /// summaries (added rows plus deleted rows; a compaction changes no row): exact for appends
    /// and for deletes by position and whole files, while an equality delete counts one row
    /// whether it matched none or several (only decoding the window could tell). Each table's newest pending
    /// metadata holds its earlier snapshots too: one metadata file per table is read, not one
    /// per commit (an older one only where expiry removed a snapshot from the newest).
    pub fn rows(&self, catalog: &Catalog) -> Result<u64> {
        let mut newest: HashMap<&str, Arc<TableMetadata>> = HashMap::new();
        let mut rows = 0;
        for commit in self.commits.iter().rev() {
            let (Some(id), Some(location), Some(uuid)) =
                (commit.snapshot_id, commit.metadata_location.as_deref(), commit.table_uuid.as_deref())
            else {
                continue;
            };
            let metadata = match newest.get(uuid) {
                Some(m) if m.snapshot_by_id(id).is_some() => m.clone(),
                Some(_) => catalog.metadata_at(location)?,
                None => newest.entry(uuid).or_insert(catalog.metadata_at(location)?).clone(),
            };
            let Some(snapshot) = metadata.snapshot_by_id(id) else {
                continue;
            };
            let summary = snapshot.summary();
            if summary.operation == Operation::Replace {
                continue;
            }
            let count = |k: &str| summary.additional_properties.get(k).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
            // A removed data file's rows come as deletes, less those a removed position delete
            // file had deleted before (they are not delivered again).
            // Deletion vectors (v3) carry the positions deleted before (skade counts them; another
            // writer's merged ones replace deletion vectors of the same positions).
            let (removed, deleted) = match (count(CARRIED_DELETES), count("removed-dvs")) {
                (0, 0) => (
                    count("deleted-records").saturating_sub(count("removed-position-deletes")),
                    count("added-position-deletes"),
                ),
                (0, _) => (
                    count("deleted-records"),
                    count("added-position-deletes").saturating_sub(count("removed-position-deletes")),
                ),
                (carried, _) => (count("deleted-records"), count("added-position-deletes").saturating_sub(carried)),
            };
            rows += count("added-records") + removed + deleted + count("added-equality-deletes");
        }
        Ok(rows)
    }
}

fn dropped(database: Option<&str>, consumer: &ConsumerRecord, record: &CommitRecord) -> Error {
    Error::catalog(format!(
        "consumer {} cannot go on: its table {} was dropped at commit_seq {} (a table created again under \
         that name is another table); reset the consumer (skade_reset_consumer) to follow the tables named so now, \
         or drop it",
        names::shown(&consumer.name),
        names::table_shown(database, &record.schema, record.table.as_deref().unwrap_or("?")),
        record.seq
    ))
}

/// The error for a pending commit whose snapshot (or its parent, which its deletes are read at)
/// is no longer in the table's history; `earliest`: where a consumer can start now, (snapshot,
/// commit_seq).
pub fn expired(
    consumer: &ConsumerRecord,
    table: &str,
    record: &CommitRecord,
    snapshot: i64,
    earliest: Option<(i64, u64)>,
) -> Error {
    let start = match earliest {
        Some((id, seq)) => format!(
            " (the earliest it can start at now: at_snapshot := {id}, or at_commit := {seq}, which skips the changes \
             before that snapshot)"
        ),
        None => String::new(),
    };
    Error::catalog(format!(
        "consumer {} cannot read commit_seq {} of table {table}: snapshot {snapshot}, which reading it needs, \
         was expired, so the changes after its cursor {} cannot all be delivered; reset the consumer \
         (skade_reset_consumer) to skip the gap{start}",
        names::shown(&consumer.name),
        record.seq,
        consumer.cursor
    ))
}
