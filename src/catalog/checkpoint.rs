//! Checkpoints of a bucket log (issue 44, docs/design/object-storage.md, "Checkpoints and
//! truncation with hosts that lag"): the fold after a position, stored beside the log, so that a
//! host with no cache, or one whose cache is behind the log's truncation, starts from it and
//! replays only what follows. Without them a bucket log could never be truncated.
//!
//! A checkpoint is every table of the catalog file but `meta` (the format, warehouse, identity and
//! log stamp, which a joining cache has already, and the host-local `created_as`): rows in key
//! order, so two hosts' folds of one position dump to the same bytes and one host's checkpoint
//! serves all. redb has no backup API, hence this copy, row by row in one read transaction.
//!
//! Stored as `<log>/checkpoints/<20-digit position>.checkpoint`, created if absent (two writers of
//! one position write equal bytes; the second is told the name is taken and is done). Envelope:
//! magic `SKCP`, format, position, the catalog's uuid (a checkpoint of another lake is never
//! restored), the payload's length and xxh3-64, then the zstd-compressed rows.
//!
//! Who writes one: the host that wins a position that is a multiple of [`every`], in the
//! background after acknowledging it (seed 001: "the writer that lands the nth commit writes the
//! checkpoint"; a failure is reported and let go, the next multiple writes one). The same host
//! then truncates the log below the older of the two newest checkpoints (a host that finds the
//! newest damaged starts from the other; hosts a little behind replay without one), and removes
//! older checkpoints.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use redb::{ReadTransaction, ReadableTable, TableError, WriteTransaction};

use super::store::{Store, CATALOG_UUID};
use super::tables::{
    COMMITS, COMMIT_LOG, COMMIT_SEQ, CONSUMERS, COUNTERS, LINEAGE_SINKS, LOG_HEAD_ID, LOG_POSITION, MACROS, META,
    NEXT_SNAPSHOT_ID, SCHEMAS, TABLES,
};
use crate::error::{Error, Result};
use crate::io::object;

const MAGIC: &[u8; 4] = b"SKCP";
const FORMAT: u8 = 1;
const FOLDER: &str = "checkpoints";
const SUFFIX: &str = ".checkpoint";
/// Checkpoints kept whatever their age: the newest and the one before it (a host downloading the
/// newest when a newer one lands still finds it).
const KEPT: usize = 2;
/// The payload's zstd level: checkpoints are written once per `every` commits and read by every
/// new host, so a little more effort than the default pays.
const LEVEL: i32 = 6;

/// Positions between checkpoints: 1,024, or `SKADE_CHECKPOINT_EVERY` (tests, which cannot make a
/// thousand commits per case).
pub fn every() -> u64 {
    match EVERY.load(Ordering::Relaxed) {
        0 => {
            std::env::var("SKADE_CHECKPOINT_EVERY").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(1024)
        }
        n => n,
    }
}

/// Sets [`every`] for this process (tests in one binary: no environment to race over).
pub fn set_every(positions: u64) {
    EVERY.store(positions, Ordering::Relaxed);
}

static EVERY: AtomicU64 = AtomicU64::new(0);

/// A checkpoint in the bucket: its position, object and last write (the store's clock).
#[derive(Debug, Clone)]
pub struct Listed {
    pub position: u64,
    pub location: String,
    pub modified: SystemTime,
}

fn folder(log: &str) -> String {
    format!("{log}/{FOLDER}")
}

fn name(log: &str, position: u64) -> String {
    format!("{}/{position:020}{SUFFIX}", folder(log))
}

/// The checkpoints of the log at `log`, oldest first (one LIST).
pub fn list(log: &str) -> Result<Vec<Listed>> {
    let prefix = format!("{}/", folder(log));
    let mut found: Vec<Listed> = object::wait(object::list(&folder(log), None))?
        .into_iter()
        .filter_map(|l| {
            let position = l.location.strip_prefix(&prefix)?.strip_suffix(SUFFIX)?.parse().ok()?;
            Some(Listed { position, location: l.location, modified: l.modified })
        })
        .collect();
    found.sort_by_key(|c| c.position);
    Ok(found)
}

