//! The primary-key check of a statement, in bounded memory.
//!
//! A statement's writers collect the keys of the rows they write (row format, packed) so the
//! check at the end of the statement needs no read: the keys must be distinct, and none may be
//! live in the table. Those keys and the hash set built over them take about 50 bytes a key (a
//! BIGINT key), so a 20M-row INSERT would hold 1 GB. The writers of one statement share a
//! [`KeyBudget`], a quarter of DuckDB's `memory_limit`: once their keys would exceed it, they drop
//! them and the check reads the keys back from the files the statement wrote, one hash partition
//! at a time, each partition's keys within the budget ([`check_partitioned`]). Nothing is spilled:
//! the data files already hold the keys, and reading a key column back is cheap.

use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use arrow::array::RecordBatch;
use rayon::prelude::*;

use iceberg::spec::{DataFile, SchemaRef};

use crate::error::Result;
use crate::read::caches::ReadCaches;
use crate::read::deletes::FileDeletes;
use crate::read::keys::{probe, KeyColumns, KeyRange, KeySet, PackedKeys};
use crate::read::scan::ScanPlan;

/// Bytes a collected key costs beyond its own bytes: its end offset in the packed buffer and its
/// slot in the hash set of the check (measured: ~50 bytes per 9-byte BIGINT key in all).
pub const KEY_OVERHEAD_BYTES: usize = 40;

/// The bytes `keys` hold, as a [`KeyBudget`] counts them.
pub fn budget_bytes(keys: &PackedKeys) -> usize {
    keys.data_len() + keys.len() * KEY_OVERHEAD_BYTES
}

/// The share of DuckDB's memory limit the keys of one statement may take.
const BUDGET_SHARE: u64 = 4;

/// How many key bytes the writers of one statement may hold together.
pub struct KeyBudget {
    limit: usize,
    used: AtomicUsize,
    exceeded: AtomicBool,
}

impl KeyBudget {
    /// The budget for a statement run under DuckDB's `memory_limit` (bytes).
    pub fn for_memory_limit(memory_limit: u64) -> Arc<KeyBudget> {
        let limit = (memory_limit / BUDGET_SHARE).min(usize::MAX as u64) as usize;
        Arc::new(KeyBudget { limit, used: AtomicUsize::new(0), exceeded: AtomicBool::new(false) })
    }

