//! Appends chained across processes (docs/design/many-writers.md, "Through a commit log").
//!
//! Processes committing to one table of a log-resident catalog take turns: a byte of the file
//! `<catalog>.turns` per table (by a hash of its uuid). Past the turn bytes, each byte has a
//! *record*: the newest append of the table that handed its turn on before it landed (its
//! metadata location, its *chain*: the appends built one on another since the table last
//! settled, and who wrote it when). The next append, of any process on the machine, builds on
//! that location as threads of one process build on a tentative head (`turns`), and its group
//! committer waits for it to land before offering its own batch ([`segment_end`]); a commit
//! that is not an append waits until nothing is in flight ([`SharedTurns::take_settled`]).
//!
//! The log decides what lands, as before: a request's precondition is the pointer it built on,
//! so chaining only decides what a request builds on, never whether a wrong one lands. A record
//! is trusted only while what it names can still land: not once the table's committed pointer
//! has reached its metadata version (another commit landed there), not once it is older than
//! [`chain_wait`] or its writer's process has died. When a request of a chain fails, the record
//! names its base (which may still land) and marks the versions from the failed one on doomed:
//! the requests built on them stop waiting and are rebuilt. Records are not synced: they are for
//! the processes of one machine while it runs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::commit::{Awaited, CommitRequest};
use super::log_commit::LogLink;
use super::store::Store;
use crate::error::Result;
use crate::io::ByteLock;

/// The turn bytes of `<catalog>.turns` (the records follow them).
const TURN_BYTES: u64 = 1 << 16;
/// A record's bytes: a checksum, its JSON, zeros.
const RECORD_BYTES: usize = 1024;
/// How long an append waits for the append it built on to land, and how long a record is
/// trusted after it was written: a process stopped between handing its turn on and landing must
/// not stop the table's other writers longer (a landing takes milliseconds on a disk, a few
/// requests' time in a bucket). `SKADE_CHAIN_WAIT_MS` sets it (tests).
pub(crate) fn chain_wait() -> Duration {
    static WAIT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *WAIT.get_or_init(|| {
        let ms = std::env::var("SKADE_CHAIN_WAIT_MS").ok().and_then(|v| v.trim().parse().ok());
        Duration::from_millis(ms.unwrap_or(1000))
    })
}
/// How often a waiting committer looks again: soon at first, then less often.
const FIRST_POLL: Duration = Duration::from_micros(100);
const LAST_POLL: Duration = Duration::from_millis(2);

fn back_off(pause: &mut Duration) {
    std::thread::sleep(*pause);
    *pause = (*pause * 2).min(LAST_POLL);
}

/// The metadata version a location names (None when its name carries none).
fn version(location: &str) -> Option<u64> {
    crate::format::metadata::next_version(location).checked_sub(1)
}

/// Whether the committed `pointer` is at or past `location`'s version without being it: what
/// `location` names can never land (every commit moves a table's version on).
fn passed(pointer: Option<&str>, location: &str) -> bool {
    match (pointer.and_then(version), version(location)) {
        (Some(p), Some(l)) => p >= l && pointer != Some(location),
        _ => false,
    }
}

/// Who wrote something, when: it is trusted while that process lives, for [`chain_wait`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Stamp {
    at_ms: i64,
    pid: i32,
    host: String,
}

impl Stamp {
    fn now() -> Stamp {
        Stamp { at_ms: now_ms(), pid: std::process::id() as i32, host: host().to_string() }
    }

    fn live(&self) -> bool {
        let fresh = (now_ms() - self.at_ms).unsigned_abs() < chain_wait().as_millis() as u64;
        fresh && !(self.host == host() && crate::io::process_gone(self.pid))
    }

    fn mine(&self) -> bool {
        self.pid == std::process::id() as i32 && self.host == host()
    }
}

