//! The commit path's critical section: group commit over the redb file.
//!
//! Committers enqueue a [`CommitRequest`] and race for the leader lock; the winner takes the
//! queue's start, up to the first request whose files are still being synced, and applies those
//! requests in ONE redb write transaction with one fsync. Each request carries its own
//! preconditions (compare-and-swap on the pointers it read), checked against the file plus the
//! effects of the requests before it in the group; a request whose check fails writes nothing and
//! cannot taint the others. Metadata files are written before a request is enqueued, under its
//! tables' commit turns (`turns`); an append syncs them after, while the next one works.

use std::collections::HashMap;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Condvar, Mutex};

use redb::{ReadableTable, WriteTransaction};
use serde::{Deserialize, Serialize};

use super::consumers::{ConsumerChange, ConsumerRecord};
use super::names::{key, table_shown};
use super::sinks::{SinkChange, SinkRecord};
use super::state::{MacroKey, MacroRecord, SchemaRecord, StateChange, TableRecord};
use super::store::{CommitRecord, InputRecord, Store};
use super::tables::{
    COMMITS, COMMIT_LOG, COMMIT_SEQ, CONSUMERS, COUNTERS, LINEAGE_SINKS, MACROS, NEXT_SNAPSHOT_ID, SCHEMAS, TABLES,
};
use crate::error::{Error, Result};

/// What must still hold when a change is applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expect {
    SchemaAbsent,
    /// The schema exists and holds no table, view or macro.
    SchemaEmpty,
    TableAbsent,
    /// The table's pointer is still this metadata location.
    TableAt(String),
    /// The schema exists and holds no macro of the change's kind and name.
    MacroAbsent,
    /// The macro is still this record (a replace or a drop of the macro the transaction read).
    MacroIs(MacroRecord),
    /// The schema is still this record (a change of the properties the transaction read).
    SchemaIs(SchemaRecord),
}

/// One change to one schema, table or macro: its pointer effect, its precondition and its log row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Change {
    pub effect: StateChange,
    pub expect: Expect,
    pub operation: String,
    pub snapshot_id: Option<i64>,
}

impl Change {
    fn schema_name(&self) -> &str {
        match &self.effect {
            StateChange::PutSchema(s) => &s.name,
            StateChange::DropSchema(n) => n,
            StateChange::PutTable(t) => &t.schema,
            StateChange::DropTable { schema, .. } => schema,
            StateChange::PutMacro(m) => &m.schema,
            StateChange::DropMacro { schema, .. } => schema,
        }
    }

    /// The macro it changes, if it changes one.
    fn macro_key(&self) -> Option<MacroKey> {
        match &self.effect {
            StateChange::PutMacro(m) => Some(m.key()),
            StateChange::DropMacro { schema, kind, name } => Some((key(schema), *kind, key(name))),
            _ => None,
        }
    }
}

/// All the changes of one transaction: applied all together or not at all.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CommitRequest {
    pub changes: Vec<Change>,
    pub actor: String,
    /// For tables dropped by this request: their uuid (log rows name the table's identity).
    #[serde(with = "pair_keyed")]
    pub dropped_uuids: HashMap<(String, String), String>,
    /// Files the new pointers reference that are not yet fsynced (DURABILITY 'eventual'/'none';
    /// a log-resident catalog commits durably and its batches carry none).
    #[serde(skip)]
    pub files: Vec<String>,
    /// Changes to named consumers (they take no commit_seq).
    pub consumers: Vec<ConsumerChange>,
    /// Changes to lineage sinks' cursors (they take no commit_seq either).
    pub sinks: Vec<SinkChange>,
    /// What the transaction read (kept on each of its records).
    pub inputs: Vec<InputRecord>,
    /// The name the committing DuckDB attached the catalog under, for messages (not stored: a
    /// request read back from a commit log names tables by schema and table).
    #[serde(skip)]
    pub database: Option<String>,
    /// What it built on that had not landed when it was made (appends chained across processes:
    /// `chains`); the group committer offers it once they have.
    #[serde(skip)]
    pub awaits: Vec<Awaited>,
}

