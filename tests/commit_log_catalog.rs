//! A catalog committing through its commit log (issue 23): adoption, the opens it allows and
//! refuses, and several processes (this test binary run again, SKADE_CATALOG_CHILD set)
//! committing to one lake at once: every commit lands once, commit_seq stays gapless, appends to
//! one table rebase over each other's, and a process killed at any point loses no acknowledged
//! commit and leaves the lake readable.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::*;
use skade::catalog::macros::MacroKind;
use skade::commit_log::folder::FolderLogProvider;
use skade::commit_log::CommitLogProvider;

fn through(log: &Path) -> AttachOptions {
    AttachOptions { commit_log_location: Some(log.to_str().unwrap().to_string()), ..AttachOptions::default() }
}

fn open_through(path: &Path, log: &Path) -> Catalog {
    Catalog::open(path, through(log)).unwrap()
}

/// The positions the log holds (1..), read back.
fn positions(log: &Path) -> Vec<u64> {
    let reader = FolderLogProvider.reader(log.to_str().unwrap()).unwrap();
    reader.tail(reader.start().unwrap(), usize::MAX).unwrap().iter().map(|b| b.seq).collect()
}

fn all_ids(catalog: &Catalog, table: &str) -> Vec<i64> {
    let txn = catalog.begin();
    let t = txn.table("main", table).unwrap().unwrap();
    ids(&txn, &t.record.uuid, None).0
}

#[test]
fn a_new_catalog_adopts_its_log_and_then_opens_only_through_it() {
    let dir = TestDir::new();
    let path = dir.path().join("lake.skade");
    let log = dir.path().join("lake.log");
    {
        let catalog = open_through(&path, &log);
        let txn = catalog.begin();
        let uuid = create(&txn, "t");
        txn.commit().unwrap();
        commit_append(&catalog, &uuid, 0..10);
        assert_eq!(catalog.head_seq(), 2);
    }
    // the file is format 3 (builds before the commit log refuse it as newer), stamped with its log
    {
        use redb::{ReadableDatabase, TableDefinition};
        let db = redb::Database::builder()
            .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
            .open_read_only(&path)
            .unwrap();
        let tx = db.begin_read().unwrap();
        let meta = tx.open_table(TableDefinition::<&str, &str>::new("meta")).unwrap();
        assert_eq!(meta.get("format").unwrap().unwrap().value(), "skade-catalog-3");
        let stamp = meta.get("commit_log").unwrap().unwrap().value().to_string();
        assert!(stamp.contains("skade folder log") && stamp.contains("lake.log"), "{stamp}");
    }
    // position 0 holds the adoption stamp; the snapshot-id reservation, the create and the append
    // are positions 1..=3
    assert!(log.join(format!("{:020}.batch", 0)).exists());
    assert_eq!(positions(&log), vec![1, 2, 3]);
    // without the log: refused, naming it and the option
    let e = Catalog::open(&path, AttachOptions::default()).err().expect("opened without its log");
    assert!(e.message.contains("is log-resident"), "{}", e.message);
    assert!(e.message.contains(&format!("COMMIT_LOG '{}'", log.display())), "{}", e.message);
    // another location, or a read-only attach without it: refused too
    let e = Catalog::open(&path, through(&dir.path().join("elsewhere"))).err().unwrap();
    assert!(e.message.contains("is not skade catalog"), "{}", e.message);
    let e = Catalog::open(&path, AttachOptions { read_only: true, ..AttachOptions::default() }).err().unwrap();
    assert!(e.message.contains("is log-resident"), "{}", e.message);
    // through it: everything is there; read-only through it too
    let catalog = open_through(&path, &log);
    assert_eq!(all_ids(&catalog, "t"), (0..10).collect::<Vec<_>>());
    drop(catalog);
    let ro = Catalog::open(&path, AttachOptions { read_only: true, ..through(&log) }).unwrap();
    assert_eq!(all_ids(&ro, "t"), (0..10).collect::<Vec<_>>());
    assert_eq!(ro.commits_since(0, 100).unwrap().len(), 2);
}