/// Writes the fold of `store` as a checkpoint of the log at `log`: its position.
pub(crate) fn write(store: &Store, log: &str) -> Result<u64> {
    let (position, catalog, rows) = store.read(|tx| {
        let position = tx.open_table(COUNTERS)?.get(LOG_POSITION)?.map(|v| v.value()).unwrap_or(0);
        let catalog = tx.open_table(META)?.get(CATALOG_UUID)?.map(|v| v.value().to_string());
        Ok((position, catalog, dump(tx)?))
    })?;
    let catalog = catalog.ok_or_else(|| Error::internal("a log-resident catalog without a catalog_uuid"))?;
    let stored = seal(position, &catalog, &rows)?;
    let location = name(log, position);
    crate::failpoint::hit("before_checkpoint_put");
    // (taken: another host wrote this position's checkpoint, which holds the same rows)
    object::wait(object::put_new(&location, Bytes::from(stored)))?;
    Ok(position)
}

/// Where the log may start: at the older of the two newest checkpoints `found` (oldest first),
/// so that a host finding the newest one damaged still has one to start from. None with fewer.
pub fn truncation_point(found: &[Listed]) -> Option<u64> {
    found.len().checked_sub(KEPT).map(|i| found[i].position)
}

/// The fold in `store` as a checkpoint would hold it: its log position and the xxh3-64 of its
/// rows (two hosts at one position must agree).
pub(crate) fn digest(store: &Store) -> Result<(u64, u64)> {
    store.read(|tx| {
        let position = tx.open_table(COUNTERS)?.get(LOG_POSITION)?.map(|v| v.value()).unwrap_or(0);
        Ok((position, twox_hash::XxHash3_64::oneshot(&dump(tx)?)))
    })
}

/// Removes the checkpoints `found` (oldest first) older than the newest [`KEPT`] and than `keep`
/// (by the store's clock: the newest checkpoint's time is its now). How many it removed.
pub fn prune(found: &[Listed], keep: Duration) -> Result<usize> {
    let Some(newest) = found.last().map(|c| c.modified) else { return Ok(0) };
    let old: Vec<String> = found
        .iter()
        .rev()
        .skip(KEPT)
        .filter(|c| newest.duration_since(c.modified).unwrap_or_default() >= keep)
        .map(|c| c.location.clone())
        .collect();
    object::wait(object::delete(&old))?;
    Ok(old.len())
}

/// Restores into `store` the newest checkpoint of the log at `log` that covers position `cover`
/// (the log's start less one: what a host behind truncation can no longer replay), when it is
/// past what the store holds. A damaged checkpoint is passed over for the one before it. The
/// position restored, or None when the store holds as much already.
pub(crate) fn restore_newest(store: &Store, log: &str, cover: u64) -> Result<Option<u64>> {
    let uuid = store.catalog_uuid()?;
    let mut unusable: Vec<String> = vec![];
    // (a checkpoint removed between the LIST and its GET: a newer one landed; list again, once)
    for _ in 0..2 {
        let mut removed = false;
        for listed in list(log)?.into_iter().rev().filter(|c| c.position >= cover) {
            let Some(stored) = object::wait(object::get(&listed.location))? else {
                removed = true;
                continue;
            };
            let problem = match open(&stored, listed.position, &uuid) {
                Ok(rows) => match apply(store, listed.position, &rows) {
                    Ok(restored) => return Ok(restored),
                    Err(e) if e.kind == crate::error::ErrorKind::Corrupt => e.message,
                    Err(e) => return Err(Error::new(e.kind, format!("restoring {}: {}", listed.location, e.message))),
                },
                Err(problem) => problem,
            };
            eprintln!("skade: checkpoint {} cannot be used: {problem}; trying an older one", listed.location);
            unusable.push(format!("{} ({problem})", listed.location));
        }
        if !removed {
            break;
        }
    }
    if !unusable.is_empty() {
        return Err(Error::corrupt(format!(
            "no checkpoint of the commit log {log} can start this catalog: {}",
            unusable.join("; ")
        )));
    }
    Err(Error::catalog(match cover {
        0 => format!("the commit log {log} has no checkpoint in {} to start this catalog from", folder(log)),
        _ => format!(
            "the commit log {log} starts after position {cover}, and no checkpoint in {} covers it: the lake cannot \
             be rebuilt from the bucket (were its checkpoints removed?)",
            folder(log)
        ),
    }))
}

