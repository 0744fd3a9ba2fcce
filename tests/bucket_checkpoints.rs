//! Checkpoints of a bucket log (issue 44, increment 6; `src/catalog/checkpoint.rs`) against the
//! local S3 server: hosts (catalogs with caches of their own) dump their folds identically, a new
//! host starts from the newest checkpoint instead of replaying the log, a host behind the log's
//! truncation restores one and misses no commit, a damaged checkpoint falls back to the one before,
//! and a lake adopted by a catalog with commits can be joined from the checkpoint its adopter
//! writes. Checkpoints come every 8 positions here and truncation spares no position for its age
//! (in production: 1,024 and an hour), set for this binary alone.

mod common;

use std::time::{Duration, Instant};

use common::s3::S3Server;
use common::*;
use skade::catalog::checkpoint;
use skade::io::object;

const EVERY: u64 = 8;

fn setup() {
    checkpoint::set_every(EVERY);
    skade::commit_log::bucket::set_keep_age(Duration::ZERO);
}

/// A lake at a fresh bucket prefix: its URL.
fn lake(name: &str) -> String {
    setup();
    format!("{}/lake", S3Server::shared().fresh(name))
}

/// A host of the lake `url`: a catalog with its own cache under `dir`.
fn host(url: &str, dir: &TestDir, name: &str) -> Catalog {
    let cache = dir.path().join(name);
    let options = AttachOptions { cache_path: Some(cache.to_str().unwrap().to_string()), ..AttachOptions::default() };
    Catalog::open_lake(url, options).unwrap()
}

fn all_ids(catalog: &Catalog, table: &str) -> Vec<i64> {
    let txn = catalog.begin();
    let t = txn.table("main", table).unwrap().unwrap();
    let mut ids = ids(&txn, &t.record.uuid, None).0;
    ids.sort_unstable();
    ids
}

/// Host `a` of the lake `url` with a table `t` and `commits` appends of 10 rows to it, and the
/// log position it folded last.
fn host_with_commits(url: &str, dir: &TestDir, commits: i64) -> (Catalog, String, u64) {
    let a = host(url, dir, "a");
    let txn = a.begin();
    let uuid = create(&txn, "t");
    txn.commit().unwrap();
    for i in 0..commits {
        commit_append(&a, &uuid, i * 10..i * 10 + 10);
    }
    let head = a.commit_log_status().unwrap().unwrap().checkpoint;
    (a, uuid, head)
}

fn checkpoints(url: &str) -> Vec<u64> {
    checkpoint::list(&format!("{url}/log")).unwrap().iter().map(|c| c.position).collect()
}

