//! The lineage history: every event as a row of `skade_lineage.events`, a skade table like any
//! other (time travel, the changelog, consumers), written by skade only. Its rows and its cursor
//! (the sink `history`) commit in one transaction, so each event lands exactly once; the
//! commits that write it make no event (`events` skips the reserved schema).

use std::sync::Mutex;

use arrow::array::StructArray;

use super::events::{self, LineageEvent};
use super::openlineage::{run_event, Naming};
use super::rows::{self, SeqType};
use crate::catalog::names::LINEAGE_SCHEMA;
use crate::catalog::sinks::{SinkChange, SinkRecord};
use crate::catalog::transaction::OnConflict;
use crate::catalog::{Catalog, Transaction};
use crate::error::{ErrorKind, Result};

pub const TABLE: &str = "events";
/// The history's cursor, among the lineage sinks.
pub const SINK: &str = "history";
/// Commit records historized per transaction at most (a backlog takes several).
const BATCH_RECORDS: usize = 10_000;
/// Conflicts with another writer of the history one call rides out.
const MAX_CONFLICTS: usize = 16;

/// The history sink's record as the catalog holds it.
fn stored(catalog: &Catalog) -> SinkRecord {
    catalog.state().sinks.get(SINK).map(|s| (**s).clone()).unwrap_or_default()
}

/// Where the history's cursor stands (0: nothing historized).
pub fn cursor(catalog: &Catalog) -> u64 {
    catalog.state().sinks.get(SINK).map_or(0, |s| s.delivered_seq)
}

/// Writes the events of every commit after the history's cursor, up to the head as it is now,
/// into the history table, in transactions of at most [`BATCH_RECORDS`] records (commits landing
/// meanwhile wait for the next call: each call is one snapshot, more under a backlog). Returns
/// the events written.
pub fn catch_up(catalog: &Catalog, namespace: &str) -> Result<usize> {
    let head = catalog.head_seq();
    // One writer at a time (the worker, a flush): the cursor moves from where the other left it.
    static WRITING: Mutex<()> = Mutex::new(());
    let _writing = WRITING.lock().unwrap_or_else(|p| p.into_inner());
    let mut written = 0;
    let mut conflicts = 0;
    loop {
        // (through a commit log another process may have written the history meanwhile)
        catalog.catch_up()?;
        let before = stored(catalog);
        let from = before.delivered_seq;
        if from >= head {
            return Ok(written);
        }
        let (events, read) = events::since(catalog, from, BATCH_RECORDS.min((head - from) as usize))?;
        let Some(read) = read else {
            return Ok(written);
        };
        if events.is_empty() && only_history(catalog, from, read)? {
            return Ok(written); // (its own commits: the next batch moves the cursor past them)
        }
        match write(catalog, namespace, &events, before.clone(), read) {
            Ok(()) => written += events.len(),
            // another writer (a process of a log-resident lake) wrote these rows and moved the
            // cursor meanwhile: the rows' primary key or the cursor's compare-and-swap refused
            // this one; look again from where the cursor stands now (each row is there once)
            Err(e)
                if matches!(e.kind, ErrorKind::Conflict | ErrorKind::Constraint)
                    && conflicts < MAX_CONFLICTS
                    && catalog.catch_up().is_ok()
                    && stored(catalog) != before =>
            {
                conflicts += 1
            }
            Err(e) => return Err(e),
        }
    }
}

/// One transaction of the history: the rows of `events` and the cursor moved from `before` to
/// `read`.
fn write(catalog: &Catalog, namespace: &str, events: &[LineageEvent], before: SinkRecord, read: u64) -> Result<()> {
    let txn = catalog.begin_system();
    let uuid = ensure_table(&txn)?;
    if !events.is_empty() {
        let naming = Naming { catalog, namespace };
        let json: Vec<String> = events.iter().map(|e| run_event(&naming, e).to_string()).collect();
        let batch = rows::batch(events, SeqType::Signed, Some(&json))?;
        let mut writer = txn.writer(&uuid)?;
        writer.write(&StructArray::from(batch))?;
        txn.stage_files(&uuid, writer.finish()?)?;
        txn.end_statement(&uuid)?;
    }
    let (from_seq, from_owner) = (before.delivered_seq, before.owner.clone());
    let record =
        SinkRecord { delivered_seq: read, delivered_at_us: Some(chrono::Utc::now().timestamp_micros()), ..before };
    txn.stage_sink(SinkChange { name: SINK.into(), from_seq, from_owner, record })?;
    txn.commit()?;
    Ok(())
}

/// Whether every commit in (from, to] wrote the history table.
fn only_history(catalog: &Catalog, from: u64, to: u64) -> Result<bool> {
    let records = catalog.commits_since(from, (to - from) as usize)?;
    Ok(records.iter().all(|r| crate::catalog::names::is_reserved(&r.schema)))
}

/// The history table's uuid, created (with its schema) when missing.
fn ensure_table(txn: &Transaction) -> Result<String> {
    if let Some(t) = txn.table(LINEAGE_SCHEMA, TABLE)? {
        return Ok(t.record.uuid.clone());
    }
    txn.create_schema(LINEAGE_SCHEMA, true)?;
    let schema = rows::schema(SeqType::Signed, true);
    let types: Vec<String> = schema.fields().iter().map(|f| f.data_type().to_string()).collect();
    let created = txn.create_table(
        LINEAGE_SCHEMA,
        TABLE,
        &schema,
        &types,
        &["first_commit_seq".into()],
        &["commit_seq".into()],
        &[],
        &[],
        OnConflict::Ignore,
    )?;
    let info = match created {
        Some(t) => t,
        None => txn.table(LINEAGE_SCHEMA, TABLE)?.ok_or_else(|| crate::Error::internal("history table vanished"))?,
    };
    Ok(info.record.uuid.clone())
}
