//! A transaction's changes to named consumers (see `consumers`): created, dropped, reset, a
//! consuming read's advance and an acknowledgement, staged like DDL and committed with the
//! transaction's other changes in one redb write transaction.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use super::consumers::{ConsumedTable, ConsumerRecord, StagedConsumer, Start};
use super::names::{self, key};
use super::transaction::{Transaction, TxnState};
use crate::error::{Error, Result};
use crate::read::time_travel::snapshots_call;

fn now_us() -> i64 {
    chrono::Utc::now().timestamp_micros()
}

fn unknown(name: &str) -> Error {
    Error::catalog(format!("Consumer with name {} does not exist! (skade_consumers lists them)", names::shown(name)))
}

impl Transaction {
    /// The consumer `name` as this transaction sees it: its own change, else the latest commit
    /// (not the transaction's start: a consumer's cursor is read where it is now).
    fn consumer_now(&self, st: &TxnState, name: &str) -> Option<ConsumerRecord> {
        match st.consumers.get(&key(name)) {
            Some(s) => s.record().cloned(),
            None => self.catalog().state().consumer(name).map(|c| (**c).clone()),
        }
    }

    /// Every consumer, by name key, as this transaction sees them.
    pub fn consumers(&self) -> Result<Vec<ConsumerRecord>> {
        let st = self.lock()?;
        let mut all: BTreeMap<String, ConsumerRecord> =
            self.catalog().state().consumers.iter().map(|(k, c)| (k.clone(), (**c).clone())).collect();
        for (k, s) in &st.consumers {
            match s.record() {
                Some(r) => all.insert(k.clone(), r.clone()),
                None => all.remove(k),
            };
        }
        Ok(all.into_values().collect())
    }

    /// The consumer `name`, or an error naming it.
    pub fn consumer(&self, name: &str) -> Result<ConsumerRecord> {
        let st = self.lock()?;
        self.consumer_now(&st, name).ok_or_else(|| unknown(name))
    }

    /// Stages `record` (None: dropped) as the consumer `name`; `read` is the consumer the change
    /// was computed from (its base, unless this transaction changed it before).
    fn stage_consumer(
        st: &mut TxnState,
        name: &str,
        read: Option<ConsumerRecord>,
        record: Option<ConsumerRecord>,
        strict: bool,
        exact: bool,
    ) {
        let base = read.map(Arc::new);
        st.consumers.entry(key(name)).or_insert_with(|| StagedConsumer::new(base)).stage(record, strict, exact);
    }

    /// The tables `names` ((schema, table) pairs) as this transaction sees them, each once.
    fn consumed_tables(&self, st: &TxnState, names: &[(String, String)]) -> Result<Vec<ConsumedTable>> {
        if names.is_empty() {
            return Err(Error::invalid("a consumer needs at least one table"));
        }
        let mut tables: Vec<ConsumedTable> = vec![];
        for (schema, name) in names {
            let t = st.view.table(schema, name).ok_or_else(|| {
                let shown = names::table_shown(self.database(), schema, name);
                Error::catalog(format!("Table with name {shown} does not exist!"))
            })?;
            if !tables.iter().any(|c| c.uuid == t.uuid) {
                tables.push(ConsumedTable { schema: t.schema.clone(), name: t.name.clone(), uuid: t.uuid.clone() });
            }
        }
        Ok(tables)
    }

    /// The cursor `start` means for a consumer of `tables`.
    fn start_cursor(&self, tables: &[ConsumedTable], start: Start) -> Result<u64> {
        let head = self.catalog().head_seq();
        match start {
            Start::Now => Ok(head),
            Start::Beginning => Ok(0),
            Start::CommitSeq(seq) if seq > head => Err(Error::invalid(format!(
                "commit_seq {seq} does not exist yet: the last commit is {head} (skade_commits_since lists them)"
            ))),
            Start::CommitSeq(seq) => Ok(seq),
            Start::Snapshot(id) => {
                let [table] = tables else {
                    return Err(Error::invalid(
                        "at_snapshot names a snapshot of one table: a consumer of several tables starts at \
                         'now', 'beginning' or at_commit := <commit_seq>",
                    ));
                };
                self.catalog().commit_seq_of(&table.uuid, id)?.ok_or_else(|| {
                    let shown = names::table_shown(self.database(), &table.schema, &table.name);
                    Error::catalog(format!(
                        "table {shown} has no snapshot {id} committed through this catalog ({} lists them)",
                        snapshots_call(&shown)
                    ))
                })
            }
        }
    }