/// The stored form of `rows`, the fold at `position` of catalog `uuid`.
fn seal(position: u64, uuid: &str, rows: &[u8]) -> Result<Vec<u8>> {
    let payload = zstd::bulk::compress(rows, LEVEL).map_err(|e| Error::internal(format!("zstd: {e}")))?;
    let mut out = Vec::with_capacity(payload.len() + 80);
    out.extend_from_slice(MAGIC);
    out.push(FORMAT);
    out.extend_from_slice(&position.to_le_bytes());
    out.push(uuid.len() as u8);
    out.extend_from_slice(uuid.as_bytes());
    out.extend_from_slice(&(rows.len() as u64).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    // (the checksum covers the header too: a flipped bit in a length is damage, never a size)
    let checksum = twox_hash::XxHash3_64::oneshot(&[&out[..], &payload[..]].concat());
    out.extend_from_slice(&checksum.to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

/// The rows of a stored checkpoint read at `position` for catalog `uuid`, or what is wrong.
fn open(stored: &[u8], position: u64, uuid: &str) -> std::result::Result<Vec<u8>, String> {
    let mut r = Reader { bytes: stored, at: 0 };
    if r.take(4)? != MAGIC {
        return Err(format!("not a skade checkpoint ({} bytes)", stored.len()));
    }
    let format = r.take(1)?[0];
    if format != FORMAT {
        return Err(format!("checkpoint format {format} is not the one this skade reads ({FORMAT})"));
    }
    let held = r.u64()?;
    if held != position {
        return Err(format!("it holds position {held}, not the {position} its name says"));
    }
    let len = r.take(1)?[0] as usize;
    let catalog = std::str::from_utf8(r.take(len)?).map_err(|_| "its catalog uuid is not text".to_string())?;
    if catalog != uuid {
        return Err(format!("it is a checkpoint of catalog {catalog}, not of this lake's {uuid}"));
    }
    let (size, len) = (r.u64()?, r.u64()?);
    let header = r.at;
    let checksum = r.u64()?;
    let payload = r.rest();
    if payload.len() as u64 != len {
        return Err(format!("{} bytes of {len} (torn)", payload.len()));
    }
    if twox_hash::XxHash3_64::oneshot(&[&stored[..header], payload].concat()) != checksum {
        return Err("its checksum does not match".into());
    }
    // (streamed: the buffer grows with what the payload holds, never sized from the header)
    let mut rows = vec![];
    let decoder = zstd::stream::read::Decoder::new(payload).map_err(|e| format!("cannot decompress it: {e}"))?;
    std::io::Read::read_to_end(&mut std::io::Read::take(decoder, size.saturating_add(1)), &mut rows)
        .map_err(|e| format!("cannot decompress it: {e}"))?;
    if rows.len() as u64 != size {
        return Err(format!("it decompresses to {} bytes or more, not {size}", rows.len()));
    }
    Ok(rows)
}

/// One field of a dumped row.
enum Field {
    Str(String),
    Bytes(Vec<u8>),
    U64(u64),
    I64(i64),
}

/// Every table but `meta`, in a fixed order, each as its name, its row count and its rows. A
/// table the file lacks (made by its first use) dumps as empty.
fn dump(tx: &ReadTransaction) -> Result<Vec<u8>> {
    use Field::*;
    let mut out = Vec::new();
    let s = |v: &str| Str(v.to_string());
    let b = |v: &[u8]| Bytes(v.to_vec());
    let mut rows = vec![];
    if let Some(t) = opened(tx.open_table(COUNTERS))? {
        for e in t.iter()? {
            let (k, v) = e?;
            rows.push(vec![s(k.value()), U64(v.value())]);
        }
    }
    section(&mut out, "counters", &rows);
    rows.clear();
    if let Some(t) = opened(tx.open_table(SCHEMAS))? {
        for e in t.iter()? {
            let (k, v) = e?;
            rows.push(vec![s(k.value()), b(v.value())]);
        }
    }
    section(&mut out, "schemas", &rows);
    rows.clear();
    if let Some(t) = opened(tx.open_table(TABLES))? {
        for e in t.iter()? {
            let (k, v) = e?;
            let (schema, table) = k.value();
            rows.push(vec![s(schema), s(table), b(v.value())]);
        }
    }
    section(&mut out, "tables", &rows);
    rows.clear();
    if let Some(t) = opened(tx.open_table(COMMITS))? {
        for e in t.iter()? {
            let (k, v) = e?;
            let (uuid, snapshot) = k.value();
            rows.push(vec![s(uuid), I64(snapshot), U64(v.value())]);
        }
    }
    section(&mut out, "commits", &rows);
    rows.clear();
    if let Some(t) = opened(tx.open_table(COMMIT_LOG))? {
        for e in t.iter()? {
            let (k, v) = e?;
            rows.push(vec![U64(k.value()), b(v.value())]);
        }
    }
    section(&mut out, "commit_log", &rows);
    for (name, table) in [("consumers", CONSUMERS), ("lineage_sinks", LINEAGE_SINKS)] {
        rows.clear();
        if let Some(t) = opened(tx.open_table(table))? {
            for e in t.iter()? {
                let (k, v) = e?;
                rows.push(vec![s(k.value()), b(v.value())]);
            }
        }
        section(&mut out, name, &rows);
    }
    rows.clear();
    if let Some(t) = opened(tx.open_table(MACROS))? {
        for e in t.iter()? {
            let (k, v) = e?;
            let (schema, kind, name) = k.value();
            rows.push(vec![s(schema), s(kind), s(name), b(v.value())]);
        }
    }
    section(&mut out, "macros", &rows);
    Ok(out)
}

fn opened<T>(t: std::result::Result<T, TableError>) -> Result<Option<T>> {
    match t {
        Ok(t) => Ok(Some(t)),
        Err(TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn section(out: &mut Vec<u8>, name: &str, rows: &[Vec<Field>]) {
    put_bytes(out, name.as_bytes());
    out.extend_from_slice(&(rows.len() as u64).to_le_bytes());
    for row in rows {
        for field in row {
            match field {
                Field::Str(v) => put_bytes(out, v.as_bytes()),
                Field::Bytes(v) => put_bytes(out, v),
                Field::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
                Field::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            }
        }
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(bytes);
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> std::result::Result<&'a [u8], String> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len()).ok_or("it ends early (torn)")?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn u64(&mut self) -> std::result::Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().map_err(|_| "it ends early (torn)")?))
    }

    fn i64(&mut self) -> std::result::Result<i64, String> {
        Ok(self.u64()? as i64)
    }

    fn bytes(&mut self) -> std::result::Result<&'a [u8], String> {
        let n = self.u64()?;
        self.take(usize::try_from(n).map_err(|_| "a field's length is out of range")?)
    }

    fn str(&mut self) -> std::result::Result<&'a str, String> {
        std::str::from_utf8(self.bytes()?).map_err(|_| "a key is not text".to_string())
    }

    /// Starts the section `name`: its row count.
    fn section(&mut self, name: &str) -> std::result::Result<u64, String> {
        let found = self.str()?;
        if found != name {
            return Err(format!("section {found} where {name} was expected"));
        }
        self.u64()
    }

    fn rest(&mut self) -> &'a [u8] {
        let out = &self.bytes[self.at..];
        self.at = self.bytes.len();
        out
    }
}

/// Replaces every table but `meta` with the rows of a checkpoint at `position`, in one durable
/// write transaction (other processes on the cache see one more fold), unless the file holds
/// `position` already. The position restored, or None.
fn apply(store: &Store, position: u64, rows: &[u8]) -> Result<Option<u64>> {
    store.write(true, |tx| {
        let (at, seq) = {
            let counters = tx.open_table(COUNTERS)?;
            let at = counters.get(LOG_POSITION)?.map(|v| v.value()).unwrap_or(0);
            let seq = counters.get(COMMIT_SEQ)?.map(|v| v.value()).unwrap_or(0);
            (at, seq)
        };
        // (the file holds this fold already, or a later one; at position 0, a file with commits is
        // the adopter's own, and an empty one a joiner's, which the checkpoint fills)
        if at > position || (at == position && (position > 0 || seq > 0)) {
            return Ok(None);
        }
        load(tx, rows).map_err(|problem| Error::corrupt(format!("its rows cannot be read: {problem}")))??;
        check_restored(tx, position).map_err(Error::corrupt)??;
        // (the batch at `position` is not in the checkpoint: the next fold records its own)
        tx.open_table(META)?.remove(LOG_HEAD_ID)?;
        Ok(Some(position))
    })
}

/// What a restored fold must hold, checked before it is committed: its counters, the log
/// position its name says, a commit-log row for its last commit, and records that parse.
fn check_restored(tx: &WriteTransaction, position: u64) -> std::result::Result<Result<()>, String> {
    let inner = || -> Result<std::result::Result<(), String>> {
        let counters = tx.open_table(COUNTERS)?;
        let counter = |name: &str| counters.get(name).map(|v| v.map(|v| v.value()));
        let (Some(held), Some(seq), Some(_)) =
            (counter(LOG_POSITION)?, counter(COMMIT_SEQ)?, counter(NEXT_SNAPSHOT_ID)?)
        else {
            return Ok(Err("its counters are missing".into()));
        };
        if held != position {
            return Ok(Err(format!("its rows hold log position {held}, not {position}")));
        }
        let last = tx.open_table(COMMIT_LOG)?.last()?.map(|(k, _)| k.value()).unwrap_or(0);
        if last != seq {
            return Ok(Err(format!("its last commit is {last}, its commit_seq {seq}")));
        }
        for row in tx.open_table(TABLES)?.iter()? {
            let (k, v) = row?;
            if serde_json::from_slice::<super::state::TableRecord>(v.value()).is_err() {
                let (schema, table) = k.value();
                return Ok(Err(format!("its record of table {schema}.{table} does not parse")));
            }
        }
        for row in tx.open_table(SCHEMAS)?.iter()? {
            let (k, v) = row?;
            if serde_json::from_slice::<super::state::SchemaRecord>(v.value()).is_err() {
                return Ok(Err(format!("its record of schema {} does not parse", k.value())));
            }
        }
        Ok(Ok(()))
    };
    match inner() {
        Ok(checked) => checked.map(Ok),
        Err(e) => Ok(Err(e)),
    }
}

/// Loads dumped rows into the (cleared) tables: the outer error is damage in the rows, the inner
/// one the file's.
fn load(tx: &WriteTransaction, rows: &[u8]) -> std::result::Result<Result<()>, String> {
    let mut r = Reader { bytes: rows, at: 0 };
    macro_rules! table {
        ($def:expr, $name:literal, |$r:ident| $key:expr, $value:expr) => {{
            let n = r.section($name)?;
            let mut t = match tx.open_table($def) {
                Ok(t) => t,
                Err(e) => return Ok(Err(e.into())),
            };
            if let Err(e) = t.retain(|_, _| false) {
                return Ok(Err(e.into()));
            }
            for _ in 0..n {
                let $r = &mut r;
                let key = $key;
                let value = $value;
                if let Err(e) = t.insert(key, value) {
                    return Ok(Err(e.into()));
                }
            }
        }};
    }
    table!(COUNTERS, "counters", |r| r.str()?, r.u64()?);
    table!(SCHEMAS, "schemas", |r| r.str()?, r.bytes()?);
    table!(TABLES, "tables", |r| (r.str()?, r.str()?), r.bytes()?);
    table!(COMMITS, "commits", |r| (r.str()?, r.i64()?), r.u64()?);
    table!(COMMIT_LOG, "commit_log", |r| r.u64()?, r.bytes()?);
    table!(CONSUMERS, "consumers", |r| r.str()?, r.bytes()?);
    table!(LINEAGE_SINKS, "lineage_sinks", |r| r.str()?, r.bytes()?);
    table!(MACROS, "macros", |r| (r.str()?, r.str()?, r.str()?), r.bytes()?);
    if !r.rest().is_empty() {
        return Err("bytes follow its last table".into());
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_checkpoint_opens_only_as_itself() {
        let rows = b"some rows".repeat(100);
        let stored = seal(2048, "uuid-a", &rows).unwrap();
        assert_eq!(open(&stored, 2048, "uuid-a").unwrap(), rows);
        assert!(open(&stored, 1024, "uuid-a").unwrap_err().contains("holds position 2048"));
        assert!(open(&stored, 2048, "uuid-b").unwrap_err().contains("catalog uuid-a"));
        assert!(open(&stored[..stored.len() - 1], 2048, "uuid-a").unwrap_err().contains("torn"));
        let mut flipped = stored.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(open(&flipped, 2048, "uuid-a").unwrap_err().contains("checksum"));
        assert!(open(b"SKLG....", 2048, "uuid-a").unwrap_err().contains("not a skade checkpoint"));
        assert!(open(&stored[..10], 2048, "uuid-a").unwrap_err().contains("torn"));
    }

    /// The header's lengths are under the checksum, and the rows' length is never trusted for an
    /// allocation: a hostile one (checksummed anew) is an error, not an abort.
    #[test]
    fn a_hostile_length_is_an_error() {
        let rows = b"rows".repeat(10);
        let stored = seal(7, "u", &rows).unwrap();
        let size_at = 4 + 1 + 8 + 1 + 1; // magic, format, position, uuid length, uuid
        let mut flipped = stored.clone();
        flipped[size_at + 7] ^= 0x40;
        assert!(open(&flipped, 7, "u").unwrap_err().contains("checksum"));
        let header = size_at + 16;
        let mut hostile = stored[..header].to_vec();
        hostile[size_at..size_at + 8].copy_from_slice(&(u64::MAX - 1).to_le_bytes());
        let payload = &stored[header + 8..];
        let checksum = twox_hash::XxHash3_64::oneshot(&[&hostile[..], payload].concat());
        hostile.extend_from_slice(&checksum.to_le_bytes());
        hostile.extend_from_slice(payload);
        let e = open(&hostile, 7, "u").unwrap_err();
        assert!(e.contains("decompresses to 40 bytes"), "{e}");
    }
}