#[test]
fn a_plain_catalog_is_adopted_keeping_its_history_and_a_log_serves_one_catalog() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    commit_append(&catalog, &uuid, 0..5);
    let path = catalog.path().to_path_buf();
    drop(catalog);
    let log = dir.path().join("log");
    let catalog = open_through(&path, &log);
    assert_eq!(catalog.head_seq(), 2, "commit_seq continues from the plain catalog's");
    commit_append(&catalog, &uuid, 5..8);
    assert_eq!(catalog.head_seq(), 3);
    assert_eq!(all_ids(&catalog, "t"), (0..8).collect::<Vec<_>>());
    drop(catalog);
    // another catalog cannot take this log
    let other = dir.path().join("other.skade");
    let e = Catalog::open(&other, through(&log)).err().expect("a second catalog adopted the log");
    assert!(e.message.contains("belongs to another catalog"), "{}", e.message);
    assert!(!other.exists(), "the refused catalog was left behind");
    // a provider without a location, for a catalog that is not log-resident: refused
    let plain = dir.path().join("plain.skade");
    drop(open(&plain));
    let provider: Arc<dyn CommitLogProvider> = Arc::new(FolderLogProvider);
    let e =
        Catalog::open(&plain, AttachOptions { commit_log: Some(provider), ..AttachOptions::default() }).err().unwrap();
    assert!(e.message.contains("no COMMIT_LOG location"), "{}", e.message);
    // DURABILITY other than immediate is refused through a log
    let e = Catalog::open(
        &plain,
        AttachOptions { durability: skade::catalog::options::Durability::Eventual, ..through(&dir.path().join("l2")) },
    )
    .err()
    .unwrap();
    assert!(e.message.contains("not available through a commit log"), "{}", e.message);
}

#[test]
fn a_second_attach_in_one_process_must_ask_for_the_same_log() {
    let dir = TestDir::new();
    let path = dir.path().join("lake.skade");
    let log = dir.path().join("lake.log");
    let first = open_through(&path, &log);
    let second = open_through(&path, &log);
    assert!(Catalog::open(&path, AttachOptions::default()).is_err());
    assert!(Catalog::open(&path, through(&dir.path().join("x"))).is_err());
    drop((first, second));
    let plain = dir.path().join("plain.skade");
    let attached = open(&plain);
    let e = Catalog::open(&plain, through(&log)).err().unwrap();
    assert!(e.message.contains("without a commit log"), "{}", e.message);
    drop(attached);
}

/// A child's work, printed line by line: `ack <commit_seq> <first> <last>` once an append of
/// ids first..last is committed.
fn child(path: &str, log: &str, id: i64, commits: i64) {
    let catalog = Catalog::open(Path::new(path), through(Path::new(log))).unwrap();
    let mut done = 0;
    while done < commits {
        let first = id * 1_000_000 + done * 10;
        let txn = catalog.begin();
        let uuid = txn.table("main", "t").unwrap().unwrap().record.uuid.clone();
        append(&txn, &uuid, first..first + 10);
        match txn.commit() {
            Ok(records) => {
                println!("ack {} {first} {}", records[0].seq, first + 10);
                done += 1;
            }
            Err(e) if e.kind == ErrorKind::Conflict => println!("conflict {}", e.message), // retried
            Err(e) => panic!("{e}"),
        }
    }
    let status = catalog.commit_log_status().unwrap().unwrap();
    println!("offers won {} lost {}", status.won, status.lost);
}

#[test]
fn the_child_entry() {
    if let Ok(args) = std::env::var("SKADE_CATALOG_CHILD") {
        let p: Vec<&str> = args.split('\n').collect();
        child(p[0], p[1], p[2].parse().unwrap(), p[3].parse().unwrap());
    }
}