    /// Takes `bytes` more; false (from then on) once the statement's keys would exceed the budget.
    pub fn take(&self, bytes: usize) -> bool {
        if self.exceeded.load(Ordering::Relaxed) {
            return false;
        }
        let used = self.used.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if used > self.limit {
            self.exceeded.store(true, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// A budget already spent: the statement's check reads every key back from its files (files
    /// adopted by `skade_add_files`, whose keys no writer collected).
    pub fn exhausted(memory_limit: u64) -> Arc<KeyBudget> {
        let budget = Self::for_memory_limit(memory_limit);
        budget.exceeded.store(true, Ordering::Relaxed);
        budget
    }

    pub fn exceeded(&self) -> bool {
        self.exceeded.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

/// Why the keys of a statement fail the check: a key written twice, or one already live.
pub enum KeyClash {
    Repeated(Vec<u8>),
    Live(Vec<u8>),
}

/// Checks the keys of the rows in `written` (the statement's files, all of whose rows are new)
/// against each other and against the live rows `existing` reads, one hash partition of the keys
/// at a time so that each partition's keys fit `budget` bytes. `existing`'s name mapping reads
/// the written files too (adopted files have no field ids).
pub fn check_partitioned(
    schema: SchemaRef,
    caches: Arc<ReadCaches>,
    key: &KeyColumns,
    written: &[DataFile],
    existing: &ScanPlan,
    budget: usize,
) -> Result<Option<KeyClash>> {
    let rows: u64 = written.iter().map(|f| f.record_count()).sum();
    let files = written.iter().map(|f| (f.file_path().to_string(), f.record_count(), FileDeletes::default())).collect();
    let plan = ScanPlan::for_files(schema, caches, files, existing.names())?.read_only(Some(&key.indexes));
    by_partition(
        &plan,
        key,
        partitions(key, rows, budget),
        |_| true,
        |set| Ok(find_live(existing, key, set)?.map(KeyClash::Live)),
    )
}

/// Why the rows of a table cannot take a new primary key.
pub enum KeyFault {
    /// A key column (its name) is NULL in a row.
    Null(String),
    /// Rows share this key.
    Repeated(Vec<u8>),
}

/// Checks that the rows `plan` reads (a table's live rows, at least its `key` columns read, for
/// ADD PRIMARY KEY) could have `key` as their primary key: no key column NULL, no key held by two
/// rows. Keys are compared a hash partition at a time, each within `budget` bytes.
pub fn check_new_key(plan: &ScanPlan, key: &KeyColumns, budget: usize) -> Result<Option<KeyFault>> {
    // (NULLs are looked for in the first pass over the keys, not in a read of their own)
    let mut null = None;
    let first_null = |batch: &RecordBatch| {
        null =
            (0..key.names.len()).find(|&i| batch.column(key.indexes[i]).null_count() > 0).map(|i| key.names[i].clone());
        null.is_none()
    };
    let partitions = partitions(key, plan.estimated_rows(), budget);
    let clash = by_partition(plan, key, partitions, first_null, |_| Ok(None))?;
    if let Some(column) = null {
        return Ok(Some(KeyFault::Null(column)));
    }
    Ok(clash.map(|c| match c {
        KeyClash::Repeated(k) | KeyClash::Live(k) => KeyFault::Repeated(k),
    }))
}

/// How many hash partitions keep the keys of `rows` rows within `budget` bytes each.
fn partitions(key: &KeyColumns, rows: u64, budget: usize) -> u64 {
    let key_bytes: u64 = key.types.iter().map(|t| t.primitive_width().unwrap_or(16) as u64 + 1).sum();
    let need = rows * (key_bytes + KEY_OVERHEAD_BYTES as u64);
    need.div_ceil(budget.max(1) as u64).max(1)
}

/// Reads the keys of the rows `plan` reads once per hash partition (of `partitions`): each
/// partition's keys must be distinct, then `then` checks them further. The first clash ends it.
/// `each` sees every batch of the first pass; false ends it all, with no clash.
fn by_partition(
    plan: &ScanPlan,
    key: &KeyColumns,
    partitions: u64,
    mut each: impl FnMut(&RecordBatch) -> bool,
    mut then: impl FnMut(&KeySet<&[u8]>) -> Result<Option<KeyClash>>,
) -> Result<Option<KeyClash>> {
    let converter = key.converter()?;
    // A hasher of fixed keys: every pass must put a key in the same partition.
    let hasher = ahash::RandomState::with_seeds(0x736b, 0x6164, 0x6520, 0x6b65);
    for partition in 0..partitions {
        let mut keys = PackedKeys::default();
        for task in 0..plan.task_count() {
            for batch in plan.open(task)? {
                let batch = batch?;
                if partition == 0 && !each(&batch) {
                    return Ok(None);
                }
                let encoded = key.encode(&converter, &batch)?;
                for row in encoded.iter() {
                    let mut h = hasher.build_hasher();
                    h.write(row.data());
                    if h.finish() % partitions == partition {
                        keys.push(row.data());
                    }
                }
            }
        }
        let set: KeySet<&[u8]> = match keys.unique() {
            Ok(set) => set,
            Err(repeated) => return Ok(Some(KeyClash::Repeated(repeated.to_vec()))),
        };
        if let Some(clash) = then(&set)? {
            return Ok(Some(clash));
        }
    }
    Ok(None)
}

/// The first of `keys` that is live in the rows `plan` reads (the key columns, in `key` order),
/// reading its files in parallel.
pub fn find_live(plan: &ScanPlan, key: &KeyColumns, keys: &KeySet<&[u8]>) -> Result<Option<Vec<u8>>> {
    let converter = key.converter()?;
    let Some(range) = KeyRange::of(&converter, keys.iter().copied())? else {
        return Ok(None);
    };
    let found = (0..plan.task_count()).into_par_iter().map(|task| -> Result<Option<Vec<u8>>> {
        let converter = key.converter()?;
        for batch in plan.open(task)? {
            let batch = batch?;
            let mut found = None;
            probe(&converter, &range, batch.columns(), |_, k| {
                if keys.contains(k) {
                    found = Some(k.to_vec());
                }
                found.is_none()
            })?;
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    });
    found.find_map_any(|r| r.transpose()).transpose()
}
