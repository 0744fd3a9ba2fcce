//! Rows held and handed to the Parquet writer sorted, in runs (a run: rows sorted among
//! themselves, as one or more batches).
//!
//! On a table with a primary key, by key: a run is a row group's worth of rows (so a row group is
//! one sorted run and its key pages cover narrow, disjoint key ranges whatever the insert order),
//! or fewer rows when they reach [`RUN_BYTES`] first (wide rows: a row group then holds several
//! sorted runs, and a probe decodes one key page per run at most). See docs/design/lookup.md.
//!
//! On a table with a sort order, by that order: a run is as many rows as [`SORTED_RUN_BYTES`]
//! holds, and each run is a file of its own (`file_stream`), so that every file is sorted, as its
//! manifest entry's sort order id promises.

use std::collections::VecDeque;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::{concat, interleave_record_batch, lexsort_to_indices};

use super::row_order::RowOrder;
use crate::error::Result;

/// Bound on the bytes of rows held for one run by key (Arrow's memory size): a run is copied once
/// when sorted, so a writer holds at most about twice this (and never builds an array whose
/// offsets would overflow).
pub const RUN_BYTES: usize = 64 << 20;
/// Bound on the bytes of rows held for one run by a table's sort order, which is a file: larger
/// runs make fewer, larger files with tighter bounds, at twice this in memory per writer while a
/// run is sorted (a writer of a partitioned table holds at most this across its partitions).
pub const SORTED_RUN_BYTES: usize = 128 << 20;

/// One run: rows sorted among themselves.
pub type Run = Vec<RecordBatch>;

pub struct SortedRuns {
    order: RowOrder,
    /// A run's rows at most (on a keyed table: the row group's).
    max_rows: usize,
    /// A run's bytes: it ends at the batch that reaches them.
    max_bytes: usize,
    held: VecDeque<RecordBatch>,
    rows: usize,
    bytes: usize,
}

impl SortedRuns {
    /// Rows sorted by `order`, in runs of at most `max_rows` rows, or fewer once they hold
    /// `max_bytes`.
    pub fn new(order: RowOrder, max_rows: usize, max_bytes: usize) -> Self {
        SortedRuns { order, max_rows: max_rows.max(1), max_bytes, held: VecDeque::new(), rows: 0, bytes: 0 }
    }

    /// Holds `batch`; returns the runs complete now.
    pub fn push(&mut self, batch: RecordBatch) -> Result<Vec<Run>> {
        self.rows += batch.num_rows();
        self.bytes += batch.get_array_memory_size();
        self.held.push_back(batch);
        let mut runs = vec![];
        while self.rows >= self.max_rows || self.bytes >= self.max_bytes && self.rows > 0 {
            let rows = self.rows.min(self.max_rows);
            runs.push(self.run(rows)?);
        }
        Ok(runs)
    }

    /// The rows still held, as a run (None: none held): at the end of the stream, or to free
    /// memory.
    pub fn take(&mut self) -> Result<Option<Run>> {
        let rows = self.rows;
        if rows == 0 {
            return Ok(None);
        }
        self.run(rows).map(Some)
    }

    /// The bytes of the rows held.
    pub fn held_bytes(&self) -> usize {
        self.bytes
    }