impl CommitRequest {
    /// Whether it moves a table's pointer to `location`.
    pub fn puts_location(&self, location: &str) -> bool {
        self.changes.iter().any(|c| matches!(&c.effect, StateChange::PutTable(t) if t.metadata_location == location))
    }
}

/// An append's request built on another append in flight: the group committer offers it once
/// that one has landed (`chains::await_bases`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Awaited {
    pub uuid: String,
    /// The table's keys in the catalog file.
    pub schema: String,
    pub name: String,
    /// The location it built on, and the process that made it (pid, host): it can land only
    /// while that process lives.
    pub base: String,
    pub writer: (i32, String),
    pub chain: u64,
}

/// Serde for a map keyed by (schema, table) pairs, which JSON objects cannot key by: a sorted
/// list of `[[schema, table], value]`.
mod pair_keyed {
    use std::collections::HashMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    type Map = HashMap<(String, String), String>;

    pub fn serialize<S: Serializer>(map: &Map, s: S) -> Result<S::Ok, S::Error> {
        let mut pairs: Vec<(&(String, String), &String)> = map.iter().collect();
        pairs.sort();
        pairs.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Map, D::Error> {
        Ok(Vec::<((String, String), String)>::deserialize(d)?.into_iter().collect())
    }
}

struct Pending {
    request: CommitRequest,
    done: SyncSender<Result<Vec<CommitRecord>>>,
    ready: Arc<Ready>,
}

/// Whether a queued request's files are durable (its committer syncs them after queueing it, see
/// [`Committer::submit`]): None while they are being synced, then the outcome.
#[derive(Default)]
pub struct Ready {
    outcome: Mutex<Option<Result<()>>>,
    known: Condvar,
}

impl Ready {
    fn set(&self, outcome: Result<()>) {
        *self.outcome.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome);
        self.known.notify_all();
    }

    /// Whether the outcome is known.
    fn known(&self) -> bool {
        self.outcome.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    fn wait(&self) -> Result<()> {
        let outcome = self.outcome.lock().unwrap_or_else(|p| p.into_inner());
        let outcome = self.known.wait_while(outcome, |o| o.is_none()).unwrap_or_else(|p| p.into_inner());
        outcome.clone().unwrap_or_else(|| Err(Error::internal("a commit's readiness was lost")))
    }
}

/// A request queued by [`Committer::submit`]: its committer marks it ready, then waits.
pub struct Ticket {
    done: Receiver<Result<Vec<CommitRecord>>>,
    ready: Arc<Ready>,
}

impl Ticket {
    /// The request's files are durable (or could not be made so: the request fails with that).
    pub fn ready(&self, outcome: Result<()>) {
        self.ready.set(outcome);
    }
}

impl Drop for Ticket {
    /// A ticket given up before it was marked ready (an early return) fails its request rather
    /// than leaving a group commit's leader waiting for it.
    fn drop(&mut self) {
        let mut outcome = self.ready.outcome.lock().unwrap_or_else(|p| p.into_inner());
        if outcome.is_none() {
            *outcome = Some(Err(Error::internal("a queued commit was abandoned before its files were synced")));
            self.ready.known.notify_all();
        }
    }
}

/// The group-commit queue.
#[derive(Default)]
pub struct Committer {
    queue: Mutex<Vec<Pending>>,
    leader: Mutex<()>,
}

impl Committer {
    /// Runs `f` while no group commit is in progress (and none starts).
    pub fn exclusive<T>(&self, f: impl FnOnce() -> T) -> T {
        let _leader = self.leader.lock().unwrap_or_else(|p| p.into_inner());
        f()
    }

    /// Queues `request`, not ready yet: requests are applied in the order they were queued, so a
    /// committer that queues under a table's turn fixes its place before it hands the turn on,
    /// and syncs its files afterwards, in parallel with the next one's work.
    pub fn submit(&self, request: CommitRequest) -> Ticket {
        let (tx, rx) = sync_channel(1);
        let ready = Arc::new(Ready::default());
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).push(Pending { request, done: tx, ready: ready.clone() });
        Ticket { done: rx, ready }
    }