/// A table's newest commit handed on before it landed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Tentative {
    pub uuid: String,
    pub location: String,
    pub chain: u64,
    /// Who made `location` (only its writer vouches for it).
    writer: Stamp,
    /// A commit that is not an append waits for the table: nothing builds on this any more, and
    /// it goes first once the table has settled.
    #[serde(default)]
    drainer: Option<Stamp>,
    /// A request of the chain at this metadata version failed: the requests built on it (at this
    /// version or later) are doomed; `location` is its base, which may still land.
    #[serde(default)]
    pub doomed_from: Option<u64>,
}

impl Tentative {
    pub fn new(uuid: &str, location: &str, chain: u64) -> Tentative {
        Tentative {
            uuid: uuid.to_string(),
            location: location.to_string(),
            chain,
            writer: Stamp::now(),
            drainer: None,
            doomed_from: None,
        }
    }

    /// Whether what it names may still land, the table's committed pointer being `pointer`: not
    /// once the pointer is it or passed its version, nor when its writer is gone or it is older
    /// than [`chain_wait`].
    fn in_flight(&self, pointer: Option<&str>) -> bool {
        Some(self.location.as_str()) != pointer && !passed(pointer, &self.location) && self.writer.live()
    }

    /// Whether a commit that is not an append (of another process: `by_others`) waits for it.
    fn drained(&self, by_others: bool) -> bool {
        self.drainer.as_ref().is_some_and(|d| d.live() && !(by_others && d.mine()))
    }

    /// The process that made `location` (pid, host).
    pub fn writer(&self) -> (i32, String) {
        (self.writer.pid, self.writer.host.clone())
    }

    /// Whether an append may build on what it names: not while a commit that is not an append
    /// waits for the table, nor once part of its chain is doomed (until what it names lands).
    pub fn chainable(&self) -> bool {
        !self.drained(false) && self.doomed_from.is_none()
    }
}

/// A new chain's id.
pub(crate) fn new_chain() -> u64 {
    uuid::Uuid::new_v4().as_u64_pair().0
}

/// What a record's bytes hold.
enum Read {
    Empty,
    /// Written while it was read (a reader without the turn).
    Torn,
    Record(Tentative),
}

fn decode(bytes: &[u8]) -> Read {
    let end = bytes.iter().position(|b| *b == 0).unwrap_or(bytes.len());
    if end == 0 {
        return Read::Empty;
    }
    let Some((sum, json)) = std::str::from_utf8(&bytes[..end]).ok().and_then(|t| t.split_once(' ')) else {
        return Read::Torn;
    };
    if sum != format!("{:016x}", twox_hash::XxHash3_64::oneshot(json.as_bytes())) {
        return Read::Torn;
    }
    match serde_json::from_str(json) {
        Ok(t) => Read::Record(t),
        Err(_) => Read::Torn,
    }
}

/// The record's bytes, or None when it does not fit (that table's appends then do not chain).
fn encode(t: &Tentative) -> Option<Vec<u8>> {
    let json = serde_json::to_string(t).ok()?;
    let mut bytes = format!("{:016x} {json}", twox_hash::XxHash3_64::oneshot(json.as_bytes())).into_bytes();
    if bytes.len() >= RECORD_BYTES {
        return None;
    }
    bytes.resize(RECORD_BYTES, 0);
    Some(bytes)
}

fn turn_byte(uuid: &str) -> u64 {
    twox_hash::XxHash3_64::oneshot(uuid.as_bytes()) % TURN_BYTES
}

fn record_offset(byte: u64) -> u64 {
    TURN_BYTES + byte * RECORD_BYTES as u64
}

/// The turns of some tables across processes, held (or none: a commit without them, see
/// [`SharedTurns::take`]).
pub(crate) struct SharedTurns {
    held: Vec<(u64, ByteLock)>,
}

impl SharedTurns {
    /// No turns (a catalog without a commit log: one process commits to it).
    pub fn none() -> SharedTurns {
        SharedTurns { held: vec![] }
    }

