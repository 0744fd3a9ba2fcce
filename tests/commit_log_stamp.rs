//! A log-resident catalog (its `commit_log` stamp) is refused by every open without a provider,
//! naming what it needs, before anything writes to it; a provider is never ignored (a plain
//! catalog given one without a location to adopt is refused); a newer format is refused before
//! the stamp is looked at.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use redb::ReadableDatabase;
use skade::catalog::options::AttachOptions;
use skade::catalog::Catalog;
use skade::commit_log::folder::FolderLogProvider;
use skade::commit_log::CommitLogProvider;

const META: redb::TableDefinition<&str, &str> = redb::TableDefinition::new("meta");

/// Writes `key` = `value` into the closed catalog file's meta table.
fn set_meta(path: &Path, key: &str, value: &str) {
    let db = redb::Database::open(path).unwrap();
    let tx = db.begin_write().unwrap();
    tx.open_table(META).unwrap().insert(key, value).unwrap();
    tx.commit().unwrap();
}

fn meta(path: &Path, key: &str) -> Option<String> {
    let db = redb::Database::open(path).unwrap();
    let tx = db.begin_read().unwrap();
    let value = tx.open_table(META).unwrap().get(key).unwrap().map(|v| v.value().to_string());
    value
}

/// A catalog with a table, closed (its file free for redb).
fn closed_catalog(dir: &TestDir) -> std::path::PathBuf {
    let (catalog, _) = catalog_with_table(dir);
    catalog.path().to_path_buf()
}

fn with(provider: Option<Arc<dyn CommitLogProvider>>, read_only: bool) -> AttachOptions {
    AttachOptions { commit_log: provider, read_only, ..AttachOptions::default() }
}

#[test]
fn a_stamped_catalog_is_refused_without_a_provider_on_every_open_path() {
    let dir = TestDir::new();
    let path = closed_catalog(&dir);
    let stamp = r#"{"provider":"skade folder log","location":"/shared/lake.log"}"#;
    set_meta(&path, "commit_log", stamp);
    let format_before = meta(&path, "format");
    for read_only in [false, true] {
        let e = Catalog::open(&path, with(None, read_only)).err().expect("opened a log-resident catalog");
        assert!(e.message.contains("is log-resident"), "{}", e.message);
        assert!(e.message.contains("/shared/lake.log") && e.message.contains("skade folder log"), "{}", e.message);
        assert!(e.message.contains("no commit log provider"), "{}", e.message);
    }
    // refused before anything wrote to it: the stamp and the format are as they were
    assert_eq!(meta(&path, "commit_log").as_deref(), Some(stamp));
    assert_eq!(meta(&path, "format"), format_before);
    // through its provider, the log must be there (and this catalog's): a missing one is named
    let provider: Arc<dyn CommitLogProvider> = Arc::new(FolderLogProvider);
    let e = Catalog::open(&path, with(Some(provider), false)).err().expect("opened without its log");
    assert!(e.message.contains("the commit log /shared/lake.log of skade catalog"), "{}", e.message);
    assert!(e.message.contains("is missing (no adoption stamp"), "{}", e.message);
    assert!(!Path::new("/shared/lake.log").exists(), "a missing log was made anew");
    // a damaged stamp is named
    set_meta(&path, "commit_log", "{not json");
    let e = Catalog::open(&path, with(None, false)).err().unwrap();
    assert!(e.message.contains("commit_log stamp is damaged"), "{}", e.message);
}

#[test]
fn a_newer_format_is_refused_before_the_stamp_and_a_provider_is_never_silently_ignored() {
    let dir = TestDir::new();
    let path = closed_catalog(&dir);
    set_meta(&path, "commit_log", r#"{"provider":"p","location":"l"}"#);
    set_meta(&path, "format", "skade-catalog-99");
    let e = Catalog::open(&path, with(None, false)).err().unwrap();
    assert!(e.message.contains("catalog format 99, written by a newer skade"), "{}", e.message);
    // a plain catalog opened with a provider: refused, not opened as if none was given
    let plain = dir.path().join("plain.skade");
    drop(open(&plain));
    let provider: Arc<dyn CommitLogProvider> = Arc::new(FolderLogProvider);
    let e = Catalog::open(&plain, with(Some(provider.clone()), false)).err().unwrap();
    assert!(e.message.contains("which is not log-resident"), "{}", e.message);
    // nor when it is attached in this process already (the open shares that instance)
    let attached = open(&plain);
    for read_only in [false, true] {
        let e = Catalog::open(&plain, with(Some(provider.clone()), read_only)).err().expect("provider ignored");
        assert!(e.message.contains("a commit log provider is never ignored"), "{}", e.message);
    }
    drop(attached);
    // nor is a new catalog created through one
    let fresh = dir.path().join("fresh.skade");
    let e = Catalog::open(&fresh, with(Some(provider), false)).err().unwrap();
    assert!(e.message.contains("skade folder log") && !fresh.exists(), "{}", e.message);
}