    /// The outcome of a submitted request: leads a group commit of the queued requests that
    /// are ready, from the queue's start up to the first that is not (a request whose files
    /// could not be synced fails alone), or waits for the leader that took it. A request behind
    /// one still syncing waits for it (the order of the queue is the order of each table's
    /// chain); its committer leads again now and then, so no request waits on a committer that
    /// went away.
    pub fn finish(
        &self,
        ticket: Ticket,
        run: impl Fn(Vec<CommitRequest>) -> Vec<Result<Vec<CommitRecord>>>,
    ) -> Result<Vec<CommitRecord>> {
        loop {
            self.lead(&run);
            // Our request was in the group we led, or in another leader's group, or waits
            // behind one still syncing.
            match ticket.done.recv_timeout(LEAD_AGAIN) {
                Ok(outcome) => return outcome,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(Error::internal("group commit leader vanished"));
                }
            }
        }
    }

    /// Commits the queue's ready start as one group (see [`Committer::finish`]).
    fn lead(&self, run: &impl Fn(Vec<CommitRequest>) -> Vec<Result<Vec<CommitRecord>>>) {
        let _leader = self.leader.lock().unwrap_or_else(|p| p.into_inner());
        let group: Vec<Pending> = {
            let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
            let ready = queue.iter().take_while(|p| p.ready.known()).count();
            queue.drain(..ready).collect()
        };
        if group.is_empty() {
            return;
        }
        let mut requests = Vec::with_capacity(group.len());
        let mut senders = Vec::with_capacity(group.len());
        for pending in group {
            match pending.ready.wait() {
                Ok(()) => {
                    requests.push(pending.request);
                    senders.push(pending.done);
                }
                Err(e) => {
                    let _ = pending.done.send(Err(e));
                }
            }
        }
        let n = requests.len();
        let mut results = if n > 0 { run(requests) } else { vec![] };
        results.resize_with(n, || Err(Error::internal("group commit lost a result")));
        for (sender, result) in senders.into_iter().zip(results) {
            let _ = sender.send(result);
        }
    }
}

/// How long a committer whose request waits behind one still syncing waits before it tries to
/// lead again.
const LEAD_AGAIN: std::time::Duration = std::time::Duration::from_millis(5);

/// What a group would commit: the commit_seq before it, and one result per request.
pub struct Staged {
    pub seq_before: u64,
    pub results: Vec<Result<Vec<CommitRecord>>>,
}

/// Applies a group in one write transaction. Returns one result per request; `Err` at the outer
/// level means the write transaction itself failed. `staged` is filled just before the commit:
/// when the commit itself fails, it tells what the file holds if the commit landed after all.
pub fn apply_group(
    store: &Store,
    requests: &[CommitRequest],
    durable: bool,
    next_snapshot_id: i64,
    committed_at_us: i64,
    staged: &mut Option<Staged>,
) -> Result<Vec<Result<Vec<CommitRecord>>>> {
    store.write(durable, |tx| {
        let (seq_before, results) = apply_requests(tx, requests, committed_at_us)?;
        let mut counters = tx.open_table(COUNTERS)?;
        let stored = counters.get(NEXT_SNAPSHOT_ID)?.map(|v| v.value()).unwrap_or(1);
        counters.insert(NEXT_SNAPSHOT_ID, stored.max(next_snapshot_id as u64))?;
        *staged = Some(Staged { seq_before, results: results.clone() });
        Ok(results)
    })
}