/// Waits (at most 20 s) until the lake holds a checkpoint at `position` or past it: hosts write
/// them in the background.
fn wait_for_checkpoint(url: &str, position: u64) -> Vec<u64> {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        let found = checkpoints(url);
        if found.last().is_some_and(|&p| p >= position) || Instant::now() > end {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// GETs of log positions served for the lake since the first `before` requests of its bucket.
fn position_gets(bucket: &str, before: usize) -> Vec<String> {
    S3Server::shared().log(bucket)[before..]
        .iter()
        .filter(|r| r.method == "GET" && r.path.ends_with(".batch") && !r.path.ends_with("/00000000000000000000.batch"))
        .map(|r| r.path.clone())
        .collect()
}

fn bucket_of(url: &str) -> String {
    url["s3://".len()..].split('/').next().unwrap().to_string()
}

#[test]
fn two_hosts_folds_dump_identically() {
    let url = lake("ckpt-identical");
    let dir = TestDir::new();
    let (a, uuid, _) = host_with_commits(&url, &dir, 0);
    let b = host(&url, &dir, "b");
    for i in 0..3 {
        commit_append(&b, &uuid, i * 10..i * 10 + 10); // (b folds a's commits, a b's)
        commit_append(&a, &uuid, 100 + i * 10..110 + i * 10);
    }
    let txn = b.begin();
    txn.create_schema("other", false).unwrap();
    txn.commit().unwrap();
    let txn = a.begin();
    txn.create_consumer("billing", &[("main".into(), "t".into())], skade::catalog::consumers::Start::Beginning)
        .unwrap();
    txn.commit().unwrap();
    // both follow to the same position (nothing lands meanwhile): the same rows
    let at = a.write_checkpoint().unwrap();
    assert_eq!(b.write_checkpoint().unwrap(), at);
    let (digest_a, digest_b) = (a.fold_digest().unwrap(), b.fold_digest().unwrap());
    assert_eq!(digest_a.0, at);
    assert_eq!(digest_a, digest_b, "two hosts' folds of position {at} dump differently");
    assert_eq!(all_ids(&a, "t"), all_ids(&b, "t"));
    // and a host that starts from the checkpoint holds the same fold
    let c = host(&url, &dir, "c");
    assert_eq!(c.fold_digest().unwrap(), digest_a);
    assert!(c.state().consumers.values().any(|k| k.name == "billing"));
}

#[test]
fn a_new_host_starts_from_the_newest_checkpoint_and_replays_only_what_follows() {
    let url = lake("ckpt-new-host");
    let dir = TestDir::new();
    let (a, uuid, head) = host_with_commits(&url, &dir, 20);
    let found = wait_for_checkpoint(&url, head / EVERY * EVERY);
    let newest = *found.last().unwrap();
    assert!(newest >= head / EVERY * EVERY && newest <= head, "checkpoints {found:?}, head {head}");
    let bucket = bucket_of(&url);
    let before = S3Server::shared().log(&bucket).len();
    let b = host(&url, &dir, "b");
    assert_eq!(all_ids(&b, "t"), (0..200).collect::<Vec<_>>());
    assert_eq!(b.head_seq(), a.head_seq());
    // only the positions after the checkpoint were read, each once (and the 404 after the head)
    let gets = position_gets(&bucket, before);
    let wanted: Vec<String> = (newest + 1..=head + 1).map(|p| format!("{p:020}.batch")).collect();
    assert!(
        gets.iter().all(|g| wanted.iter().any(|w| g.ends_with(w.as_str()))),
        "a new host read positions the checkpoint at {newest} covers: {gets:?}"
    );
    // and b commits on from there; a sees it
    commit_append(&b, &uuid, 1000..1001);
    a.write_checkpoint().unwrap(); // (follows the log first)
    assert!(all_ids(&a, "t").contains(&1000));
}

#[test]
fn a_host_behind_the_truncation_restores_a_checkpoint_and_misses_no_commit() {
    let url = lake("ckpt-lagging");
    let dir = TestDir::new();
    let (a, uuid, _) = host_with_commits(&url, &dir, 0);
    let b = host(&url, &dir, "b");
    assert_eq!(all_ids(&b, "t"), Vec::<i64>::new());
    let seen_by_b = b.head_seq();
    drop(b);
    for i in 0..40 {
        commit_append(&a, &uuid, i * 10..i * 10 + 10);
    }
    let head = a.commit_log_status().unwrap().unwrap().checkpoint;
    let found = wait_for_checkpoint(&url, head / EVERY * EVERY);
    // the log starts at the older of the two newest checkpoints (truncated just after the newest)
    let older = found[found.len() - 2];
    let end = Instant::now() + Duration::from_secs(20);
    while a.commit_log_status().unwrap().unwrap().start < older && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let start = a.commit_log_status().unwrap().unwrap().start;
    assert!(start >= older && start > 8, "the log was not truncated (it starts at {start}, checkpoints {found:?})");
    // b comes back: its cache is far behind the log's start
    let b = host(&url, &dir, "b");
    assert_eq!(all_ids(&b, "t"), (0..400).collect::<Vec<_>>());
    // every commit since the one b had seen is in its feed, gapless, as a's
    let feed: Vec<u64> = b.commits_since(seen_by_b, usize::MAX).unwrap().iter().map(|r| r.seq).collect();
    let expected: Vec<u64> = a.commits_since(seen_by_b, usize::MAX).unwrap().iter().map(|r| r.seq).collect();
    assert_eq!(feed, expected);
    assert_eq!(feed, (seen_by_b + 1..=a.head_seq()).collect::<Vec<_>>());
    a.write_checkpoint().unwrap();
    b.write_checkpoint().unwrap();
    assert_eq!(a.fold_digest().unwrap(), b.fold_digest().unwrap());
}

#[test]
fn a_damaged_checkpoint_falls_back_to_the_one_before() {
    let url = lake("ckpt-damaged");
    let dir = TestDir::new();
    let (_a, _, head) = host_with_commits(&url, &dir, 30); // (a lives on: it writes the checkpoints)
    let found = wait_for_checkpoint(&url, head / EVERY * EVERY);
    assert!(found.len() >= 2, "two checkpoints are kept: {found:?}");
    let newest = format!("{url}/log/checkpoints/{:020}.checkpoint", found.last().unwrap());
    let mut bytes = object::wait(object::get(&newest)).unwrap().unwrap().to_vec();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    object::wait(object::put(&newest, bytes.into())).unwrap();
    let b = host(&url, &dir, "b");
    assert_eq!(all_ids(&b, "t"), (0..300).collect::<Vec<_>>());
    // with every checkpoint damaged and the log truncated, a new host is refused, naming them
    for c in &found {
        let name = format!("{url}/log/checkpoints/{c:020}.checkpoint");
        object::wait(object::put(&name, bytes::Bytes::from_static(b"garbage"))).unwrap();
    }
    let cache = dir.path().join("c");
    let options = AttachOptions { cache_path: Some(cache.to_str().unwrap().to_string()), ..AttachOptions::default() };
    let e = Catalog::open_lake(&url, options).err().expect("no usable checkpoint, yet the host opened");
    assert!(
        e.message.contains("can start this catalog") && e.message.contains("not a skade checkpoint"),
        "{}",
        e.message
    );
    for c in &found {
        assert!(e.message.contains(&format!("{c:020}.checkpoint")), "{} does not name {c}", e.message);
    }
}

#[test]
fn a_lake_adopted_with_commits_is_joined_from_its_adopters_checkpoint() {
    setup();
    let bucket = S3Server::shared().fresh("ckpt-adopted");
    let dir = TestDir::new();
    let first = dir.path().join("first.skade");
    let data = AttachOptions { data_path: Some(format!("{bucket}/wh")), ..AttachOptions::default() };
    let uuid = {
        let c = Catalog::open(&first, data.clone()).unwrap();
        let txn = c.begin();
        let uuid = create(&txn, "t");
        txn.commit().unwrap();
        commit_append(&c, &uuid, 0..5);
        uuid
    };
    let log = format!("{bucket}/log");
    let through = |data: AttachOptions| AttachOptions { commit_log_location: Some(log.clone()), ..data };
    // the adopter writes the first checkpoint as it adopts the log, at position 0
    let adopter = Catalog::open(&first, through(data.clone())).unwrap();
    let zero = format!("{log}/checkpoints/{:020}.checkpoint", 0);
    assert_eq!(checkpoint::list(&log).unwrap().iter().map(|c| c.location.clone()).collect::<Vec<_>>(), [zero.clone()]);
    commit_append(&adopter, &uuid, 5..10);
    // a joiner starts from it, folds what followed, and each sees the other's commits
    let joiner = Catalog::open(&dir.path().join("joiner.skade"), through(AttachOptions::default())).unwrap();
    assert_eq!(all_ids(&joiner, "t"), (0..10).collect::<Vec<_>>());
    commit_append(&joiner, &uuid, 10..12);
    adopter.write_checkpoint().unwrap(); // (follows the log)
    assert_eq!(all_ids(&adopter, "t"), (0..12).collect::<Vec<_>>());
    commit_append(&adopter, &uuid, 12..13);
    joiner.write_checkpoint().unwrap();
    assert_eq!(all_ids(&joiner, "t"), (0..13).collect::<Vec<_>>());
    assert_eq!(adopter.fold_digest().unwrap(), joiner.fold_digest().unwrap());
    // a READ_ONLY attach cannot make a new catalog file of it
    let ro = AttachOptions { read_only: true, ..through(AttachOptions::default()) };
    let e = Catalog::open(&dir.path().join("ro.skade"), ro).err().expect("a read-only join");
    assert!(e.message.contains("READ_ONLY") && e.message.contains("read-write once"), "{}", e.message);
    // without any checkpoint, a joiner is told whom to attach (and its cache waits for one)
    for c in checkpoint::list(&log).unwrap() {
        object::wait(object::delete(std::slice::from_ref(&c.location))).unwrap();
    }
    let second = dir.path().join("second.skade");
    let e = Catalog::open(&second, through(AttachOptions::default())).err().expect("joined with no checkpoint");
    assert!(e.message.contains("no checkpoint") && e.message.contains("first.skade"), "{}", e.message);
    adopter.write_checkpoint().unwrap();
    let second = Catalog::open(&second, through(AttachOptions::default())).unwrap();
    assert_eq!(all_ids(&second, "t"), (0..13).collect::<Vec<_>>());
    assert_eq!(second.head_seq(), adopter.head_seq());
}

#[test]
fn young_positions_are_never_truncated() {
    let url = lake("ckpt-young");
    let dir = TestDir::new();
    let a = host(&url, &dir, "a");
    let txn = a.begin();
    let uuid = create(&txn, "t");
    txn.commit().unwrap();
    for i in 0..3 {
        commit_append(&a, &uuid, i..i + 1);
    }
    // a log opened with the default age (an hour) removes nothing that young
    use skade::commit_log::LogReader;
    let log = skade::commit_log::bucket::BucketLog::open(&format!("{url}/log"))
        .unwrap()
        .with_keep_age(Duration::from_secs(3600));
    assert_eq!(log.truncate_below(3).unwrap(), 0);
    assert_eq!(log.start().unwrap(), 1);
}