    /// Creates the consumer `name` of `tables` ((schema, table) pairs), its cursor at `start`.
    pub fn create_consumer(&self, name: &str, tables: &[(String, String)], start: Start) -> Result<ConsumerRecord> {
        self.check_writable()?;
        names::validate("consumer", name)?;
        let mut st = self.lock()?;
        if let Some(existing) = self.consumer_now(&st, name) {
            return Err(Error::catalog(format!("Consumer with name {} already exists!", names::shown(&existing.name))));
        }
        let tables = self.consumed_tables(&st, tables)?;
        let record = ConsumerRecord {
            name: name.to_string(),
            generation: Uuid::new_v4().to_string(),
            cursor: self.start_cursor(&tables, start)?,
            tables,
            created_at_us: now_us(),
            consumed_at_us: None,
        };
        Self::stage_consumer(&mut st, name, None, Some(record.clone()), false, true);
        Ok(record)
    }

    /// Drops the consumer `name`; whether it existed.
    pub fn drop_consumer(&self, name: &str, if_exists: bool) -> Result<bool> {
        self.check_writable()?;
        let mut st = self.lock()?;
        let Some(read) = self.consumer_now(&st, name) else {
            return if if_exists { Ok(false) } else { Err(unknown(name)) };
        };
        Self::stage_consumer(&mut st, name, Some(read), None, false, true);
        Ok(true)
    }

    /// Moves the consumer `name` to `start`, its tables looked up again by name (a table dropped
    /// and created again is followed anew).
    pub fn reset_consumer(&self, name: &str, start: Start) -> Result<ConsumerRecord> {
        self.check_writable()?;
        let mut st = self.lock()?;
        let current = self.consumer_now(&st, name).ok_or_else(|| unknown(name))?;
        let tables: Vec<(String, String)> = current.tables.iter().map(|t| (t.schema.clone(), t.name.clone())).collect();
        if let Some((schema, table)) = tables.iter().find(|(s, n)| st.view.table(s, n).is_none()) {
            return Err(Error::catalog(format!(
                "cannot reset consumer {}: its table {} no longer exists; create a table of that name again, \
                 or drop the consumer (and create one for the tables that remain)",
                names::shown(name),
                names::table_shown(self.database(), schema, table)
            )));
        }
        let tables = self.consumed_tables(&st, &tables)?;
        let record = ConsumerRecord {
            generation: Uuid::new_v4().to_string(),
            cursor: self.start_cursor(&tables, start)?,
            tables,
            ..current.clone()
        };
        Self::stage_consumer(&mut st, name, Some(current), Some(record.clone()), false, true);
        Ok(record)
    }

    /// A consuming read of `consumer` (as it was read: generation and cursor) in `statement`
    /// (the caller's query id) delivers every commit up to `to`: the cursor moves there when this
    /// transaction commits, provided nothing else moved it meanwhile. A second consuming read
    /// of the consumer in the same statement is refused (it would read the first one's window as
    /// consumed already).
    pub fn stage_consumed(&self, consumer: &ConsumerRecord, to: u64, statement: u64) -> Result<()> {
        self.check_writable()?;
        let mut st = self.lock()?;
        let k = key(&consumer.name);
        if st.consumed_in.get(&k) == Some(&statement) {
            return Err(Error::conflict(format!(
                "consumer {} is read twice by one statement: a statement consumes a consumer's window once (read it once \
                 in a MATERIALIZED CTE and use that twice, or read it in two statements); nothing was committed",
                names::shown(&consumer.name)
            )));
        }
        st.consumed_in.insert(k, statement);
        if to <= consumer.cursor {
            return Ok(()); // nothing to pass
        }
        let now = self.consumer_now(&st, &consumer.name).ok_or_else(|| unknown(&consumer.name))?;
        if now.generation != consumer.generation || now.cursor != consumer.cursor {
            return Err(Error::conflict(format!(
                "transaction conflict on consumer {}: a concurrent transaction consumed, acknowledged or reset it \
                 first; nothing was committed, retry the transaction",
                names::shown(&consumer.name)
            )));
        }
        let record = ConsumerRecord { cursor: to, consumed_at_us: Some(now_us()), ..now.clone() };
        Self::stage_consumer(&mut st, &consumer.name, Some(now), Some(record), true, false);
        Ok(())
    }

    /// Acknowledges every commit up to `seq` for the consumer `name` (at-least-once delivery to
    /// a sink outside the lake): its cursor moves there, never back. Returns the cursor after.
    pub fn acknowledge(&self, name: &str, seq: u64) -> Result<u64> {
        self.check_writable()?;
        let mut st = self.lock()?;
        let now = self.consumer_now(&st, name).ok_or_else(|| unknown(name))?;
        let head = self.catalog().head_seq();
        if seq > head {
            return Err(Error::invalid(format!(
                "cannot acknowledge commit_seq {seq} for consumer {}: the last commit is {head}",
                names::shown(&now.name)
            )));
        }
        if seq <= now.cursor {
            return Ok(now.cursor); // acknowledged already
        }
        let record = ConsumerRecord { cursor: seq, consumed_at_us: Some(now_us()), ..now.clone() };
        Self::stage_consumer(&mut st, name, Some(now), Some(record), false, false);
        Ok(seq)
    }
}
