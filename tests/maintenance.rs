//! Manifest merging, cached manifests, snapshot expiry, metadata files.

mod common;

use common::*;

/// Merges are tiered: each file's entry is written once as added and at most once per tier
/// above, rather than the whole history being rewritten every 16 commits.
#[test]
fn merges_rewrite_each_file_once_per_tier() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    const COMMITS: usize = 300;
    for c in 0..COMMITS as i64 {
        commit_append(&catalog, &uuid, c..c + 1);
    }
    let tiers = manifests_by_tier(&catalog, &uuid);
    assert!(tiers.keys().any(|(_, tier)| *tier == 2), "300 one-file manifests reach tier 2: {tiers:?}");
    let mut entries_written = 0;
    for path in walk(dir.path()).into_iter().filter(|p| p.to_string_lossy().ends_with("-m0.avro")) {
        let manifest = iceberg::spec::Manifest::parse_avro(&std::fs::read(&path).unwrap()).unwrap();
        entries_written += manifest.entries().len();
    }
    // added once, then at most once in tier 1 and once in tier 2 (merging every small manifest
    // into one wrote ~3,000 here)
    assert!(entries_written <= 3 * COMMITS, "{entries_written} manifest entries written for {COMMITS} files");
    let (got, _) = ids(&catalog.begin(), &uuid, None);
    assert_eq!(got, (0..COMMITS as i64).collect::<Vec<_>>());
}

#[test]
fn many_small_commits_keep_the_manifest_count_bounded() {
    use skade::format::snapshot::MAX_INHERITED_MANIFESTS;
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    let mut expected: Vec<i64> = vec![];
    let mut at_20 = None;
    for c in 0..80i64 {
        let txn = catalog.begin();
        append(&txn, &uuid, c * 10..c * 10 + 10);
        expected.extend(c * 10..c * 10 + 10);
        if c % 5 == 4 {
            // position deletes (this table has no key) pile up in delete manifests too
            let n = delete_where(&txn, &uuid, |id| id % 10 == c % 10 && id < c * 10);
            assert!(n > 0);
            expected.retain(|id| !(id % 10 == c % 10 && *id < c * 10));
        }
        txn.commit().unwrap();
        // per content and tier, at most 16 carried forward and this commit's new one
        for (group, n) in manifests_by_tier(&catalog, &uuid) {
            assert!(n <= MAX_INHERITED_MANIFESTS + 1, "commit {c}: {n} manifests of {group:?}");
        }
        if c == 20 {
            let t = catalog.begin();
            at_20 = Some((t.table_by_uuid(&uuid).unwrap().metadata.current_snapshot_id().unwrap(), expected.clone()));
        }
    }
    let (got, _) = ids(&catalog.begin(), &uuid, None);
    assert_eq!(got, expected);
    // merged manifests keep the history: an old snapshot reads what it read then
    let (sid, then) = at_20.unwrap();
    let t = catalog.begin();
    let plan = t.scan(&t.table_by_uuid(&uuid).unwrap().at("VERSION", sid).unwrap(), vec![0], None, false).unwrap();
    let mut old = vec![];
    for task in 0..plan.task_count() {
        for b in plan.open(task).unwrap() {
            old.extend(b.unwrap().column(0).as_primitive::<Int64Type>().values().iter().copied());
        }
    }
    old.sort_unstable();
    assert_eq!(old, then);
}

#[test]
fn manifests_and_lists_cached_at_commit_are_what_their_files_say() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    // appends (new manifests, then merged small ones), deletes, and a compaction (rewrites)
    for i in 0..24i64 {
        commit_append(&catalog, &uuid, i * 10..i * 10 + 10);
        if i % 6 == 5 {
            let txn = catalog.begin();
            delete_where(&txn, &uuid, |id| id % 7 == 0);
            txn.commit().unwrap();
        }
        if i == 20 {
            catalog.compact("main", "t").unwrap();
        }
        let md = catalog.begin().table_by_uuid(&uuid).unwrap().metadata;
        let snapshot = md.current_snapshot().unwrap();
        let cached = catalog.read_caches().manifests.manifest_list(&md, snapshot).unwrap();
        let parsed = skade::format::manifests::parse_manifest_list(snapshot.manifest_list(), &md).unwrap();
        assert_eq!(*cached, parsed, "after commit {i}");
        // manifests cached as written (merged ones) are what their files say too
        let ids = |e: &skade::format::manifests::FileEntry| {
            (e.entry.as_ref().clone(), e.snapshot_id, e.sequence_number, e.file_sequence_number)
        };
        for m in &parsed {
            let cached = catalog.read_caches().manifests.manifest(m).unwrap();
            let parsed = skade::format::manifests::parse_manifest(m).unwrap();
            assert_eq!(cached.iter().map(ids).collect::<Vec<_>>(), parsed.iter().map(ids).collect::<Vec<_>>());
        }
    }
}