fn spawn(path: &Path, log: &Path, id: i64, commits: i64) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "the_child_entry", "--nocapture", "--test-threads=1"])
        .env("SKADE_CATALOG_CHILD", format!("{}\n{}\n{id}\n{commits}", path.display(), log.display()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// (commit_seq, first id, last id) of each acknowledged commit in a child's output.
fn acks(output: &str) -> Vec<(u64, i64, i64)> {
    output
        .lines()
        .filter_map(|l| {
            let mut w = l.split("ack ").nth(1)?.split_whitespace().map(|w| w.parse::<i64>().ok());
            Some((w.next()?? as u64, w.next()??, w.next()??))
        })
        .collect()
}

/// A child creating macro `m` (scalar) through the log, then replacing it.
#[test]
fn the_macro_child_entry() {
    if let Ok(args) = std::env::var("SKADE_MACRO_CHILD") {
        let p: Vec<&str> = args.split('\n').collect();
        let catalog = Catalog::open(Path::new(p[0]), through(Path::new(p[1]))).unwrap();
        for sql in ["CREATE MACRO m(a) AS a;", "CREATE MACRO m(a) AS (a + 1);"] {
            let txn = catalog.begin();
            txn.create_macro("main", "m", MacroKind::Scalar, sql, OnConflict::Replace).unwrap();
            txn.commit().unwrap();
        }
    }
}

#[test]
fn macros_another_process_commits_are_folded_and_conflict_by_the_record_read() {
    let dir = TestDir::new();
    let (path, log) = lake(&dir);
    let parent = open_through(&path, &log);
    let stale = parent.begin(); // reads the lake before the child's macro
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "the_macro_child_entry", "--nocapture", "--test-threads=1"])
        .env("SKADE_MACRO_CHILD", format!("{}\n{}", path.display(), log.display()))
        .output()
        .unwrap();
    assert!(child.status.success(), "the child failed: {}", String::from_utf8_lossy(&child.stderr));
    let txn = parent.begin();
    let macros = txn.macros("main").unwrap();
    assert_eq!(macros.iter().map(|m| m.sql.as_str()).collect::<Vec<_>>(), ["CREATE MACRO m(a) AS (a + 1);"]);
    let ops: Vec<String> = parent.commits_since(1, usize::MAX).unwrap().into_iter().map(|r| r.operation).collect();
    assert_eq!(ops, ["create_macro", "replace_macro"]);
    // a transaction that did not see the child's macro cannot create one of its own
    stale.create_macro("main", "m", MacroKind::Scalar, "CREATE MACRO m() AS 1;", OnConflict::Error).unwrap();
    let e = stale.commit().unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.contains("it was created by a concurrent transaction"), "{}", e.message);
    // one that saw it drops it; a fresh open through the log finds none
    txn.drop_macro("main", "m", MacroKind::Scalar, false).unwrap();
    txn.commit().unwrap();
    drop(parent);
    let again = open_through(&path, &log);
    assert!(again.begin().macros("main").unwrap().is_empty());
}

/// A lake with table `t`, attached through its log; closed again.
fn lake(dir: &TestDir) -> (std::path::PathBuf, std::path::PathBuf) {
    let path = dir.path().join("lake.skade");
    let log = dir.path().join("lake.log");
    let catalog = open_through(&path, &log);
    let txn = catalog.begin();
    create(&txn, "t");
    txn.commit().unwrap();
    (path, log)
}

#[test]
fn two_and_four_processes_commit_to_one_lake_each_commit_once_gaplessly() {
    for n in [2, 4] {
        let dir = TestDir::new();
        let (path, log) = lake(&dir);
        let per_child = 25;
        // this process watches while the children commit
        let watcher = open_through(&path, &log);
        let children: Vec<_> = (1..=n).map(|i| spawn(&path, &log, i, per_child)).collect();
        let mut acked = vec![];
        let mut conflicts = 0;
        let mut lost = 0;
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "a child failed: {}", String::from_utf8_lossy(&out.stderr));
            let stdout = String::from_utf8_lossy(&out.stdout);
            conflicts += stdout.lines().filter(|l| l.contains("conflict ")).count();
            lost += stdout.lines().filter_map(|l| l.split(" lost ").nth(1)?.trim().parse::<u64>().ok()).sum::<u64>();
            acked.extend(acks(&stdout));
        }
        assert_eq!(acked.len() as i64, n * per_child);
        // processes appending to one table take turns (as threads of one process do): none of
        // them rebases until it gives up
        assert_eq!(conflicts, 0, "{n} processes: appends to one table gave up");
        eprintln!(
            "{n} processes: {} positions for {} commits, {conflicts} conflicts retried, {lost} offers lost",
            positions(&log).len(),
            acked.len()
        );
        // commit_seq gapless and each commit once: the create is 1, the appends 2..
        let mut seqs: Vec<u64> = acked.iter().map(|a| a.0).collect();
        seqs.sort_unstable();
        assert_eq!(seqs, (2..2 + (n * per_child) as u64).collect::<Vec<_>>(), "{n} processes");
        // the watcher sees every row once (within its poll, at once after a catch-up)
        let expected: BTreeSet<i64> = acked.iter().flat_map(|a| a.1..a.2).collect();
        let mut got = all_ids(&watcher, "t");
        let len = got.len();
        got.dedup();
        assert_eq!(got.len(), len, "a row landed twice");
        assert_eq!(got.into_iter().collect::<BTreeSet<_>>(), expected);
        let feed = watcher.commits_since(0, usize::MAX).unwrap();
        assert_eq!(
            feed.iter().map(|r| r.seq).collect::<Vec<_>>(),
            (1..=1 + (n * per_child) as u64).collect::<Vec<_>>()
        );
        // the log is gapless from 1
        let p = positions(&log);
        assert_eq!(p, (1..=p.len() as u64).collect::<Vec<_>>());
    }
}