/// Applies `requests` in order inside `tx`: each is checked whole against what the transaction
/// holds (the requests before it included), and written with the next commit_seqs when its
/// checks pass; a request that fails them writes nothing. Returns the commit_seq before them and
/// one result per request. The same requests on the same file give the same rows: a commit
/// log's fold relies on it.
pub fn apply_requests(
    tx: &WriteTransaction,
    requests: &[CommitRequest],
    committed_at_us: i64,
) -> Result<(u64, Vec<Result<Vec<CommitRecord>>>)> {
    let seq_before = tx.open_table(COUNTERS)?.get(COMMIT_SEQ)?.map(|v| v.value()).unwrap_or(0);
    let mut seq = seq_before;
    let mut results = Vec::with_capacity(requests.len());
    for request in requests {
        match check(tx, request) {
            Err(e) => results.push(Err(e)),
            Ok(()) => {
                let mut records = Vec::with_capacity(request.changes.len());
                let transaction = (request.changes.len() > 1).then_some(seq + 1);
                for change in &request.changes {
                    seq += 1;
                    let record = write_change(tx, request, change, seq, transaction, committed_at_us)?;
                    records.push(record);
                }
                for change in &request.consumers {
                    write_consumer(tx, change)?;
                }
                for change in &request.sinks {
                    tx.open_table(LINEAGE_SINKS)?
                        .insert(change.name.as_str(), serde_json::to_vec(&change.record)?.as_slice())?;
                }
                results.push(Ok(records));
            }
        }
    }
    tx.open_table(COUNTERS)?.insert(COMMIT_SEQ, seq)?;
    Ok((seq_before, results))
}

/// The pointer states a request's earlier changes would leave (None = removed): a request is
/// checked whole before any of it is written. Earlier requests of the group are already in the
/// write transaction, so they need no overlay.
#[derive(Default)]
struct Overlay {
    /// (None: dropped)
    schemas: HashMap<String, Option<SchemaRecord>>,
    tables: HashMap<(String, String), Option<String>>,
    macros: HashMap<MacroKey, Option<MacroRecord>>,
    /// Net count of entries (tables, views, macros) per schema key added (+) or removed (-) by
    /// this request.
    entry_delta: HashMap<String, i64>,
}

fn check(tx: &WriteTransaction, request: &CommitRequest) -> Result<()> {
    let mut local = Overlay::default();
    for change in &request.changes {
        let schema_key = key(change.schema_name());
        let current_schema = match local.schemas.get(&schema_key) {
            Some(v) => v.clone(),
            None => tx
                .open_table(SCHEMAS)?
                .get(schema_key.as_str())?
                .map(|v| serde_json::from_slice::<SchemaRecord>(v.value()))
                .transpose()?,
        };
        let schema_exists = current_schema.is_some();
        let table = match &change.effect {
            StateChange::PutTable(t) => Some((key(&t.schema), key(&t.name))),
            StateChange::DropTable { schema, name } => Some((key(schema), key(name))),
            _ => None,
        };
        let current_location = match &table {
            None => None,
            Some(k) => match local.tables.get(k) {
                Some(v) => v.clone(),
                None => tx
                    .open_table(TABLES)?
                    .get((k.0.as_str(), k.1.as_str()))?
                    .map(|v| serde_json::from_slice::<TableRecord>(v.value()))
                    .transpose()?
                    .map(|t| t.metadata_location),
            },
        };
        let current_macro = match change.macro_key() {
            None => None,
            Some(k) => match local.macros.get(&k) {
                Some(v) => v.clone(),
                None => stored_macro(tx, &k)?,
            },
        };
        let ok = match &change.expect {
            Expect::SchemaAbsent => !schema_exists,
            Expect::SchemaEmpty => {
                schema_exists
                    && count_entries(tx, &schema_key)? + local.entry_delta.get(&schema_key).copied().unwrap_or(0) == 0
            }
            Expect::TableAbsent => schema_exists && current_location.is_none(),
            Expect::TableAt(loc) => current_location.as_deref() == Some(loc.as_str()),
            Expect::MacroAbsent => schema_exists && current_macro.is_none(),
            Expect::MacroIs(m) => current_macro.as_ref() == Some(m),
            Expect::SchemaIs(s) => current_schema.as_ref() == Some(s),
        };
        if !ok {
            let why = match &change.expect {
                Expect::SchemaAbsent => "it was created by a concurrent transaction",
                Expect::SchemaEmpty => "a concurrent transaction changed what it holds",
                Expect::TableAbsent | Expect::MacroAbsent if !schema_exists => {
                    "its schema was dropped by a concurrent transaction"
                }
                Expect::TableAbsent | Expect::MacroAbsent => "it was created by a concurrent transaction",
                Expect::TableAt(_) if current_location.is_none() => "it was dropped by a concurrent transaction",
                Expect::MacroIs(_) if current_macro.is_none() => "it was dropped by a concurrent transaction",
                Expect::TableAt(_) => "a concurrent transaction committed to it first",
                Expect::MacroIs(_) => "a concurrent transaction replaced it first",
                Expect::SchemaIs(_) if !schema_exists => "it was dropped by a concurrent transaction",
                Expect::SchemaIs(_) => "a concurrent transaction changed its properties first",
            };
            let database = request.database.as_deref();
            let name = match &change.effect {
                StateChange::PutTable(t) => format!("table {}", table_shown(database, &t.schema, &t.name)),
                StateChange::DropTable { schema, name } => format!("table {}", table_shown(database, schema, name)),
                StateChange::PutMacro(m) => format!("macro {}", table_shown(database, &m.schema, &m.name)),
                StateChange::DropMacro { schema, name, .. } => {
                    format!("macro {}", table_shown(database, schema, name))
                }
                _ => format!("schema \"{schema_key}\""),
            };
            return Err(Error::conflict(format!(
                "transaction conflict on {name}: {why}; nothing was committed, retry the transaction"
            )));
        }
        apply_overlay(&mut local, change);
    }
    // (a transaction stages one net change per consumer: no overlay needed)
    for change in &request.consumers {
        change.check(stored_consumer(tx, &change.key)?.as_ref())?;
    }
    for change in &request.sinks {
        change.check(stored_sink(tx, &change.name)?.as_ref())?;
    }
    Ok(())
}

