//! Named consumers from SQL: `skade_create_consumer`, `skade_drop_consumer`,
//! `skade_reset_consumer`, `skade_acknowledge` (each one row saying what it did, staged in the
//! calling transaction), and the listing `skade_consumers`.

use std::sync::Arc;

use arrow::array::{ArrayRef, ListBuilder, RecordBatch, StringBuilder, TimestampMicrosecondBuilder, UInt64Builder};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::timestamptz;
use crate::catalog::consumers::{ConsumerRecord, Start};
use crate::catalog::Transaction;
use crate::error::{Error, Result};
use crate::stream::pending::Pending;

/// Where a consumer starts: a word ('now', 'beginning'), a snapshot or a commit_seq; at most one.
pub fn start(word: Option<&str>, at_snapshot: Option<i64>, at_commit: Option<i64>) -> Result<Start> {
    match (word, at_snapshot, at_commit) {
        (None, None, None) => Ok(Start::Now),
        (Some(w), None, None) => Start::parse(w),
        (None, Some(id), None) => Ok(Start::Snapshot(id)),
        (None, None, Some(seq)) if seq < 0 => {
            Err(Error::invalid(format!("at_commit must be a commit_seq (>= 0), got {seq}")))
        }
        (None, None, Some(seq)) => Ok(Start::CommitSeq(seq as u64)),
        _ => Err(Error::invalid("give at most one of start, at_snapshot and at_commit")),
    }
}

/// A table as a consumer names it: `table` (in schema main), or `schema.table`.
fn table_name(txn: &Transaction, name: &str) -> Result<(String, String)> {
    if txn.table(crate::catalog::names::DEFAULT_SCHEMA, name)?.is_some() || !name.contains('.') {
        return Ok((crate::catalog::names::DEFAULT_SCHEMA.to_string(), name.to_string()));
    }
    let (schema, table) = name.split_once('.').unwrap_or_default();
    Ok((schema.to_string(), table.to_string()))
}

/// The columns of the listing, and of the rows create and reset return.
pub fn schema() -> SchemaRef {
    let tables = DataType::List(Arc::new(Field::new("item", DataType::Utf8, true)));
    Arc::new(Schema::new(vec![
        Field::new("consumer_name", DataType::Utf8, false),
        Field::new("tables", tables, false),
        Field::new("cursor_seq", DataType::UInt64, false),
        Field::new("commits_behind", DataType::UInt64, true),
        Field::new("rows_behind", DataType::UInt64, true),
        Field::new("created_at", timestamptz(), false),
        Field::new("last_consumed_at", timestamptz(), true),
        Field::new("blocked_by", DataType::Utf8, true),
    ]))
}

/// One row per consumer, with what it has not consumed yet (commits of its tables after its
/// cursor, and their rows by the snapshots' summaries), or, for one that cannot read on (a table
/// of it dropped, history it needs expired), NULL and why.
fn listing(txn: &Transaction, consumers: &[ConsumerRecord]) -> Result<RecordBatch> {
    let mut name = StringBuilder::new();
    let mut tables = ListBuilder::new(StringBuilder::new());
    let mut cursor = UInt64Builder::new();
    let mut commits = UInt64Builder::new();
    let mut rows = UInt64Builder::new();
    let mut created = TimestampMicrosecondBuilder::new().with_timezone("UTC");
    let mut consumed = TimestampMicrosecondBuilder::new().with_timezone("UTC");
    let mut blocked = StringBuilder::new();
    for c in consumers {
        name.append_value(&c.name);
        for t in &c.tables {
            tables.values().append_value(txn.catalog().state().name_of(t));
        }
        tables.append(true);
        cursor.append_value(c.cursor);
        match readable(txn, c) {
            Ok(pending) => {
                commits.append_value(pending.commits.len() as u64);
                rows.append_value(pending.rows(txn.catalog())?);
                blocked.append_null();
            }
            Err(e) => {
                commits.append_null();
                rows.append_null();
                blocked.append_value(e.message);
            }
        }
        created.append_value(c.created_at_us);
        consumed.append_option(c.consumed_at_us);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(name.finish()),
        Arc::new(tables.finish()),
        Arc::new(cursor.finish()),
        Arc::new(commits.finish()),
        Arc::new(rows.finish()),
        Arc::new(created.finish()),
        Arc::new(consumed.finish()),
        Arc::new(blocked.finish()),
    ];
    Ok(RecordBatch::try_new(schema(), columns)?)
}

/// What the consumer's next read delivers, or the error it would get for a gap in its history.
fn readable(txn: &Transaction, consumer: &ConsumerRecord) -> Result<Pending> {
    crate::stream::rows::schema(txn.catalog(), txn.database(), consumer)?;
    let pending = Pending::of(txn.catalog(), txn.database(), consumer, None)?;
    crate::stream::rows::check(txn.catalog(), txn.database(), &pending)?;
    Ok(pending)
}

/// `skade_consumers(catalog)`.
pub fn list(txn: &Transaction) -> Result<RecordBatch> {
    listing(txn, &txn.consumers()?)
}

/// `skade_create_consumer(catalog, name, tables, start...)`: the new consumer's row.
pub fn create(txn: &Transaction, name: &str, tables: &[String], start: Start) -> Result<RecordBatch> {
    let tables = tables.iter().map(|t| table_name(txn, t)).collect::<Result<Vec<_>>>()?;
    let record = txn.create_consumer(name, &tables, start)?;
    // Tables whose columns a consumer cannot carry (a reserved name, one name with two types),
    // and a start whose history was expired, are refused now, not at every read.
    readable(txn, &record)?;
    listing(txn, &[record])
}

/// `skade_reset_consumer(catalog, name, start...)`: the consumer's row after.
pub fn reset(txn: &Transaction, name: &str, start: Start) -> Result<RecordBatch> {
    let record = txn.reset_consumer(name, start)?;
    readable(txn, &record)?;
    listing(txn, &[record])
}

/// `skade_acknowledge(catalog, name, commit_seq)`: the consumer's row after.
pub fn acknowledge(txn: &Transaction, name: &str, seq: i64) -> Result<RecordBatch> {
    if seq < 0 {
        return Err(Error::invalid(format!("skade_acknowledge: commit_seq must be >= 0, got {seq}")));
    }
    txn.acknowledge(name, seq as u64)?;
    listing(txn, &[txn.consumer(name)?])
}

/// `skade_drop_consumer(catalog, name [, if_exists])`: whether it was dropped.
pub fn drop_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("dropped", DataType::Boolean, false)]))
}

pub fn drop(txn: &Transaction, name: &str, if_exists: bool) -> Result<RecordBatch> {
    let dropped = txn.drop_consumer(name, if_exists)?;
    let column: ArrayRef = Arc::new(arrow::array::BooleanArray::from(vec![dropped]));
    Ok(RecordBatch::try_new(drop_schema(), vec![column])?)
}