#[test]
fn a_process_killed_while_committing_loses_no_acknowledged_commit() {
    let dir = TestDir::new();
    let (path, log) = lake(&dir);
    for round in 0..3 {
        let mut victim = spawn(&path, &log, 10 + round, i64::MAX);
        let survivor = spawn(&path, &log, 20 + round, 20);
        // kill the victim once it has acknowledged a few commits, mid-stream
        let mut lines = BufReader::new(victim.stdout.take().unwrap()).lines();
        let mut victim_acks = vec![];
        while victim_acks.len() < 3 + round as usize * 2 {
            let line = lines.next().expect("the victim stopped").unwrap();
            victim_acks.extend(acks(&line));
        }
        victim.kill().unwrap();
        victim.wait().unwrap();
        victim_acks.extend(lines.map_while(|l| l.ok()).flat_map(|l| acks(&l)));
        let out = survivor.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let survivor_acks = acks(&String::from_utf8_lossy(&out.stdout));
        // a fresh open folds whatever the victim left in the log, and holds every acknowledged row
        let catalog = open_through(&path, &log);
        let rows: BTreeSet<i64> = all_ids(&catalog, "t").into_iter().collect();
        for (seq, first, last) in victim_acks.iter().chain(&survivor_acks) {
            assert!((*first..*last).all(|i| rows.contains(&i)), "acknowledged commit {seq} lost (round {round})");
        }
        let feed: Vec<u64> = catalog.commits_since(0, usize::MAX).unwrap().iter().map(|r| r.seq).collect();
        assert_eq!(feed, (1..=feed.len() as u64).collect::<Vec<_>>(), "gapless after a kill");
        let p = positions(&log);
        assert_eq!(p, (1..=p.len() as u64).collect::<Vec<_>>());
    }
}

/// A child that attaches a lake (new or not) once `go` exists, appends one row, and prints it.
fn creating_child(path: &str, log: &str, go: &str, id: i64) {
    while !Path::new(go).exists() {
        std::thread::yield_now();
    }
    let catalog = Catalog::open(Path::new(path), through(Path::new(log))).unwrap();
    let txn = catalog.begin();
    let uuid = match txn.table("main", "t").unwrap() {
        Some(t) => t.record.uuid.clone(),
        None => create(&txn, "t"),
    };
    append(&txn, &uuid, id..id + 1);
    match txn.commit() {
        Ok(_) => println!("ack {id}"),
        Err(e) if e.kind == ErrorKind::Conflict => println!("conflict {id}"), // two made `t` at once
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn the_creating_child_entry() {
    if let Ok(args) = std::env::var("SKADE_CREATING_CHILD") {
        let p: Vec<&str> = args.split('\n').collect();
        creating_child(p[0], p[1], p[2], p[3].parse().unwrap());
    }
}

#[test]
fn processes_creating_one_new_lake_at_once_agree_on_one_catalog() {
    for round in 0..8 {
        let dir = TestDir::new();
        let (path, log, go) = (dir.path().join("lake.skade"), dir.path().join("lake.log"), dir.path().join("go"));
        let children: Vec<_> = (0..3)
            .map(|i| {
                Command::new(std::env::current_exe().unwrap())
                    .args(["--exact", "the_creating_child_entry", "--nocapture", "--test-threads=1"])
                    .env(
                        "SKADE_CREATING_CHILD",
                        format!("{}\n{}\n{}\n{i}", path.display(), log.display(), go.display()),
                    )
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::fs::write(&go, b"").unwrap();
        let mut acked = vec![];
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success(), "round {round}: {}", String::from_utf8_lossy(&out.stderr));
            let stdout = String::from_utf8_lossy(&out.stdout);
            acked.extend(stdout.lines().filter_map(|l| l.split("ack ").nth(1)?.trim().parse::<i64>().ok()));
        }
        let catalog = open_through(&path, &log);
        let rows = all_ids(&catalog, "t");
        assert_eq!(
            rows,
            {
                acked.sort();
                acked
            },
            "round {round}"
        );
        let feed: Vec<u64> = catalog.commits_since(0, usize::MAX).unwrap().iter().map(|r| r.seq).collect();
        assert_eq!(feed, (1..=feed.len() as u64).collect::<Vec<_>>(), "round {round}");
        assert!(
            std::fs::read_dir(dir.path()).unwrap().all(|e| !e
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".staging")),
            "a staging file was left"
        );
    }
}

/// A log whose conditional create is retried after the first attempt landed (an S3 retry
/// answered 412): it reports the committer's own batch as the winner of the position, once.
#[derive(Debug)]
struct RetriedCreates(std::sync::atomic::AtomicBool);

struct RetriedCommitter(Box<dyn skade::commit_log::Committer>, &'static RetriedCreates, String);

impl skade::commit_log::Committer for RetriedCommitter {
    fn offer(&self, seq: u64, batch: &[u8]) -> skade::error::Result<skade::commit_log::Offered> {
        let offered = self.0.offer(seq, batch)?;
        if matches!(offered, skade::commit_log::Offered::Won(_))
            && self.1 .0.swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            let held = FolderLogProvider.reader(&self.2)?.tail(seq, usize::MAX)?;
            return Ok(skade::commit_log::Offered::Lost(held));
        }
        Ok(offered)
    }
    fn adoption(&self) -> skade::error::Result<Option<Vec<u8>>> {
        self.0.adoption()
    }
    fn adopt(&self, stamp: &[u8]) -> skade::error::Result<Vec<u8>> {
        self.0.adopt(stamp)
    }
    fn wait_served(&self, seq: u64, timeout: std::time::Duration) -> skade::error::Result<bool> {
        self.0.wait_served(seq, timeout)
    }
}

impl CommitLogProvider for &'static RetriedCreates {
    fn name(&self) -> &str {
        "retried creates"
    }
    fn committer(&self, location: &str) -> skade::error::Result<Box<dyn skade::commit_log::Committer>> {
        Ok(Box::new(RetriedCommitter(FolderLogProvider.committer(location)?, self, location.to_string())))
    }
    fn reader(&self, location: &str) -> skade::error::Result<Arc<dyn skade::commit_log::LogReader>> {
        FolderLogProvider.reader(location)
    }
}

