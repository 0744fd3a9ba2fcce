//! Lookup telemetry since the extension was loaded: what `skade_lookup_stats()` reports, and what
//! the benchmark's ceilings check (a broken cache or a lost pruning step shows up as more bytes,
//! reads, opens or decoded rows per lookup long before it shows up as time).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub static LOOKUPS: AtomicU64 = AtomicU64::new(0);
pub static KEYS: AtomicU64 = AtomicU64::new(0);
pub static ROWS_FOUND: AtomicU64 = AtomicU64::new(0);
pub static BYTES_READ: AtomicU64 = AtomicU64::new(0);
pub static READS: AtomicU64 = AtomicU64::new(0);
pub static FILE_OPENS: AtomicU64 = AtomicU64::new(0);
pub static ROWS_DECODED: AtomicU64 = AtomicU64::new(0);

/// One read of `bytes` bytes.
pub fn read(bytes: u64) {
    READS.fetch_add(1, Relaxed);
    BYTES_READ.fetch_add(bytes, Relaxed);
}

/// The counters, by name, in a stable order.
pub fn snapshot() -> Vec<(&'static str, u64)> {
    [
        ("lookups", &LOOKUPS),
        ("keys", &KEYS),
        ("rows_found", &ROWS_FOUND),
        ("bytes_read", &BYTES_READ),
        ("reads", &READS),
        ("file_opens", &FILE_OPENS),
        ("rows_decoded", &ROWS_DECODED),
    ]
    .into_iter()
    .map(|(name, counter)| (name, counter.load(Relaxed)))
    .collect()
}