/// Expiry removes the metadata files of expired states: the new log keeps no entry older than the
/// oldest kept snapshot and every file it lists exists; the files the log stopped listing (it
/// holds 100) go too, unless written after the oldest kept snapshot. Rows and the kept snapshots
/// stay readable, and the table's properties are unchanged. A dropped table of the same name
/// left its files in the same folder: they are not this table's, and stay.
#[test]
fn expiry_removes_the_metadata_files_of_expired_states() {
    let dir = TestDir::new();
    let (catalog, dropped) = catalog_with_table(&dir);
    for i in 0..3 {
        commit_append(&catalog, &dropped, i..i + 1);
    }
    let dropped_location = catalog.begin().table_by_uuid(&dropped).unwrap().metadata.location().to_string();
    let txn = catalog.begin();
    txn.drop_table("main", "t", false).unwrap();
    txn.commit().unwrap();
    let txn = catalog.begin();
    let uuid = create(&txn, "t");
    txn.commit().unwrap();
    let on_disk = |location: &str| -> Vec<std::path::PathBuf> {
        let files = walk(Path::new(&format!("{location}/metadata")));
        files.into_iter().filter(|p| p.to_string_lossy().ends_with(".metadata.json")).collect()
    };
    let mut next = 0i64;
    for round in 0..2 {
        // more commits than the log holds: the oldest files are no longer listed anywhere
        for _ in 0..130 {
            commit_append(&catalog, &uuid, next..next + 1);
            next += 1;
        }
        let info = catalog.begin().table_by_uuid(&uuid).unwrap();
        assert_eq!(info.metadata.location(), dropped_location, "one folder for both tables named t");
        let properties = info.metadata.properties().clone();
        assert!(on_disk(info.metadata.location()).len() > 130, "round {round}");
        let retention = skade::format::expire::Retention { older_than_ms: None, retain_last: Some(10) };
        catalog.expire_snapshots("main", "t", retention).unwrap();

        let info = catalog.begin().table_by_uuid(&uuid).unwrap();
        let md = &info.metadata;
        assert_eq!(md.properties(), &properties, "round {round}");
        assert_eq!(skade::format::metadata::read(&info.record.metadata_location).unwrap(), **md);
        let oldest = md.snapshots().map(|s| s.timestamp_ms()).min().unwrap();
        let log = md.metadata_log();
        assert!(!log.is_empty() && log.iter().all(|e| e.timestamp_ms >= oldest), "round {round}");
        let files = on_disk(md.location());
        for e in log {
            assert!(Path::new(&e.metadata_file).exists(), "round {round}: {} is gone", e.metadata_file);
        }
        let listed: Vec<&str> =
            log.iter().map(|e| e.metadata_file.as_str()).chain([info.record.metadata_location.as_str()]).collect();
        let theirs = |f: &std::path::PathBuf| std::fs::read_to_string(f).unwrap().contains(&dropped);
        assert_eq!(files.iter().filter(|f| theirs(f)).count(), 4, "round {round}: the dropped table's files");
        for f in files.iter().filter(|f| !theirs(f)) {
            if !listed.contains(&f.to_str().unwrap()) {
                let written = std::fs::metadata(f).unwrap().modified().unwrap();
                let ms = written.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
                assert!(ms >= oldest, "round {round}: {} describes an expired state", f.display());
            }
        }
        // ~10 kept states, not the 130+ written
        assert!(files.len() < 35, "round {round}: {} metadata files left", files.len());
        let (all, _) = ids(&catalog.begin(), &uuid, None);
        assert_eq!(all, (0..next).collect::<Vec<_>>(), "round {round}");
        // the oldest kept snapshot (the tenth newest append) reads as it was
        let first_kept = md.snapshots().min_by_key(|s| s.sequence_number()).unwrap().snapshot_id();
        let txn = catalog.begin();
        let table = txn.table_by_uuid(&uuid).unwrap().at("VERSION", first_kept).unwrap();
        let plan = txn.scan(&table, vec![0], None, false).unwrap();
        let n: usize = (0..plan.task_count()).flat_map(|t| plan.open(t).unwrap()).map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(n as i64, next - 9, "round {round}");
    }
}

/// metadata.json is written by skade's own serializer (snapshot texts reused across commits):
/// the iceberg crate must parse every file back to the metadata it was written from, through
/// appends, deletes, a compaction, snapshot expiry and a reopen (texts made afresh).
#[test]
fn metadata_files_parse_back_to_what_was_written() {
    let dir = TestDir::new();
    let path = dir.path().join("lake.skade");
    let check = |catalog: &Catalog, uuid: &str, step: &str| {
        let info = catalog.begin().table_by_uuid(uuid).unwrap();
        let parsed = skade::format::metadata::read(&info.record.metadata_location).unwrap();
        assert_eq!(parsed, *info.metadata, "{step}");
    };
    let (catalog, uuid) = catalog_with_table(&dir);
    check(&catalog, &uuid, "created");
    for i in 0..12i64 {
        commit_append(&catalog, &uuid, i * 10..i * 10 + 10);
        check(&catalog, &uuid, &format!("append {i}"));
        if i % 4 == 3 {
            let txn = catalog.begin();
            delete_where(&txn, &uuid, |id| id % 5 == 0);
            txn.commit().unwrap();
            check(&catalog, &uuid, &format!("delete after append {i}"));
        }
    }
    catalog.compact("main", "t").unwrap();
    check(&catalog, &uuid, "compaction");
    let retention = skade::format::expire::Retention { older_than_ms: None, retain_last: Some(5) };
    assert!(catalog.expire_snapshots("main", "t", retention).unwrap().expired_snapshots > 0);
    check(&catalog, &uuid, "expiry");
    drop(catalog);
    let catalog = open(&path);
    commit_append(&catalog, &uuid, 1000..1010);
    check(&catalog, &uuid, "append after reopen");
}