fn stored_sink(tx: &WriteTransaction, name: &str) -> Result<Option<SinkRecord>> {
    let sinks = tx.open_table(LINEAGE_SINKS)?;
    let stored = sinks.get(name)?;
    Ok(stored.map(|v| serde_json::from_slice(v.value())).transpose()?)
}

fn stored_consumer(tx: &WriteTransaction, key: &str) -> Result<Option<ConsumerRecord>> {
    let consumers = tx.open_table(CONSUMERS)?;
    let stored = consumers.get(key)?;
    Ok(stored.map(|v| serde_json::from_slice(v.value())).transpose()?)
}

fn write_consumer(tx: &WriteTransaction, change: &ConsumerChange) -> Result<()> {
    let stored = stored_consumer(tx, &change.key)?;
    let mut consumers = tx.open_table(CONSUMERS)?;
    match change.applied(stored.as_ref()) {
        Some(record) => consumers.insert(change.key.as_str(), serde_json::to_vec(&record)?.as_slice())?,
        None => consumers.remove(change.key.as_str())?,
    };
    Ok(())
}

/// The tables, views and macros the file holds in a schema.
fn count_entries(tx: &WriteTransaction, schema_key: &str) -> Result<i64> {
    let tables = tx.open_table(TABLES)?;
    let mut n = 0;
    for row in tables.range((schema_key, "")..)? {
        let (k, _) = row?;
        if k.value().0 != schema_key {
            break;
        }
        n += 1;
    }
    if tx.open_table(SCHEMAS)?.get(schema_key)?.is_some() {
        n += stored_macro_keys(tx, schema_key)?.len() as i64;
    }
    Ok(n)
}

/// The stored macro at `k`. A macro counts only while the file holds its schema: a DROP SCHEMA
/// of a build from before macros leaves the schema's macros behind (it knows none), and they are
/// not a schema's of that name created later (`write_change` removes them then).
fn stored_macro(tx: &WriteTransaction, k: &MacroKey) -> Result<Option<MacroRecord>> {
    if tx.open_table(SCHEMAS)?.get(k.0.as_str())?.is_none() {
        return Ok(None);
    }
    // (opening the table makes it in a file that has none: an empty table, which older builds ignore)
    let macros = tx.open_table(MACROS)?;
    let stored = macros.get((k.0.as_str(), k.1.as_str(), k.2.as_str()))?;
    Ok(stored.map(|v| serde_json::from_slice(v.value())).transpose()?)
}

