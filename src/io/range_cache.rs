//! Byte ranges of objects kept in memory (issue 44: "TPC-H at least 1.2x DuckLake" on a bucket).
//! A query run twice should not fetch its column chunks over the network twice: DuckDB's own
//! reads of remote files keep what they fetched in its external file cache, and skade's reads,
//! which go through the core, keep theirs here. Objects skade reads are never rewritten under
//! their name (uuid names, metadata created if absent), so a range once read stays true: the cache
//! is never invalidated, only evicted (least recently used first) to stay within its budget.
//!
//! Entries are the ranges the Parquet reader asked for (column chunks, pages), not the merged
//! GETs that fetched them: a query over other columns of the same row groups hits the chunks it
//! shares. Local files are not kept: the operating system's page cache does that.
//!
//! The budget: `SKADE_OBJECT_CACHE_MB` (0 turns it off), else a quarter of the machine's memory,
//! at most 4 GiB.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

type Key = (Arc<str>, u64, u64);

struct Entry {
    bytes: Bytes,
    used: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    /// Entries by last use (a tick), oldest first.
    order: BTreeMap<u64, Key>,
    tick: u64,
    bytes: u64,
    /// The location strings of entries, shared by their keys.
    names: HashMap<Arc<str>, usize>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);
static HITS: AtomicU64 = AtomicU64::new(0);
static MISSES: AtomicU64 = AtomicU64::new(0);

/// The cache's budget in bytes (0: off).
pub fn budget() -> u64 {
    static BUDGET: OnceLock<u64> = OnceLock::new();
    *BUDGET.get_or_init(|| {
        if let Some(mb) = std::env::var("SKADE_OBJECT_CACHE_MB").ok().and_then(|v| v.trim().parse::<u64>().ok()) {
            return mb << 20;
        }
        // SAFETY: sysconf reads a system constant.
        let (pages, page) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
        let memory = (pages.max(0) as u64).saturating_mul(page.max(0) as u64);
        // (in a container, its limit: cgroup v2, else v1; "max" or absent is no limit)
        let limit = ["/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"]
            .iter()
            .find_map(|f| std::fs::read_to_string(f).ok()?.trim().parse::<u64>().ok());
        (memory.min(limit.unwrap_or(u64::MAX)) / 4).min(4 << 30)
    })
}

/// The bytes `start..start + len` of the object at `location`, when kept.
pub fn get(location: &str, start: u64, len: u64) -> Option<Bytes> {
    if budget() == 0 {
        return None;
    }
    let key: Key = (Arc::from(location), start, len); // (allocated before the lock)
    let mut guard = STATE.lock().unwrap_or_else(|p| p.into_inner());
    let Some(entry) = guard.as_mut().and_then(|state| state.entries.get_mut(&key)) else {
        MISSES.fetch_add(1, Ordering::Relaxed);
        return None;
    };
    HITS.fetch_add(1, Ordering::Relaxed);
    let used = entry.used;
    let bytes = entry.bytes.clone();
    let Some(state) = guard.as_mut() else { return Some(bytes) };
    state.tick += 1;
    let key = state.order.remove(&used).unwrap_or(key);
    if let Some(entry) = state.entries.get_mut(&key) {
        entry.used = state.tick;
    }
    state.order.insert(state.tick, key);
    Some(bytes)
}

/// Keeps `bytes`, the object's bytes from `start` (copied: a slice would hold the whole GET it
/// came from, gaps included), evicting the least recently used beyond the budget.
pub fn put(location: &str, start: u64, bytes: &[u8]) {
    let budget = budget();
    let len = bytes.len() as u64;
    if budget == 0 || len == 0 || len > budget / 8 || !kept_by_name(location) {
        return; // (one range never takes more than an eighth of the cache)
    }
    let copy = Bytes::copy_from_slice(bytes); // (before the lock: other threads go on)
    let mut guard = STATE.lock().unwrap_or_else(|p| p.into_inner());
    let state = guard.get_or_insert_with(State::default);
    let name = match state.names.get_key_value(location) {
        Some((name, _)) => name.clone(),
        None => Arc::from(location),
    };
    let key: Key = (name.clone(), start, len);
    if state.entries.contains_key(&key) {
        return;
    }
    state.tick += 1;
    let tick = state.tick;
    state.entries.insert(key.clone(), Entry { bytes: copy, used: tick });
    state.order.insert(tick, key);
    *state.names.entry(name).or_insert(0) += 1;
    state.bytes += len;
    while state.bytes > budget {
        let Some((_, oldest)) = state.order.pop_first() else { break };
        if let Some(gone) = state.entries.remove(&oldest) {
            state.bytes -= gone.bytes.len() as u64;
            if let Some(n) = state.names.get_mut(&oldest.0) {
                *n -= 1;
                if *n == 0 {
                    state.names.remove(&oldest.0);
                }
            }
        }
    }
}