    /// Takes the turns of `uuids` in the file `turns`, in ascending order of their bytes (no
    /// deadlock; two tables sharing a byte only share turns), each waited for at most `wait`.
    /// None held when one was kept that long: its holder is stopped or hung, and the commit goes
    /// on without turns (the log's race decides, rebasing as it must).
    pub fn take<'a>(turns: &Path, uuids: impl IntoIterator<Item = &'a str>, wait: Duration) -> Result<SharedTurns> {
        let mut bytes: Vec<u64> = uuids.into_iter().map(turn_byte).collect();
        bytes.sort_unstable();
        bytes.dedup();
        let mut held = Vec::with_capacity(bytes.len());
        for b in bytes {
            match crate::io::lock_byte(turns, b, wait)? {
                Some(lock) => held.push((b, lock)),
                None => return Ok(SharedTurns::none()),
            }
        }
        Ok(SharedTurns { held })
    }

    /// Takes the turns of `uuids` once nothing of them is in flight (their pointers in `pointer`,
    /// the committed head as the caller reads it under the turns), and clears their records: what
    /// it commits builds on the committed heads. Waits holding none of these turns (the caller
    /// may hold its process's). With `drain` (a commit that is not an append), it marks a table in
    /// flight draining: no append builds on it any more, and the appends that find it so wait
    /// until this commit has gone. What is in flight is waited for at most [`chain_wait`].
    pub fn take_settled(
        turns: &Path,
        uuids: &[&str],
        wait: Duration,
        drain: bool,
        mut pointer: impl FnMut(&str) -> Result<Option<String>>,
    ) -> Result<SharedTurns> {
        let deadline = Instant::now() + chain_wait();
        let mut pause = FIRST_POLL;
        loop {
            let shared = SharedTurns::take(turns, uuids.iter().copied(), wait)?;
            let waited_enough = Instant::now() >= deadline;
            let mut unsettled = false;
            for uuid in uuids {
                let Some(t) = shared.read(uuid)? else { continue };
                if t.in_flight(pointer(uuid)?.as_deref()) && !waited_enough {
                    unsettled = true;
                    if drain && !t.drained(true) {
                        shared.write(&Tentative { drainer: Some(Stamp::now()), ..t })?;
                    }
                } else if t.drained(true) && !waited_enough {
                    unsettled = true; // another committer drained it: it goes first
                }
            }
            if !unsettled || !shared.held() {
                for uuid in uuids {
                    shared.clear(uuid, None)?;
                }
                return Ok(shared);
            }
            drop(shared);
            back_off(&mut pause);
        }
    }

    pub fn held(&self) -> bool {
        !self.held.is_empty()
    }

    fn lock(&self, uuid: &str) -> Option<&ByteLock> {
        let byte = turn_byte(uuid);
        self.held.iter().find(|(b, _)| *b == byte).map(|(_, l)| l)
    }

    fn read(&self, uuid: &str) -> Result<Option<Tentative>> {
        let Some(lock) = self.lock(uuid) else { return Ok(None) };
        Ok(match decode(&lock.read_at(record_offset(turn_byte(uuid)), RECORD_BYTES)?) {
            Read::Record(t) if t.uuid == uuid => Some(t),
            _ => None,
        })
    }

    /// What a committer holding the turns of `uuids` builds on: the appends in flight of the
    /// tables it may chain onto (`chainable`), by table; the records of the others, settled, are
    /// cleared (nothing is to build on them once this commit lands). None when a table is in
    /// flight that it may not chain onto: it must settle first ([`SharedTurns::take_settled`]).
    pub fn links(
        &self,
        uuids: &[&str],
        chainable: impl Fn(&str, &Tentative) -> bool,
        pointer: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<HashMap<String, Tentative>>> {
        let mut onto = HashMap::new();
        for uuid in uuids {
            match self.read(uuid)? {
                Some(t) if t.in_flight(pointer(uuid).as_deref()) => match chainable(uuid, &t) {
                    true => {
                        onto.insert(uuid.to_string(), t);
                    }
                    false => return Ok(None),
                },
                // (another committer drained it and waits to go first)
                Some(t) if t.drained(true) => return Ok(None),
                _ => {}
            }
        }
        for uuid in uuids.iter().filter(|u| !onto.contains_key(**u)) {
            self.clear(uuid, None)?;
        }
        Ok(Some(onto))
    }

    /// Leaves `t` as its table's record. False when it does not fit or could not be written:
    /// the table's record is cleared instead (nothing builds on `t` before it lands, nor on the
    /// record before it, which `t` built on).
    pub fn publish(&self, t: &Tentative) -> Result<bool> {
        match encode(t).map(|_| self.write(t)) {
            Some(Ok(())) => Ok(true),
            Some(Err(e)) => self.clear(&t.uuid, None).and(Err(e)),
            None => self.clear(&t.uuid, None).map(|()| false),
        }
    }

    /// A request of `chain` at `failed` (a metadata location) failed: the pointers built on it
    /// are doomed. It built on `base`, the record of another commit in flight then (which may
    /// still land: the record names it again, vouched for by its own writer, the chain doomed
    /// from `failed`'s version), or on the committed head (nothing of the chain can land: the
    /// record goes). Nothing changes when the record is of another chain by now or doomed from an
    /// earlier version already.
    pub fn doom(&self, uuid: &str, chain: u64, failed: &str, base: Option<&Tentative>) -> Result<()> {
        let Some(t) = self.read(uuid)? else { return Ok(()) };
        let from = version(failed);
        if t.chain != chain || t.doomed_from.is_some_and(|d| from.is_none_or(|f| d <= f)) {
            return Ok(());
        }
        match (base, from) {
            (Some(base), Some(_)) => self.write(&Tentative { drainer: t.drainer, doomed_from: from, ..base.clone() }),
            _ => self.clear(uuid, Some(chain)),
        }
    }

    fn write(&self, t: &Tentative) -> Result<()> {
        let (Some(lock), Some(bytes)) = (self.lock(&t.uuid), encode(t)) else { return Ok(()) };
        lock.write_at(record_offset(turn_byte(&t.uuid)), &bytes)
    }

    /// Clears the record of `uuid` (only if it is of `chain`, when one is named). A record of
    /// another table sharing the byte stays (it is that table's).
    pub fn clear(&self, uuid: &str, chain: Option<u64>) -> Result<()> {
        let Some(lock) = self.lock(uuid) else { return Ok(()) };
        let offset = record_offset(turn_byte(uuid));
        let clear = match decode(&lock.read_at(offset, RECORD_BYTES)?) {
            Read::Empty => false,
            Read::Torn => true,
            Read::Record(t) => t.uuid == uuid && chain.is_none_or(|c| c == t.chain),
        };
        match clear {
            true => lock.write_at(offset, &[0; RECORD_BYTES]),
            false => Ok(()),
        }
    }
}