/// The (kind, name key) of every macro row under a schema key.
fn stored_macro_keys(tx: &WriteTransaction, schema_key: &str) -> Result<Vec<(String, String)>> {
    let macros = tx.open_table(MACROS)?;
    let mut keys = vec![];
    for row in macros.range((schema_key, "", "")..)? {
        let (k, _) = row?;
        let (s, kind, name) = k.value();
        if s != schema_key {
            break;
        }
        keys.push((kind.to_string(), name.to_string()));
    }
    Ok(keys)
}

fn apply_overlay(overlay: &mut Overlay, change: &Change) {
    match &change.effect {
        StateChange::PutSchema(s) => {
            overlay.schemas.insert(key(&s.name), Some(s.clone()));
        }
        StateChange::DropSchema(n) => {
            overlay.schemas.insert(key(n), None);
        }
        StateChange::PutTable(t) => {
            if change.expect == Expect::TableAbsent {
                *overlay.entry_delta.entry(key(&t.schema)).or_default() += 1;
            }
            overlay.tables.insert(t.key(), Some(t.metadata_location.clone()));
        }
        StateChange::DropTable { schema, name } => {
            *overlay.entry_delta.entry(key(schema)).or_default() -= 1;
            overlay.tables.insert((key(schema), key(name)), None);
        }
        StateChange::PutMacro(m) => {
            if change.expect == Expect::MacroAbsent {
                *overlay.entry_delta.entry(key(&m.schema)).or_default() += 1;
            }
            overlay.macros.insert(m.key(), Some(m.clone()));
        }
        StateChange::DropMacro { schema, kind, name } => {
            *overlay.entry_delta.entry(key(schema)).or_default() -= 1;
            overlay.macros.insert((key(schema), *kind, key(name)), None);
        }
    }
}

