//! `skade_lineage_delivery(catalog)`: where each lineage sink stands (the history table, each
//! OpenLineage collector): its cursor, what is pending, the last error and refusals.
//! `skade_lineage_flush(catalog [, timeout_ms])` lists the same after bringing them up to date.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, BooleanArray, RecordBatch, StringArray, TimestampMicrosecondArray, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use super::timestamptz;
use crate::catalog::sinks::SinkRecord;
use crate::catalog::Catalog;
use crate::error::Result;
use crate::lineage::delivery::{self, Status};
use crate::lineage::events;

/// Commit records counted for `pending_events` at most (a longer backlog shows this many's).
const PENDING_SCAN: usize = 100_000;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("sink", DataType::Utf8, false),
        Field::new("running", DataType::Boolean, false),
        Field::new("delivered_seq", DataType::UInt64, false),
        Field::new("pending_events", DataType::UInt64, false),
        Field::new("delivered_events", DataType::UInt64, false),
        Field::new("persisted_at", timestamptz(), true),
        Field::new("last_error", DataType::Utf8, true),
        Field::new("last_error_at", timestamptz(), true),
        Field::new("rejected_events", DataType::UInt64, false),
        Field::new("last_rejected_seq", DataType::UInt64, true),
        Field::new("last_rejection", DataType::Utf8, true),
    ]))
}

/// A running worker's state and what its collector acknowledged.
type Running = (Status, Option<SinkRecord>);

/// One row per sink stored in the catalog or running on it, by name.
pub fn rows(catalog: &Catalog) -> Result<RecordBatch> {
    let mut sinks: BTreeMap<String, (Option<Arc<SinkRecord>>, Option<Running>)> = BTreeMap::new();
    for (name, record) in &catalog.state().sinks {
        sinks.entry(name.clone()).or_default().0 = Some(record.clone());
    }
    for w in delivery::workers_of(catalog) {
        sinks.entry(w.sink.clone()).or_default().1 = Some((w.status(), w.acknowledged()));
    }
    let n = sinks.len();
    let (mut name, mut running, mut seq, mut pending, mut delivered) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut persisted, mut error, mut error_at) = (vec![], vec![], vec![]);
    let (mut rejected, mut rejected_seq, mut rejection) = (vec![], vec![], vec![]);
    for (sink, (record, running_state)) in sinks {
        let stored = record.as_deref().cloned().unwrap_or_default();
        let (status, acknowledged) = running_state.unzip();
        // (a running collector's refusals are durable with its cursor, a moment later)
        let refusals = acknowledged.flatten().filter(|a| a.rejected >= stored.rejected).unwrap_or(stored.clone());
        let at = status.as_ref().map_or(stored.delivered_seq, |s| s.delivered_seq.max(stored.delivered_seq));
        let (events, _) = events::since(catalog, at, PENDING_SCAN)?;
        name.push(sink);
        running.push(status.is_some());
        seq.push(at);
        pending.push(events.len() as u64);
        delivered.push(status.as_ref().map_or(0, |s| s.delivered));
        persisted.push(stored.delivered_at_us);
        error.push(status.as_ref().and_then(|s| s.last_error.clone()));
        error_at.push(status.as_ref().and_then(|s| s.last_error_at_us));
        rejected.push(refusals.rejected);
        rejected_seq.push(refusals.last_rejected_seq);
        rejection.push(refusals.last_rejection);
    }
    let ts = |v: Vec<Option<i64>>| Arc::new(TimestampMicrosecondArray::from(v).with_timezone("UTC")) as ArrayRef;
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(name)),
        Arc::new(BooleanArray::from(running)),
        Arc::new(UInt64Array::from(seq)),
        Arc::new(UInt64Array::from(pending)),
        Arc::new(UInt64Array::from(delivered)),
        ts(persisted),
        Arc::new(StringArray::from(error)),
        ts(error_at),
        Arc::new(UInt64Array::from(rejected)),
        Arc::new(UInt64Array::from(rejected_seq)),
        Arc::new(StringArray::from(rejection)),
    ];
    debug_assert!(columns.iter().all(|c| c.len() == n));
    Ok(RecordBatch::try_new(schema(), columns)?)
}