/// Where the segment of `group` that starts at `start` ends: its first request goes once what
/// it built on has landed in the catalog file (waiting for it, folding the log's new positions as
/// they come, for at most [`chain_wait`] and only while it can land), and the requests after it
/// as long as theirs have too. What a request built on may also be an earlier request's of the
/// group (its precondition decides, as in any group). A request whose base did not land fails its
/// precondition and is rebuilt.
///
/// (Waiting only on the segment's first request cannot deadlock: a request waits only for one
/// handed on before it took its turns, so every wait is for an earlier request, and a process's
/// group commits its earlier requests first.)
pub(crate) fn segment_end(turns: &Path, link: &LogLink, store: &Store, group: &[CommitRequest], start: usize) -> usize {
    let before = |i: usize, a: &Awaited| group[..i].iter().any(|q| q.puts_location(&a.base));
    let deadline = Instant::now() + chain_wait();
    for awaited in &group[start].awaits {
        if !before(start, awaited) && !landed_in_time(turns, link, store, awaited, deadline) {
            break;
        }
    }
    let mut end = start + 1;
    while end < group.len()
        && group[end].awaits.iter().all(|a| before(end, a) || landed_in_time(turns, link, store, a, Instant::now()))
    {
        end += 1;
    }
    end
}

/// Whether `awaited.base` landed by `deadline`: the catalog file's pointer is it. False as soon
/// as it cannot land any more: the pointer passed its version, the process that made it is gone,
/// or its chain's record no longer vouches for it (another chain's, stale, doomed from its
/// version).
fn landed_in_time(turns: &Path, link: &LogLink, store: &Store, awaited: &Awaited, deadline: Instant) -> bool {
    let base_version = version(&awaited.base);
    let mut pause = FIRST_POLL;
    // (a bucket log costs a request per look: the file, which the predecessor folds its own
    // commit into, is looked at in between)
    let every = if link.in_bucket() { 16 } else { 1 };
    let landed = |fold: bool| -> Result<Option<String>> {
        if fold {
            link.catch_up(store)?;
        }
        store.table_location(&awaited.schema, &awaited.name)
    };
    for look in 0.. {
        let Ok(pointer) = landed(look % every == 0) else {
            return false; // (the group's commit meets the same error and reports it)
        };
        if pointer.as_deref() == Some(awaited.base.as_str()) {
            return true;
        }
        let (pid, writer_host) = &awaited.writer;
        let writer_gone = writer_host == host() && crate::io::process_gone(*pid);
        let vouched = match read_unlocked(turns, &awaited.uuid) {
            Ok(Read::Torn) => true,
            // (the record of a later append of the chain vouches for it while that append's
            // writer lives: it waits for this base, and dooms the chain if this one fails)
            Ok(Read::Record(t)) => {
                t.uuid == awaited.uuid
                    && t.chain == awaited.chain
                    && t.writer.live()
                    && !t.doomed_from.is_some_and(|d| base_version.is_none_or(|b| b >= d))
            }
            _ => false,
        };
        if writer_gone || !vouched || passed(pointer.as_deref(), &awaited.base) || Instant::now() >= deadline {
            // (it may have won its position just before: the log says)
            return landed(true).is_ok_and(|p| p.as_deref() == Some(awaited.base.as_str()));
        }
        back_off(&mut pause);
    }
    false
}