#[test]
fn a_win_reported_as_a_loss_to_its_own_batch_is_a_win() {
    static LOG: RetriedCreates = RetriedCreates(std::sync::atomic::AtomicBool::new(false));
    let dir = TestDir::new();
    let path = dir.path().join("lake.skade");
    let log = dir.path().join("lake.log");
    let provider: Arc<dyn CommitLogProvider> = Arc::new(&LOG);
    let options = AttachOptions { commit_log: Some(provider), ..through(&log) };
    let catalog = Catalog::open(&path, options).unwrap();
    let txn = catalog.begin();
    let uuid = create(&txn, "t");
    txn.commit().unwrap();
    commit_append(&catalog, &uuid, 0..3); // (reserves its snapshot ids first)
    LOG.0.store(true, std::sync::atomic::Ordering::SeqCst);
    commit_append(&catalog, &uuid, 3..6);
    assert!(!LOG.0.load(std::sync::atomic::Ordering::SeqCst), "the retried create was not exercised");
    assert_eq!(all_ids(&catalog, "t"), (0..6).collect::<Vec<_>>(), "a row landed twice or not at all");
    assert_eq!(catalog.head_seq(), 3);
    assert_eq!(positions(&log).len(), 4);
}

/// The folder log, recording what an open asks of it.
#[derive(Debug, Default)]
struct Recording(std::sync::Mutex<Vec<String>>);

impl CommitLogProvider for &'static Recording {
    fn name(&self) -> &str {
        "skade folder log"
    }
    fn committer(&self, location: &str) -> skade::error::Result<Box<dyn skade::commit_log::Committer>> {
        self.0.lock().unwrap().push(format!("committer {location}"));
        FolderLogProvider.committer(location)
    }
    fn reader(&self, location: &str) -> skade::error::Result<Arc<dyn skade::commit_log::LogReader>> {
        self.0.lock().unwrap().push(format!("reader {location}"));
        FolderLogProvider.reader(location)
    }
}

#[test]
fn a_read_only_open_asks_the_provider_for_its_reader_alone() {
    static ASKED: std::sync::OnceLock<Recording> = std::sync::OnceLock::new();
    let recording: &'static Recording = ASKED.get_or_init(Recording::default);
    let dir = TestDir::new();
    let path = dir.path().join("lake.skade");
    let log = dir.path().join("lake.log");
    drop(open_through(&path, &log)); // adopted through the in-tree provider
    let options = AttachOptions {
        read_only: true,
        commit_log: Some(Arc::new(recording) as Arc<dyn CommitLogProvider>),
        ..AttachOptions::default()
    };
    let catalog = Catalog::open(&path, options).unwrap();
    let status = catalog.commit_log_status().unwrap().unwrap();
    assert_eq!((status.checkpoint, status.end, status.location.as_str()), (0, 0, log.to_str().unwrap()));
    drop(catalog);
    // the stamp's location, asked of the reader only: a read-only open never commits
    assert_eq!(*recording.0.lock().unwrap(), vec![format!("reader {}", log.display())]);
}