/// Whether the object at `location` is one skade named, which is never rewritten: its file name
/// starts with a uuid (data and delete files, manifests `<uuid>-m0.avro`, manifest lists
/// `snap-<id>-<uuid>.avro`, metadata `<version>-<uuid>.metadata.json`). A file adopted by
/// `skade_add_files` keeps the user's name, and the user may write it again: it is not kept.
pub fn kept_by_name(location: &str) -> bool {
    let name = location.rsplit('/').next().unwrap_or("");
    let name = name.strip_prefix("snap-").and_then(|n| n.split_once('-').map(|(_, rest)| rest)).unwrap_or(name);
    let starts_with_uuid = |n: &str| n.get(..36).is_some_and(|prefix| uuid::Uuid::try_parse(prefix).is_ok());
    // (a uuid whose first group is all digits is no version: tried as it is first)
    starts_with_uuid(name)
        || match name.split_once('-') {
            Some((version, rest)) if version.len() >= 5 && version.bytes().all(|b| b.is_ascii_digit()) => {
                starts_with_uuid(rest)
            }
            _ => false,
        }
}

/// (hits, misses, bytes kept) since the process started.
pub fn stats() -> (u64, u64, u64) {
    let bytes = STATE.lock().unwrap_or_else(|p| p.into_inner()).as_ref().map_or(0, |s| s.bytes);
    (HITS.load(Ordering::Relaxed), MISSES.load(Ordering::Relaxed), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_objects_skade_named_are_kept() {
        for kept in [
            "s3://b/wh/main/t/data/01a24b35-51b4-7572-895e-b57c7fee6426-00000.parquet",
            "s3://b/wh/main/t/metadata/7d2aaf0b-ab39-4569-b42c-a91f3967683c-m0.avro",
            "s3://b/wh/main/t/metadata/snap-6-adfe710d-269b-4e28-9d6b-d92516bfda13.avro",
            "s3://b/wh/main/t/metadata/00006-a2afc3ec-bdd7-4b33-8ed3-3e7445cbc7d1.metadata.json",
        ] {
            assert!(kept_by_name(kept), "{kept}");
        }
        assert!(kept_by_name("s3://b/t/metadata/100000-a2afc3ec-bdd7-4b33-8ed3-3e7445cbc7d1.metadata.json"));
        // (a uuid's first group may be all digits, as one in 40 random ones is: no version)
        assert!(kept_by_name("s3://b/wh/main/t/data/01234567-51b4-7572-895e-b57c7fee6426-00000.parquet"));
        assert!(kept_by_name("s3://b/t/metadata/00002-01234567-bdd7-4b33-8ed3-3e7445cbc7d1.metadata.json"));
        for not in [
            "s3://b/exports/day.parquet",
            "s3://b/x/snap-1-notauuid.avro",
            "s3://b/x/00001-short.metadata.json",
            "s3://b/exports/orders_2024_q1_northern_region_caffé.parquet",
        ] {
            assert!(!kept_by_name(not), "{not}");
        }
    }

    #[test]
    fn ranges_are_served_as_kept_and_evicted_oldest_first() {
        let location = format!("s3://cache-test/{}.parquet", uuid::Uuid::new_v4());
        assert!(get(&location, 0, 4).is_none());
        put(&location, 0, b"abcd");
        put(&location, 10, b"xyz");
        assert_eq!(&get(&location, 0, 4).unwrap()[..], b"abcd");
        assert_eq!(&get(&location, 10, 3).unwrap()[..], b"xyz");
        assert!(get(&location, 0, 3).is_none(), "a range is kept as asked, not as a prefix");
        let (hits, misses, bytes) = stats();
        assert!(hits >= 2 && misses >= 2 && bytes >= 7);
    }
}