fn read_unlocked(turns: &Path, uuid: &str) -> Result<Read> {
    Ok(decode(&crate::io::read_unlocked_at(turns, record_offset(turn_byte(uuid)), RECORD_BYTES)?))
}

/// The turns file of the catalog file `catalog`.
pub(crate) fn turns_file(catalog: &Path) -> PathBuf {
    let mut file = catalog.as_os_str().to_os_string();
    file.push(".turns");
    PathBuf::from(file)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn host() -> &'static str {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(crate::io::host_name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A turns file in a folder of its own (removed when the guard drops).
    fn turns() -> (Removed, PathBuf) {
        let dir = std::env::temp_dir().join(format!("skade-chains-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = turns_file(&dir.join("lake.skade"));
        (Removed(dir), file)
    }

    struct Removed(PathBuf);
    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    impl SharedTurns {
        fn in_flight(&self, uuid: &str, pointer: Option<&str>) -> Result<Option<Tentative>> {
            Ok(self.read(uuid)?.filter(|t| t.in_flight(pointer)))
        }
    }

    #[test]
    fn a_record_is_read_back_by_the_next_holder_and_cleared_by_its_chain_only() {
        let (_dir, file) = turns();
        let t = Tentative::new("u1", "/m/00002.metadata.json", 7);
        {
            let shared = SharedTurns::take(&file, ["u1"], chain_wait()).unwrap();
            assert!(shared.publish(&t).unwrap());
        }
        let shared = SharedTurns::take(&file, ["u1"], chain_wait()).unwrap();
        assert_eq!(shared.in_flight("u1", Some("/m/00001.metadata.json")).unwrap(), Some(t.clone()));
        // landed: the committed pointer names it
        assert_eq!(shared.in_flight("u1", Some("/m/00002.metadata.json")).unwrap(), None);
        shared.clear("u1", Some(8)).unwrap(); // another chain's failure
        assert!(shared.in_flight("u1", None).unwrap().is_some());
        shared.clear("u1", Some(7)).unwrap();
        assert_eq!(shared.in_flight("u1", None).unwrap(), None);
    }

    #[test]
    fn a_record_of_a_dead_process_or_too_old_is_not_trusted() {
        let (_dir, file) = turns();
        let shared = SharedTurns::take(&file, ["u1"], chain_wait()).unwrap();
        let mut old = Tentative::new("u1", "m", 1);
        old.writer.at_ms -= 3 * chain_wait().as_millis() as i64;
        shared.publish(&old).unwrap();
        assert_eq!(shared.in_flight("u1", None).unwrap(), None);
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id() as i32;
        child.wait().unwrap();
        let mut dead = Tentative::new("u1", "m", 1);
        dead.writer.pid = pid;
        shared.publish(&dead).unwrap();
        assert_eq!(shared.in_flight("u1", None).unwrap(), None);
        // a drainer does not vouch for what another process made
        shared.publish(&Tentative { drainer: Some(Stamp::now()), ..dead }).unwrap();
        assert_eq!(shared.in_flight("u1", None).unwrap(), None);
    }

    #[test]
    fn a_record_the_committed_pointer_passed_or_doomed_is_not_built_on() {
        let (_dir, file) = turns();
        let shared = SharedTurns::take(&file, ["u1"], chain_wait()).unwrap();
        shared.publish(&Tentative::new("u1", "/m/00003-a.metadata.json", 7)).unwrap();
        assert!(shared.in_flight("u1", Some("/m/00002-b.metadata.json")).unwrap().is_some());
        // another commit landed at its version (one that took no turn): it never will
        assert_eq!(shared.in_flight("u1", Some("/m/00003-b.metadata.json")).unwrap(), None);
        // its request failed: the record names its base, the chain doomed from its version
        let base = Tentative::new("u1", "/m/00002-a.metadata.json", 7); // (of another process)
        shared.doom("u1", 7, "/m/00003-a.metadata.json", Some(&base)).unwrap();
        let t = shared.in_flight("u1", Some("/m/00001-a.metadata.json")).unwrap().unwrap();
        assert_eq!((t.location.as_str(), t.doomed_from, t.chainable()), ("/m/00002-a.metadata.json", Some(3), false));
        // a later failure of the chain keeps the earlier mark; another chain's changes nothing
        let later = Tentative::new("u1", "/m/00003-a.metadata.json", 7);
        shared.doom("u1", 7, "/m/00004-a.metadata.json", Some(&later)).unwrap();
        shared.doom("u1", 8, "/m/00002-a.metadata.json", None).unwrap();
        let t = shared.read("u1").unwrap().unwrap();
        assert_eq!((t.location.as_str(), t.doomed_from), ("/m/00002-a.metadata.json", Some(3)));
        // the first of a chain failed (it built on the committed head): nothing of it can land
        shared.doom("u1", 7, "/m/00002-c.metadata.json", None).unwrap();
        assert_eq!(shared.read("u1").unwrap(), None);
    }

    #[test]
    fn a_torn_or_foreign_record_is_not_read_as_one() {
        let t = Tentative::new("u1", "m", 1);
        let mut bytes = encode(&t).unwrap();
        assert!(matches!(decode(&bytes), Read::Record(r) if r == t));
        bytes[30] ^= 1;
        assert!(matches!(decode(&bytes), Read::Torn));
        assert!(matches!(decode(&[0; 16]), Read::Empty));
        let long = Tentative::new("u1", &"x".repeat(RECORD_BYTES), 1);
        assert!(encode(&long).is_none());
    }
}
