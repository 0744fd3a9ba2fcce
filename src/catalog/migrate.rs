//! The catalog file's format: a version in its stamp (`skade-catalog-<n>` in table `meta`), and
//! the migrations that bring an older file to the current version when it is opened writable.
//!
//! A migration runs in one write transaction with the stamp's update, so a file is at one version
//! or the next, never between. A file of a newer version than this build knows is refused before
//! anything is read from it; one of an older version opened read-only is read as it is when every
//! migration since only adds what the older file simply lacks (`readable_unmigrated`).

use redb::{ReadableTable, WriteTransaction};

use crate::error::{Error, Result};

/// The stamp's prefix; the version follows it.
pub const FORMAT_PREFIX: &str = "skade-catalog-";
/// The version this build writes (and migrates older files to).
pub const FORMAT_VERSION: u32 = 2;
/// The version of a log-resident catalog (issue 23): version 2 plus its `commit_log` stamp, so
/// that builds before it refuse the file as newer rather than commit to it outside its log.
/// Adoption stamps it; plain catalogs stay at [`FORMAT_VERSION`].
pub const LOG_RESIDENT_VERSION: u32 = 3;
/// The newest version this build reads.
pub const READ_VERSION: u32 = LOG_RESIDENT_VERSION;

/// One step from version `from` to `from + 1`.
pub struct Migration {
    pub from: u32,
    /// What it changes, for messages.
    pub what: &'static str,
    /// Whether a file of version `from` can be read as it is (the step only adds tables).
    pub readable_unmigrated: bool,
    pub apply: fn(&WriteTransaction) -> Result<()>,
}

/// Every migration, oldest first.
pub const MIGRATIONS: &[Migration] =
    &[Migration { from: 1, what: "adds the consumers table", readable_unmigrated: true, apply: add_consumers }];

/// 1 -> 2: named consumers (`consumers`). A version-1 file has none.
fn add_consumers(tx: &WriteTransaction) -> Result<()> {
    tx.open_table(super::tables::CONSUMERS)?;
    Ok(())
}

/// The stamp of `version`.
pub fn stamp(version: u32) -> String {
    format!("{FORMAT_PREFIX}{version}")
}

/// The version a stamp names, or why the file cannot be read. `path`: the file, for messages.
pub fn version_of(stamp: &str, path: &str, current: u32) -> Result<u32> {
    let version =
        stamp.strip_prefix(FORMAT_PREFIX).and_then(|v| v.parse::<u32>().ok()).filter(|v| *v >= 1).ok_or_else(|| {
            Error::corrupt(format!("{path} has catalog format stamp '{stamp}', which is not a skade format"))
        })?;
    if version > current {
        return Err(Error::corrupt(format!(
            "{path} has catalog format {version}, written by a newer skade: this build reads formats up to {current}; \
             upgrade skade to open it"
        )));
    }
    Ok(version)
}

/// Whether a file of `version` can be read without migrating it (read-only opens).
pub fn readable(version: u32, migrations: &[Migration], path: &str) -> Result<()> {
    match migrations.iter().find(|m| m.from >= version && !m.readable_unmigrated) {
        None => Ok(()),
        Some(m) => Err(Error::invalid(format!(
            "{path} has catalog format {version}, which this build reads only after migrating it ({}): \
             attach it once without READ_ONLY",
            m.what
        ))),
    }
}

/// Brings the file from `version` to `current` in `tx`, stamping it; returns the steps applied.
pub fn migrate(
    tx: &WriteTransaction,
    version: u32,
    current: u32,
    migrations: &[Migration],
) -> Result<Vec<&'static str>> {
    let mut done = vec![];
    for v in version..current {
        let step = migrations
            .iter()
            .find(|m| m.from == v)
            .ok_or_else(|| Error::internal(format!("no migration from catalog format {v}")))?;
        (step.apply)(tx)?;
        done.push(step.what);
    }
    if version != current {
        tx.open_table(super::tables::META)?.insert("format", stamp(current).as_str())?;
    }
    Ok(done)
}

/// The version stamped in an open write transaction (for tests and migrations).
pub fn stamped(tx: &WriteTransaction) -> Result<Option<String>> {
    Ok(tx.open_table(super::tables::META)?.get("format")?.map(|v| v.value().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::TableDefinition;

    const ADDED: TableDefinition<u64, u64> = TableDefinition::new("added_in_2");

    fn add_table(tx: &WriteTransaction) -> Result<()> {
        tx.open_table(ADDED)?.insert(1, 42)?;
        Ok(())
    }

    const STEPS: &[Migration] =
        &[Migration { from: 1, what: "adds table added_in_2", readable_unmigrated: true, apply: add_table }];

    #[test]
    fn stamps_name_versions_and_newer_ones_are_refused() {
        assert_eq!(stamp(1), "skade-catalog-1");
        assert_eq!(version_of("skade-catalog-1", "f", 2).unwrap(), 1);
        assert_eq!(version_of("skade-catalog-2", "f", 2).unwrap(), 2);
        let newer = version_of("skade-catalog-3", "lake.skade", 2).unwrap_err();
        assert!(newer.message.contains("catalog format 3, written by a newer skade"), "{}", newer.message);
        assert!(newer.message.contains("reads formats up to 2"), "{}", newer.message);
        for bad in ["skade-catalog-", "skade-catalog-x", "skade-catalog-0", "other-1"] {
            assert!(version_of(bad, "f", 2).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_migration_runs_with_the_new_stamp_in_one_transaction() {
        let dir = std::env::temp_dir().join(format!("skade-migrate-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.redb");
        let _ = std::fs::remove_file(&path);
        let db = redb::Database::create(&path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(super::super::tables::META).unwrap().insert("format", "skade-catalog-1").unwrap();
        tx.commit().unwrap();

        assert!(readable(1, STEPS, "f").is_ok(), "a step that only adds a table reads unmigrated");
        let tx = db.begin_write().unwrap();
        assert_eq!(migrate(&tx, 1, 2, STEPS).unwrap(), vec!["adds table added_in_2"]);
        assert_eq!(stamped(&tx).unwrap().as_deref(), Some("skade-catalog-2"));
        tx.abort().unwrap();
        // aborted: still version 1, without the table
        let tx = db.begin_write().unwrap();
        assert_eq!(stamped(&tx).unwrap().as_deref(), Some("skade-catalog-1"));
        assert!(tx.open_table(ADDED).unwrap().get(1).unwrap().is_none());
        migrate(&tx, 1, 2, STEPS).unwrap();
        tx.commit().unwrap();
        let tx = db.begin_write().unwrap();
        assert_eq!(stamped(&tx).unwrap().as_deref(), Some("skade-catalog-2"));
        assert_eq!(tx.open_table(ADDED).unwrap().get(1).unwrap().unwrap().value(), 42);
        // up to date: nothing to do
        assert!(migrate(&tx, 2, 2, STEPS).unwrap().is_empty());
        // a missing step is an error, not a silent stamp
        assert!(migrate(&tx, 1, 3, STEPS).is_err());
        drop(tx);
        drop(db);
        std::fs::remove_dir_all(&dir).unwrap();

        let rewriting = [Migration { from: 1, what: "rewrites rows", readable_unmigrated: false, apply: add_table }];
        let e = readable(1, &rewriting, "lake.skade").unwrap_err();
        assert!(e.message.contains("attach it once without READ_ONLY"), "{}", e.message);
    }
}
