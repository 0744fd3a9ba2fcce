//! Rows of a table with a primary key, held and handed to the Parquet writer sorted by key in
//! runs: a run is a row group's worth of rows (so a row group is one sorted run and its key pages
//! cover narrow, disjoint key ranges whatever the insert order), or fewer rows when they reach
//! [`RUN_BYTES`] first (wide rows: a row group then holds several sorted runs, and a probe decodes
//! one key page per run at most). See docs/design/lookup.md.

use std::collections::VecDeque;

use arrow::array::{Array, ArrayRef, RecordBatch};
use arrow::compute::{concat, interleave_record_batch, lexsort_to_indices, SortColumn};

use crate::error::Result;

/// Bound on the bytes of rows held for one run (Arrow's memory size): a run is copied once when
/// sorted, so a writer holds at most about twice this (and never builds an array whose offsets
/// would overflow).
pub const RUN_BYTES: usize = 64 << 20;

pub struct KeyOrder {
    /// The key columns (top-level indexes), in key order.
    key: Vec<usize>,
    /// Rows per row group: a run's rows at most.
    group_rows: usize,
    held: VecDeque<RecordBatch>,
    rows: usize,
    bytes: usize,
}

impl KeyOrder {
    /// Rows sorted by the columns `key`, in runs of at most `group_rows` (the writer's row group).
    pub fn new(key: Vec<usize>, group_rows: usize) -> Self {
        KeyOrder { key, group_rows: group_rows.max(1), held: VecDeque::new(), rows: 0, bytes: 0 }
    }

    /// Holds `batch`; returns the runs complete now, each sorted by key.
    pub fn push(&mut self, batch: RecordBatch) -> Result<Vec<RecordBatch>> {
        self.rows += batch.num_rows();
        self.bytes += batch.get_array_memory_size();
        self.held.push_back(batch);
        let mut runs = vec![];
        while self.rows >= self.group_rows || self.bytes >= RUN_BYTES && self.rows > 0 {
            let rows = self.rows.min(self.group_rows);
            runs.extend(self.run(rows)?);
        }
        Ok(runs)
    }

    /// The rows still held, sorted (at the end of the stream).
    pub fn finish(mut self) -> Result<Vec<RecordBatch>> {
        let rows = self.rows;
        if rows == 0 {
            return Ok(vec![]);
        }
        self.run(rows)
    }

    /// The first `rows` rows held, sorted by key (as the batches held, when already in order).
    fn run(&mut self, rows: usize) -> Result<Vec<RecordBatch>> {
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

        let columns = self
            .key
            .iter()
            .map(|&c| {
                let arrays: Vec<&dyn Array> = parts.iter().map(|b| b.column(c).as_ref()).collect();
                Ok(SortColumn { values: concat(&arrays)? as ArrayRef, options: None })
            })
            .collect::<Result<Vec<_>>>()?;
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

    #[test]
    fn runs_are_row_groups_sorted_by_key_and_keep_every_row() {
        // 300,000 keys in a scrambled order (a permutation), in chunks of 2,000 rows
        let n = 300_000i64;
        let keys: Vec<i64> = (0..n).map(|i| i * 7919 % 300_007).collect();
        let mut order = KeyOrder::new(vec![0], ROW_GROUP_ROWS);
        let mut runs = vec![];
        for chunk in keys.chunks(2000) {
            runs.extend(order.push(batch(chunk.iter().copied(), 1)).unwrap());
        }
        runs.extend(order.finish().unwrap());
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
        let mut order = KeyOrder::new(vec![0], ROW_GROUP_ROWS);
        let mut runs = vec![];
        for c in 0..40i64 {
            runs.extend(order.push(batch((0..1000).map(|i| (i * 37 + c) % 1000 + c * 1000), 4096)).unwrap());
        }
        runs.extend(order.finish().unwrap());
        assert!(runs.len() > 1);
        assert!(runs.iter().all(|r| r.num_rows() < ROW_GROUP_ROWS && r.get_array_memory_size() < 2 * RUN_BYTES));
        let all: Vec<i64> = ids(&runs).concat();
        assert_eq!(all.len(), 40_000);
        let mut sorted = all.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 40_000, "every row once");

        // already in order: the batches held are the run
        let mut order = KeyOrder::new(vec![0], ROW_GROUP_ROWS);
        let input = batch(0..10, 1);
        assert!(order.push(input.clone()).unwrap().is_empty());
        let runs = order.finish().unwrap();
        assert_eq!(runs.len(), 1);
        assert_eq!(runs[0].column(1).to_data().buffers()[1].as_ptr(), input.column(1).to_data().buffers()[1].as_ptr());
    }
}
