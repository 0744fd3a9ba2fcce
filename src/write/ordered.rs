//! Writes that keep a statement's row order while its threads write in parallel: `INSERT ...
//! SELECT ... ORDER BY` and `CREATE TABLE AS` under DuckDB's `preserve_insertion_order`.
//!
//! DuckDB numbers the batches of an ordered source (a row group of a table or Parquet file, a
//! partition of a sort: about 122,880 rows) and hands them to its threads in turn, each batch to
//! one thread; every batch below the pipeline's minimum batch index has ended. A table reads its
//! files in manifest order, so a file holds consecutive batches only and the statement stages its
//! files ordered by the first batch each holds:
//! - a batch that reaches a run's size streams into files of its own, in its thread, as it comes;
//! - a smaller one (a filter kept few of its rows) is held, and once every batch before it has
//!   ended, it is written together with the small batches next to it, up to a run's size, by the
//!   thread that learns of it, so that a selective filter does not leave a file per batch.
//!
//! The same idea as DuckDB's batch-index sinks (`PhysicalBatchInsert`): each thread writes whole
//! batches, and the batches are put in order at the end (here: the files, in the manifest).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use arrow::array::{Array, StructArray};

use super::writer::{TableWriter, Written, ROW_GROUP_ROWS};
use crate::error::{Error, Result};
use crate::io::remove_files;

/// A run's size: its rows reach a row group's, or its rows take this much memory (Arrow's).
pub const RUN_ROWS: usize = ROW_GROUP_ROWS;
pub const RUN_BYTES: usize = 64 << 20;

/// Opens a writer of new data files of the statement's table.
pub type OpenWriter = Box<dyn Fn() -> Result<TableWriter> + Send + Sync>;

/// The statement's ordered write, shared by its threads' [`BatchWriter`]s.
pub struct OrderedWrite {
    open: OpenWriter,
    state: Mutex<Held>,
}

/// Small batches whose neighbours are not all known yet, and the files written so far.
#[derive(Default)]
struct Held {
    /// Ended small batches, by batch index.
    small: BTreeMap<u64, Part>,
    /// Batches that streamed into files of their own: no run spans them.
    own: BTreeSet<u64>,
    /// What each writer wrote, by the first batch index its files hold.
    written: Vec<(u64, Written)>,
}

/// Rows of one batch, held.
#[derive(Default)]
struct Part {
    arrays: Vec<StructArray>,
    rows: usize,
    bytes: usize,
}

impl Part {
    fn push(&mut self, array: StructArray) {
        self.rows += array.len();
        self.bytes += array.get_array_memory_size();
        self.arrays.push(array);
    }

    fn is_run(&self) -> bool {
        self.rows >= RUN_ROWS || self.bytes >= RUN_BYTES
    }
}

/// Consecutive small batches written as one file (or several, at the target file size).
struct Run {
    first: u64,
    last: u64,
    parts: Vec<(u64, Part)>,
    rows: usize,
    bytes: usize,
}

impl Run {
    fn is_full(&self) -> bool {
        self.rows >= RUN_ROWS || self.bytes >= RUN_BYTES
    }
}

impl Held {
    /// Takes the runs of small batches that can no longer grow: those below `below` (every batch
    /// below it has ended; None: every batch has) that reached a run's size or are followed by a
    /// batch with files of its own. The last run below `below` may still grow, and stays.
    fn take_runs(&mut self, below: Option<u64>) -> Vec<Run> {
        let ended: Vec<u64> = self.small.range(..below.unwrap_or(u64::MAX)).map(|(b, _)| *b).collect();
        let mut runs = vec![];
        let mut current: Option<Run> = None;
        for b in ended {
            if let Some(run) = current.take() {
                match self.own.range(run.last..b).next() {
                    Some(_) => runs.push(run), // (a batch with its own files comes between)
                    None => current = Some(run),
                }
            }
            let part = self.small.remove(&b).unwrap_or_default();
            let run = current.get_or_insert_with(|| Run { first: b, last: b, parts: vec![], rows: 0, bytes: 0 });
            run.last = b;
            run.rows += part.rows;
            run.bytes += part.bytes;
            run.parts.push((b, part));
            if run.is_full() {
                runs.extend(current.take());
            }
        }
        if let Some(run) = current {
            let closed = match below {
                None => true,
                Some(limit) => self.own.range(run.last..limit).next().is_some(),
            };
            if closed {
                runs.push(run);
            } else {
                self.small.extend(run.parts);
            }
        }
        // A batch with its own files below every held batch and below `below` separates nothing
        // any more: the batches that end later are all above `below`.
        let first_held = self.small.keys().next().copied().unwrap_or(u64::MAX);
        let limit = below.unwrap_or(u64::MAX).min(first_held);
        self.own = self.own.split_off(&limit);
        runs
    }
}