    /// The first `rows` rows held, sorted (as the batches held, when already in order).
    fn run(&mut self, rows: usize) -> Result<Run> {
        // The batches of the run: whole ones, then the first part of the one it ends in.
        let mut parts = vec![];
        let mut left = rows;
        while left > 0 {
            let Some(batch) = self.held.pop_front() else { break };
            if batch.num_rows() > left {
                self.held.push_front(batch.slice(left, batch.num_rows() - left));
                parts.push(batch.slice(0, left));
                break;
            }
            left -= batch.num_rows();
            parts.push(batch);
        }
        self.rows -= rows;
        self.bytes = self.held.iter().map(|b| b.get_array_memory_size()).sum();

        let columns = self.order.sort_columns(|c| {
            let arrays: Vec<&dyn Array> = parts.iter().map(|b| b.column(c).as_ref()).collect();
            Ok(concat(&arrays)? as ArrayRef)
        })?;
        let order = lexsort_to_indices(&columns, None)?;
        if order.values().iter().enumerate().all(|(i, &o)| i as u32 == o) {
            return Ok(parts);
        }
        // Each sorted row as (part, row in it).
        let starts: Vec<usize> = parts
            .iter()
            .scan(0, |start, b| {
                let s = *start;
                *start += b.num_rows();
                Some(s)
            })
            .collect();
        let at: Vec<(usize, usize)> = order
            .values()
            .iter()
            .map(|&o| {
                let part = starts.partition_point(|&s| s <= o as usize) - 1;
                (part, o as usize - starts[part])
            })
            .collect();
        let parts: Vec<&RecordBatch> = parts.iter().collect();
        Ok(vec![interleave_record_batch(&parts, &at)?])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const ROW_GROUP_ROWS: usize = 122_880;
    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn batch(ids: impl Iterator<Item = i64>, width: usize) -> RecordBatch {
        let ids: Vec<i64> = ids.collect();
        let names: Vec<String> = ids.iter().map(|i| format!("{i:0width$}")).collect();
        let schema =
            Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("s", DataType::Utf8, false)]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![Arc::new(Int64Array::from(ids)), Arc::new(StringArray::from(names))],
        )
        .unwrap()
    }

    fn ids(runs: &[RecordBatch]) -> Vec<Vec<i64>> {
        runs.iter().map(|b| b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec()).collect()
    }

    /// Runs by the key (column 0) as a keyed table's writer makes them.
    fn by_key() -> SortedRuns {
        SortedRuns::new(RowOrder::by_columns(&[0]), ROW_GROUP_ROWS, RUN_BYTES)
    }

    /// Every batch of `runs`.
    fn all(runs: Vec<Run>) -> Vec<RecordBatch> {
        runs.into_iter().flatten().collect()
    }

    #[test]
    fn runs_are_row_groups_sorted_by_key_and_keep_every_row() {
        // 300,000 keys in a scrambled order (a permutation), in chunks of 2,000 rows
        let n = 300_000i64;
        let keys: Vec<i64> = (0..n).map(|i| i * 7919 % 300_007).collect();
        let mut order = by_key();
        let mut runs = vec![];
        for chunk in keys.chunks(2000) {
            runs.extend(all(order.push(batch(chunk.iter().copied(), 1)).unwrap()));
        }
        runs.extend(order.take().unwrap().unwrap());
        let runs = ids(&runs);
        let sizes: Vec<usize> = runs.iter().map(|r| r.len()).collect();
        assert_eq!(sizes, [ROW_GROUP_ROWS, ROW_GROUP_ROWS, 300_000 - 2 * ROW_GROUP_ROWS]);
        for (r, run) in runs.iter().enumerate() {
            assert!(run.windows(2).all(|w| w[0] < w[1]), "run {r} is sorted");
            let mut expected = keys[r * ROW_GROUP_ROWS..(r * ROW_GROUP_ROWS + run.len())].to_vec();
            expected.sort();
            assert_eq!(run, &expected, "run {r} holds its rows");
        }
    }

    #[test]
    fn wide_rows_make_shorter_runs_and_sorted_input_is_not_copied() {
        // rows of ~4 KB: a run ends at RUN_BYTES, long before a row group's worth
        let mut order = by_key();
        let mut runs = vec![];
        for c in 0..40i64 {
            runs.extend(all(order.push(batch((0..1000).map(|i| (i * 37 + c) % 1000 + c * 1000), 4096)).unwrap()));
        }
        runs.extend(order.take().unwrap().unwrap());
        assert!(runs.len() > 1);
        assert!(runs.iter().all(|r| r.num_rows() < ROW_GROUP_ROWS && r.get_array_memory_size() < 2 * RUN_BYTES));
        let all: Vec<i64> = ids(&runs).concat();
        assert_eq!(all.len(), 40_000);
        let mut sorted = all.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 40_000, "every row once");

        // already in order: the batches held are the run
        let mut order = by_key();
        let input = batch(0..10, 1);
        assert!(order.push(input.clone()).unwrap().is_empty());
        let runs = order.take().unwrap().unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].column(1).to_data().buffers()[1].as_ptr(), input.column(1).to_data().buffers()[1].as_ptr());
    }

    #[test]
    fn runs_of_a_sort_order_end_at_their_bytes_whatever_their_rows() {
        use iceberg::spec::{NestedField, NullOrder, PrimitiveType, Schema, SortDirection, SortField, SortOrder};
        use iceberg::spec::{Transform, Type};
        let schema = Schema::builder()
            .with_fields(vec![NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into()])
            .build()
            .unwrap();
        let field = SortField {
            source_id: 1,
            transform: Transform::Identity,
            direction: SortDirection::Descending,
            null_order: NullOrder::Last,
        };
        let order = SortOrder::builder().with_fields(vec![field]).build_unbound().unwrap();
        let order = RowOrder::of_sort_order(&schema, &order, &[]).unwrap().unwrap();
        let one = batch(0..1000, 4); // (every batch below of this size: ids of at most 4 digits)
        let mut runs = SortedRuns::new(order, usize::MAX, 3 * one.get_array_memory_size());
        let mut done = vec![];
        for c in 0..7 {
            done.extend(runs.push(batch((0..1000).map(|i| (i * 37) % 1000 + c * 1000), 4)).unwrap());
        }
        assert_eq!(done.len(), 2, "two runs of three batches");
        assert!(runs.held_bytes() > 0);
        done.extend(runs.take().unwrap());
        assert!(runs.take().unwrap().is_none() && runs.held_bytes() == 0);
        let sizes: Vec<usize> = done.iter().map(|r| r.iter().map(|b| b.num_rows()).sum()).collect();
        assert_eq!(sizes, [3000, 3000, 1000]);
        for run in &done {
            let ids: Vec<i64> = ids(run).concat();
            assert!(ids.windows(2).all(|w| w[0] > w[1]), "each run sorted descending");
        }
    }
}