fn write_change(
    tx: &WriteTransaction,
    request: &CommitRequest,
    change: &Change,
    seq: u64,
    transaction: Option<u64>,
    committed_at_us: i64,
) -> Result<CommitRecord> {
    let mut record = CommitRecord {
        seq,
        committed_at_us,
        schema: change.schema_name().to_string(),
        table: None,
        table_uuid: None,
        snapshot_id: change.snapshot_id,
        operation: change.operation.clone(),
        actor: request.actor.clone(),
        metadata_location: None,
        transaction,
        inputs: request.inputs.clone(),
    };
    match &change.effect {
        StateChange::PutSchema(s) => {
            let k = key(&s.name);
            let existed = tx.open_table(SCHEMAS)?.insert(k.as_str(), serde_json::to_vec(s)?.as_slice())?.is_some();
            if !existed {
                // (macros an older build's DROP SCHEMA left behind are not the new schema's)
                let stale = stored_macro_keys(tx, &k)?;
                let mut macros = tx.open_table(MACROS)?;
                for (kind, name) in &stale {
                    macros.remove((k.as_str(), kind.as_str(), name.as_str()))?;
                }
            }
        }
        StateChange::DropSchema(n) => {
            tx.open_table(SCHEMAS)?.remove(key(n).as_str())?;
        }
        StateChange::PutTable(t) => {
            let (s, n) = t.key();
            tx.open_table(TABLES)?.insert((s.as_str(), n.as_str()), serde_json::to_vec(t)?.as_slice())?;
            record.table = Some(t.name.clone());
            record.table_uuid = Some(t.uuid.clone());
            record.metadata_location = Some(t.metadata_location.clone());
            if let Some(sid) = change.snapshot_id {
                tx.open_table(COMMITS)?.insert((t.uuid.as_str(), sid), seq)?;
            }
        }
        StateChange::DropTable { schema, name } => {
            tx.open_table(TABLES)?.remove((key(schema).as_str(), key(name).as_str()))?;
            record.table = Some(name.clone());
            record.table_uuid = request.dropped_uuids.get(&(key(schema), key(name))).cloned();
            // (the pointer it removed: where the table lies, whatever its name)
            if let Expect::TableAt(location) = &change.expect {
                record.metadata_location = Some(location.clone());
            }
        }
        StateChange::PutMacro(m) => {
            let (s, kind, n) = m.key();
            tx.open_table(MACROS)?
                .insert((s.as_str(), kind.as_str(), n.as_str()), serde_json::to_vec(m)?.as_slice())?;
            record.table = Some(m.name.clone());
        }
        StateChange::DropMacro { schema, kind, name } => {
            tx.open_table(MACROS)?.remove((key(schema).as_str(), kind.as_str(), key(name).as_str()))?;
            record.table = Some(name.clone());
        }
    }
    tx.open_table(COMMIT_LOG)?.insert(seq, serde_json::to_vec(&record)?.as_slice())?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::state::MacroKind;
    use crate::error::ErrorKind;

    fn store() -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("skade-commit-{}-{}", std::process::id(), uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let (store, _) = Store::open(&dir.join("c.skade"), false, None, false).unwrap();
        (store, dir)
    }

    fn table(name: &str, location: &str) -> TableRecord {
        TableRecord {
            schema: "main".into(),
            name: name.into(),
            uuid: format!("u-{name}"),
            metadata_location: location.into(),
            kind: Default::default(),
        }
    }

    fn request(changes: Vec<(StateChange, Expect)>) -> CommitRequest {
        let changes = changes
            .into_iter()
            .map(|(effect, expect)| Change { effect, expect, operation: "test".into(), snapshot_id: None })
            .collect();
        CommitRequest {
            changes,
            actor: "t".into(),
            dropped_uuids: HashMap::new(),
            files: vec![],
            consumers: vec![],
            sinks: vec![],
            inputs: vec![],
            database: None,
            awaits: vec![],
        }
    }

    fn apply(store: &Store, requests: &[CommitRequest]) -> Vec<Result<Vec<CommitRecord>>> {
        apply_group(store, requests, true, 1, 0, &mut None).unwrap()
    }

    #[test]
    fn each_request_of_a_group_is_checked_whole_against_those_before_it() {
        let (store, dir) = store();
        let create_t = || request(vec![(StateChange::PutTable(table("t", "m1")), Expect::TableAbsent)]);
        let results = apply(
            &store,
            &[
                create_t(),
                create_t(), // the first created it: a conflict, and it writes nothing
                request(vec![(StateChange::PutSchema(SchemaRecord::named("s")), Expect::SchemaAbsent)]),
            ],
        );
        assert_eq!(results[0].as_ref().unwrap()[0].seq, 1);
        let e = results[1].as_ref().unwrap_err();
        assert_eq!(e.kind, ErrorKind::Conflict);
        assert!(e.message.contains("it was created by a concurrent transaction"), "{}", e.message);
        assert_eq!(results[2].as_ref().unwrap()[0].seq, 2, "a failed request takes no commit_seq");
        assert_eq!(store.commit_seq().unwrap(), 2);

        // compare-and-swap on the pointer read
        let moved = request(vec![(StateChange::PutTable(table("t", "m2")), Expect::TableAt("m0".into()))]);
        let e = apply(&store, &[moved]).remove(0).unwrap_err();
        assert!(e.message.contains("a concurrent transaction committed to it first"), "{}", e.message);
        let moved = request(vec![(StateChange::PutTable(table("t", "m2")), Expect::TableAt("m1".into()))]);
        assert!(apply(&store, &[moved]).remove(0).is_ok());

        // a schema with a table is not empty; within one request, its own earlier changes count
        let drop_main = || request(vec![(StateChange::DropSchema("main".into()), Expect::SchemaEmpty)]);
        assert!(apply(&store, &[drop_main()]).remove(0).is_err());
        let schema_and_table = request(vec![
            (StateChange::PutSchema(SchemaRecord::named("x")), Expect::SchemaAbsent),
            (StateChange::PutTable(TableRecord { schema: "x".into(), ..table("y", "m") }), Expect::TableAbsent),
            (StateChange::DropTable { schema: "x".into(), name: "y".into() }, Expect::TableAt("m".into())),
            (StateChange::DropSchema("x".into()), Expect::SchemaEmpty),
        ]);
        let records = apply(&store, &[schema_and_table]).remove(0).unwrap();
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![4, 5, 6, 7]);
        // a table in a dropped schema
        let orphan = request(vec![(
            StateChange::PutTable(TableRecord { schema: "x".into(), ..table("z", "m") }),
            Expect::TableAbsent,
        )]);
        let e = apply(&store, &[orphan]).remove(0).unwrap_err();
        assert!(e.message.contains("its schema was dropped"), "{}", e.message);
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn scalar(schema: &str, name: &str, sql: &str) -> MacroRecord {
        MacroRecord { schema: schema.into(), name: name.into(), kind: MacroKind::Scalar, sql: sql.into() }
    }

    #[test]
    fn macros_are_checked_by_absence_and_by_the_record_read() {
        let (store, dir) = store();
        let m1 = scalar("main", "m", "CREATE MACRO m(a) AS a;");
        let m2 = scalar("main", "M", "CREATE MACRO M(a) AS (a + 1);");
        let create = |m: &MacroRecord| request(vec![(StateChange::PutMacro(m.clone()), Expect::MacroAbsent)]);
        let results = apply(&store, &[create(&m1), create(&m2)]);
        let record = &results[0].as_ref().unwrap()[0];
        assert_eq!((record.table.as_deref(), record.table_uuid.as_deref()), (Some("m"), None));
        let e = results[1].as_ref().unwrap_err();
        assert!(e.message.contains("macro main.M: it was created by a concurrent transaction"), "{}", e.message);

        // a table macro of the same name is another entry
        let table_macro =
            MacroRecord { kind: MacroKind::Table, ..scalar("main", "m", "CREATE MACRO m(a) AS TABLE SELECT a;") };
        assert!(apply(&store, &[create(&table_macro)]).remove(0).is_ok());

        // compare-and-swap on the record read
        let replace = |before: &MacroRecord, after: &MacroRecord| {
            request(vec![(StateChange::PutMacro(after.clone()), Expect::MacroIs(before.clone()))])
        };
        let results = apply(&store, &[replace(&m1, &m2), replace(&m1, &m2)]);
        assert!(results[0].is_ok());
        let e = results[1].as_ref().unwrap_err();
        assert!(e.message.contains("a concurrent transaction replaced it first"), "{}", e.message);

        // a schema holding a macro is not empty; dropped in the same request, it is
        let in_s = scalar("s", "sm", "CREATE MACRO sm() AS 1;");
        let records = apply(
            &store,
            &[request(vec![
                (StateChange::PutSchema(SchemaRecord::named("s")), Expect::SchemaAbsent),
                (StateChange::PutMacro(in_s.clone()), Expect::MacroAbsent),
            ])],
        );
        assert!(records[0].is_ok());
        let drop_s = || request(vec![(StateChange::DropSchema("s".into()), Expect::SchemaEmpty)]);
        assert!(apply(&store, &[drop_s()]).remove(0).is_err());
        let drop_macro = StateChange::DropMacro { schema: "s".into(), kind: MacroKind::Scalar, name: "SM".into() };
        let both = request(vec![
            (drop_macro, Expect::MacroIs(in_s.clone())),
            (StateChange::DropSchema("s".into()), Expect::SchemaEmpty),
        ]);
        assert!(apply(&store, &[both]).remove(0).is_ok());

        // a macro an older build's DROP SCHEMA left behind is not the next schema's of that name
        store
            .write(true, |tx| {
                tx.open_table(MACROS)?
                    .insert(("t", "scalar", "old"), serde_json::to_vec(&scalar("t", "old", "x"))?.as_slice())?;
                Ok(())
            })
            .unwrap();
        let make_t = request(vec![
            (StateChange::PutSchema(SchemaRecord::named("t")), Expect::SchemaAbsent),
            (StateChange::PutMacro(scalar("t", "old", "CREATE MACRO old() AS 2;")), Expect::MacroAbsent),
        ]);
        assert!(apply(&store, &[make_t]).remove(0).is_ok());
        let stored = store
            .read(|tx| Ok(tx.open_table(MACROS)?.get(("t", "scalar", "old"))?.map(|v| v.value().to_vec())))
            .unwrap()
            .unwrap();
        assert!(String::from_utf8(stored).unwrap().contains("AS 2;"));
        drop(store);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