impl OrderedWrite {
    pub fn new(open: OpenWriter) -> Arc<Self> {
        Arc::new(OrderedWrite { open, state: Mutex::new(Held::default()) })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Held>> {
        self.state.lock().map_err(|_| Error::internal("an ordered write's state is poisoned"))
    }

    /// A writer for one thread of the statement.
    pub fn writer(self: &Arc<Self>) -> BatchWriter {
        BatchWriter { shared: self.clone(), batch: None, held: Part::default(), own: None, rows: 0 }
    }

    /// Writes the runs that can no longer grow now that every batch below `min_batch` has ended,
    /// in the calling thread.
    pub fn write_ready(&self, min_batch: u64) -> Result<()> {
        let runs = self.lock()?.take_runs(Some(min_batch));
        for run in runs {
            self.write_run(run)?;
        }
        Ok(())
    }

    /// Once every thread finished: writes the batches still held and returns what was written,
    /// in the statement's order (stage it in that order).
    pub fn finish(&self) -> Result<Vec<Written>> {
        let runs = self.lock()?.take_runs(None);
        for run in runs {
            self.write_run(run)?;
        }
        let mut written = std::mem::take(&mut self.lock()?.written);
        written.sort_by_key(|(first, _)| *first);
        Ok(written.into_iter().map(|(_, w)| w).collect())
    }

    fn write_run(&self, run: Run) -> Result<()> {
        let arrays = run.parts.iter().flat_map(|(_, part)| part.arrays.iter());
        let written = write_all((self.open)()?, arrays)?;
        self.lock()?.written.push((run.first, written));
        Ok(())
    }

    fn add_small(&self, batch: u64, part: Part) -> Result<()> {
        self.lock()?.small.insert(batch, part);
        Ok(())
    }

    fn add_own(&self, batch: u64, written: Written) -> Result<()> {
        let mut held = self.lock()?;
        held.own.insert(batch);
        held.written.push((batch, written));
        Ok(())
    }
}

impl Drop for OrderedWrite {
    /// A statement that did not finish leaves no files behind.
    fn drop(&mut self) {
        if let Ok(held) = self.state.get_mut() {
            remove_files(held.written.iter().flat_map(|(_, w)| w.files.iter().map(|f| f.file_path())));
        }
    }
}

/// One thread's writer of an [`OrderedWrite`]: told which batch its rows belong to.
pub struct BatchWriter {
    shared: Arc<OrderedWrite>,
    batch: Option<u64>,
    /// The current batch's rows while it is smaller than a run.
    held: Part,
    /// The current batch's own files, once it reached a run's size.
    own: Option<TableWriter>,
    rows: u64,
}

impl BatchWriter {
    /// The rows written from now on are batch `batch`'s (the batch before it has ended); every
    /// batch below `min_batch` has ended, in every thread.
    pub fn start_batch(&mut self, batch: u64, min_batch: u64) -> Result<()> {
        if self.batch != Some(batch) {
            self.end_batch()?;
            self.batch = Some(batch);
        }
        self.shared.write_ready(min_batch)
    }

    /// The table's columns, in order, as DuckDB hands them over.
    pub fn write(&mut self, columns: &StructArray) -> Result<()> {
        if self.batch.is_none() {
            return Err(Error::internal("an ordered write got rows before their batch"));
        }
        self.rows += columns.len() as u64;
        if let Some(writer) = &mut self.own {
            return writer.write(columns);
        }
        self.held.push(columns.clone());
        if self.held.is_run() {
            let mut writer = (self.shared.open)()?;
            for array in std::mem::take(&mut self.held).arrays {
                if let Err(e) = writer.write(&array) {
                    abandon(writer);
                    return Err(e);
                }
            }
            self.own = Some(writer);
        }
        Ok(())
    }

    /// Ends the thread's last batch (the statement writes what is held when it finishes).
    pub fn finish(mut self) -> Result<u64> {
        self.end_batch()?;
        Ok(self.rows)
    }

    fn end_batch(&mut self) -> Result<()> {
        let Some(batch) = self.batch.take() else {
            return Ok(());
        };
        if let Some(writer) = self.own.take() {
            self.shared.add_own(batch, writer.finish()?)?;
        } else if self.held.rows > 0 {
            self.shared.add_small(batch, std::mem::take(&mut self.held))?;
        }
        Ok(())
    }
}

impl Drop for BatchWriter {
    /// A thread that failed mid-batch leaves no files behind.
    fn drop(&mut self) {
        if let Some(writer) = self.own.take() {
            abandon(writer);
        }
    }
}

/// Writes `arrays` with `writer` and closes its files; on failure, removes them.
fn write_all<'a>(mut writer: TableWriter, arrays: impl Iterator<Item = &'a StructArray>) -> Result<Written> {
    for array in arrays {
        if let Err(e) = writer.write(array) {
            abandon(writer);
            return Err(e);
        }
    }
    writer.finish()
}

