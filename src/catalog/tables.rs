//! The redb tables of the catalog file (see `store` for what each holds).

use redb::TableDefinition;

pub const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
pub const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
pub const SCHEMAS: TableDefinition<&str, &[u8]> = TableDefinition::new("schemas");
pub const TABLES: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("tables");
pub const COMMITS: TableDefinition<(&str, i64), u64> = TableDefinition::new("commits");
pub const COMMIT_LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("commit_log");
/// Since format 2.
pub const CONSUMERS: TableDefinition<&str, &[u8]> = TableDefinition::new("consumers");

/// Lineage sinks' cursors (see `sinks`); absent from files no lineage sink wrote to.
pub const LINEAGE_SINKS: TableDefinition<&str, &[u8]> = TableDefinition::new("lineage_sinks");

/// Macros (see `state::MacroRecord`), keyed (schema key, kind, name key): absent from files no
/// macro was written to (older versions of skade ignore it), which hold none.
pub const MACROS: TableDefinition<(&str, &str, &str), &[u8]> = TableDefinition::new("macros");

pub const COMMIT_SEQ: &str = "commit_seq";
pub const NEXT_SNAPSHOT_ID: &str = "next_snapshot_id";
/// A log-resident catalog's last log position folded into the file (its checkpoint).
pub const LOG_POSITION: &str = "log_position";
/// In `meta` (host-local, never in a checkpoint): `<position>:<batch id>` of the last batch of a
/// bucket log folded into the file.
pub const LOG_HEAD_ID: &str = "log_head_id";