/// Closes a writer that failed, or whose statement did, and removes its files.
fn abandon(writer: TableWriter) {
    if let Ok(written) = writer.finish() {
        remove_files(written.files.iter().map(|f| f.file_path()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Int64Array};
    use arrow::datatypes::{DataType, Field};

    fn part(rows: usize) -> Part {
        let values: ArrayRef = Arc::new(Int64Array::from(vec![0i64; rows]));
        let mut part = Part::default();
        part.push(StructArray::from(vec![(Arc::new(Field::new("a", DataType::Int64, false)), values)]));
        part
    }

    fn held(small: &[(u64, usize)], own: &[u64]) -> Held {
        let mut h = Held::default();
        for &(b, rows) in small {
            h.small.insert(b, part(rows));
        }
        h.own.extend(own.iter().copied());
        h
    }

    fn spans(runs: &[Run]) -> Vec<(u64, u64)> {
        runs.iter().map(|r| (r.first, r.last)).collect()
    }

    #[test]
    fn the_last_run_below_the_minimum_waits_for_its_neighbours() {
        let mut h = held(&[(1, 10), (2, 10), (5, 10)], &[]);
        assert!(h.take_runs(Some(3)).is_empty());
        assert_eq!(h.small.len(), 3);
        // batches 3 and 4 ended empty: 1, 2 and 5 are consecutive
        let runs = h.take_runs(None);
        assert_eq!(spans(&runs), vec![(1, 5)]);
        assert_eq!(runs[0].rows, 30);
    }

    #[test]
    fn a_batch_with_its_own_files_splits_runs() {
        let mut h = held(&[(1, 10), (2, 10), (4, 10), (6, 10)], &[3]);
        let runs = h.take_runs(Some(5));
        assert_eq!(spans(&runs), vec![(1, 2)]);
        // 4 may still grow with 6 (5 ended empty or is still running)
        assert_eq!(h.small.keys().copied().collect::<Vec<_>>(), vec![4, 6]);
        assert!(h.own.is_empty(), "3 separates nothing any more");
        h.own.insert(5);
        assert_eq!(spans(&h.take_runs(Some(7))), vec![(4, 4)]);
        assert_eq!(spans(&h.take_runs(None)), vec![(6, 6)]);
    }

    #[test]
    fn a_run_ends_at_a_run_size() {
        let mut h = held(&[(1, RUN_ROWS - 1), (2, 1), (3, 5)], &[]);
        let runs = h.take_runs(Some(10));
        assert_eq!(spans(&runs), vec![(1, 2)]);
        assert_eq!(h.small.keys().copied().collect::<Vec<_>>(), vec![3]);
    }

    #[test]
    fn own_batches_above_the_minimum_are_kept() {
        let mut h = held(&[(1, 10)], &[8]);
        assert!(h.take_runs(Some(2)).is_empty());
        assert!(h.own.contains(&8), "a batch ending later below 8 must not merge across it");
        h.small.insert(7, part(1));
        h.small.insert(9, part(1));
        assert_eq!(spans(&h.take_runs(None)), vec![(1, 7), (9, 9)]);
    }

    /// Threads ending batches in random order, some empty, some small, some with files of their
    /// own: the files, ordered by first batch, hold every batch with rows, in order.
    #[test]
    fn random_schedules_keep_the_order() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..500 {
            let threads = 1 + (next() % 4) as usize;
            let batches = 1 + next() % 40;
            let sizes: Vec<usize> = (0..batches)
                .map(|_| match next() % 4 {
                    0 => 0,
                    1 => RUN_ROWS,
                    _ => (next() % 70_000) as usize,
                })
                .collect();
            let mut h = Held::default();
            let mut files: Vec<(u64, Vec<u64>)> = vec![];
            let mut current: Vec<Option<u64>> = vec![None; threads];
            let mut running: Vec<usize> = (0..threads).collect();
            let mut handed_out = 0;
            while !running.is_empty() {
                // a thread ends its batch and takes the next one (or finishes)
                let pick = (next() as usize) % running.len();
                let t = running[pick];
                if let Some(b) = current[t] {
                    match sizes[b as usize] {
                        0 => {}
                        rows if rows >= RUN_ROWS => {
                            h.own.insert(b);
                            files.push((b, vec![b]));
                        }
                        rows => {
                            h.small.insert(b, Part { arrays: vec![], rows, bytes: rows * 8 });
                        }
                    }
                }
                current[t] = (handed_out < batches).then_some(handed_out);
                handed_out += 1;
                if current[t].is_none() {
                    running.remove(pick);
                    continue;
                }
                let min = current.iter().flatten().min().copied().unwrap_or(u64::MAX);
                for run in h.take_runs(Some(min)) {
                    files.push((run.first, run.parts.iter().map(|(b, _)| *b).collect()));
                }
            }
            for run in h.take_runs(None) {
                files.push((run.first, run.parts.iter().map(|(b, _)| *b).collect()));
            }
            files.sort_by_key(|(first, _)| *first);
            let order: Vec<u64> = files.iter().flat_map(|(_, b)| b.clone()).collect();
            let expected: Vec<u64> = (0..batches).filter(|b| sizes[*b as usize] > 0).collect();
            assert_eq!(order, expected, "sizes {sizes:?}, {threads} threads");
        }
    }
}
