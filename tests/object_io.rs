//! The object I/O (`skade::io::object`, and the `io` calls that send `s3://` locations to it)
//! against the local S3 server (tools/s3_server.py: moto, one request at a time): exclusive
//! creates, reads by range, listings past S3's 1,000-key pages, bulk deletes, multipart uploads,
//! injected faults, credentials by prefix and the iceberg crate's storage.
//!
//! All tests share one server and each has its own bucket, so a test reads its requests from the
//! server's log filtered by its bucket. Requests are counted, never timed.

mod common;

use std::net::TcpListener;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use iceberg::io::FileRead;
use serde_json::json;
use skade::error::Error;
use skade::io::input::{self, InputFile};
use skade::io::object::{self, S3Options};
use skade::ErrorKind;

use common::s3::{Request, S3Server, SECRET};

const MIB: usize = 1024 * 1024;
const WRONG_KEY_ID: &str = "AKIAWRONGKEYID";
const WRONG_SECRET: &str = "wrong-secret-value-123";

fn server() -> &'static S3Server {
    S3Server::shared()
}

/// The bucket's name in its URL (`s3://name` -> `name`).
fn name(bucket: &str) -> &str {
    object::split(bucket).unwrap().0
}

/// The requests to `bucket`, from the `from`-th on: a test marks where it stands with
/// `requests_since(bucket, 0).len()` (the log only grows).
fn requests_since(bucket: &str, from: usize) -> Vec<Request> {
    server().log(name(bucket)).split_off(from)
}

/// The requests of `method` among `requests`.
fn of(requests: &[Request], method: &str) -> Vec<Request> {
    requests.iter().filter(|r| r.method == method).cloned().collect()
}

/// A fresh bucket on the shared server, reached with its key but with `timeout` per request and
/// `retries`: the fault tests need short ones, and exact retry counts.
fn fresh_with(label: &str, timeout: Duration, retries: usize) -> String {
    let bucket = format!("s3://{}", server().bucket(label));
    let options = S3Options { timeout: Some(timeout), retries: Some(retries), ..server().options() };
    object::set_options(&bucket, options).unwrap();
    bucket
}

/// A bucket the server has, registered with a key it refuses (403 InvalidAccessKeyId).
fn wrong_key_bucket(label: &str) -> String {
    let bucket = format!("s3://{}", server().bucket(label));
    let options = S3Options {
        secret_name: "bad_secret".into(),
        key_id: WRONG_KEY_ID.into(),
        secret: WRONG_SECRET.into(),
        ..server().options()
    };
    object::set_options(&bucket, options).unwrap();
    bucket
}

/// A bucket the server does not have, reached with the right key.
fn missing_bucket(label: &str) -> String {
    let bucket = format!("s3://{label}-{}", std::process::id());
    object::set_options(&bucket, server().options()).unwrap();
    bucket
}

/// A bucket at an endpoint where nothing listens (a port that was just free: connections are
/// refused), with a short timeout and one retry.
fn unreachable_bucket(label: &str) -> String {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let bucket = format!("s3://{label}-{}", std::process::id());
    let options = S3Options {
        endpoint: format!("127.0.0.1:{port}"),
        timeout: Some(Duration::from_millis(300)),
        retries: Some(1),
        ..server().options()
    };
    object::set_options(&bucket, options).unwrap();
    bucket
}

/// `len` bytes that differ from one offset to the next (a xorshift stream): a part uploaded
/// twice, or in the wrong place, cannot read back equal.
fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn put(location: &str, bytes: impl Into<Bytes>) {
    object::wait(object::put(location, bytes.into())).unwrap();
}

fn get(location: &str) -> Option<Bytes> {
    object::wait(object::get(location)).unwrap()
}

/// Puts each location with its own name as content, 32 requests in flight: the server serves one
/// at a time, but 1,100 round trips one after the other would dominate this file's runtime.
fn put_many(locations: &[String]) {
    let puts = futures::stream::iter(locations).map(|l| object::put(l, Bytes::from(l.clone())));
    object::wait(puts.buffer_unordered(32).try_collect::<Vec<()>>()).unwrap();
}

/// `count` locations under `folder`, named so that key order is number order.
fn numbered(folder: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{folder}/obj-{i:05}")).collect()
}

fn locations(listed: &[object::Listed]) -> Vec<String> {
    listed.iter().map(|l| l.location.clone()).collect()
}

/// Every error about an object must say which one.
#[track_caller]
fn assert_names(e: &Error, location: &str) {
    assert!(e.message.contains(location), "the error does not name {location}: {e:?}");
}

// ---- exclusive creates ----

#[test]
fn put_new_creates_once_and_write_new_refuses_an_existing_object() {
    let bucket = server().fresh("put-new");
    let location = format!("{bucket}/log/00000000000000000001.batch");
    assert!(object::wait(object::put_new(&location, Bytes::from_static(b"first"))).unwrap());
    assert!(!object::wait(object::put_new(&location, Bytes::from_static(b"second"))).unwrap());
    assert_eq!(get(&location).unwrap(), "first");

    let e = skade::io::write_new(&location, b"third").unwrap_err();
    assert_names(&e, &location);
    assert_eq!(get(&location).unwrap(), "first");
    // ... and on a free name it creates.
    let other = format!("{bucket}/log/00000000000000000002.batch");
    skade::io::write_new(&other, b"fresh").unwrap();
    assert_eq!(get(&other).unwrap(), "fresh");
    // Each refusal was the server's (412), not a check made before the PUT.
    let puts = of(&requests_since(&bucket, 0), "PUT");
    let statuses: Vec<u16> = puts.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 412, 412, 200]);
}

#[test]
fn racing_put_new_has_one_winner_holding_its_bytes() {
    const THREADS: usize = 8;
    let bucket = server().fresh("put-new-race");
    for round in 0..20 {
        let location = format!("{bucket}/log/{round:020}.batch");
        // (the barrier releases the 8 PUTs together: each thread has its client ready)
        let start = Arc::new(Barrier::new(THREADS));
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let (location, start) = (location.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    object::wait(object::put_new(&location, Bytes::from(format!("thread {t}")))).unwrap()
                })
            })
            .collect();
        let won: Vec<usize> =
            threads.into_iter().enumerate().filter_map(|(t, h)| h.join().unwrap().then_some(t)).collect();
        assert_eq!(won.len(), 1, "round {round}: winners {won:?}");
        assert_eq!(get(&location).unwrap(), format!("thread {}", won[0]), "round {round}");
    }
}

// ---- reads ----

#[test]
fn get_of_a_missing_object_is_none_and_ranges_read_their_bytes() {
    let bucket = server().fresh("reads");
    let location = format!("{bucket}/data/f.bin");
    let data = pattern(1000, 1);
    put(&location, data.clone());
    assert!(get(&format!("{bucket}/data/missing.bin")).is_none());
    assert_eq!(get(&location).unwrap(), data);
    assert_eq!(object::wait(object::get_range(&location, 100..250)).unwrap(), data[100..250]);

    let before = requests_since(&bucket, 0).len();
    let ranges = [0..10, 500..600, 990..1000];
    let got = object::wait(object::get_ranges(&location, &ranges)).unwrap();
    let want: Vec<&[u8]> = ranges.iter().map(|r| &data[r.start as usize..r.end as usize]).collect();
    assert_eq!(got, want);
    // Ranges within 1 MiB of each other are merged into one GET.
    let gets = of(&requests_since(&bucket, before), "GET");
    assert_eq!(gets.len(), 1, "{gets:?}");
}

#[test]
fn input_file_opens_without_a_request_and_asks_the_size_once() {
    let bucket = server().fresh("input-file");
    let location = format!("{bucket}/data/f.parquet");
    let data = pattern(4096, 2);
    put(&location, data.clone());
    let mark = requests_since(&bucket, 0).len();

    let f = InputFile::open(&location, "data file").unwrap();
    assert_eq!(f.location(), location);
    assert!(requests_since(&bucket, mark).is_empty(), "opening an object costs no request");
    assert_eq!(f.size().unwrap(), 4096);
    assert_eq!(f.size().unwrap(), 4096);
    let heads = requests_since(&bucket, mark);
    assert_eq!(heads.iter().map(|r| r.method.as_str()).collect::<Vec<_>>(), ["HEAD"], "one HEAD for two sizes");
    assert_eq!(f.read_range(1000, 96).unwrap(), data[1000..1096]);

    // A known length (a manifest records it) saves the HEAD.
    let mark = requests_since(&bucket, 0).len();
    let sized = InputFile::open_sized(&location, "data file", 4096).unwrap();
    assert_eq!(sized.size().unwrap(), 4096);
    assert!(requests_since(&bucket, mark).is_empty());
    assert_eq!(sized.read_range(0, 16).unwrap(), data[..16]);
    assert_eq!(of(&requests_since(&bucket, mark), "GET").len(), 1);

    // A missing object opens (no request) and fails at its first use, named.
    let missing = format!("{bucket}/data/missing.parquet");
    let e = InputFile::open(&missing, "data file").unwrap().size().unwrap_err();
    assert_names(&e, &missing);
    assert!(e.message.contains("data file"), "{e:?}");
}

#[test]
fn reads_past_the_end_are_errors_naming_the_file() {
    let bucket = server().fresh("read-past-end");
    let location = format!("{bucket}/data/f.parquet");
    put(&location, pattern(100, 3));
    let f = InputFile::open_sized(&location, "data file", 100).unwrap();
    // Starting past the end: S3 answers 416.
    let e = f.read_range(200, 10).unwrap_err();
    assert_names(&e, &location);
    // Starting inside, ending past the end: S3 answers 206 with the 10 bytes there are; a short
    // read must fail as it does on a local file, not hand back fewer bytes than asked.
    let e = f.read_range(90, 20).map(|b| b.len()).unwrap_err();
    assert_names(&e, &location);
    let e = object::wait(object::get_range(&location, 90..120)).map(|b| b.len()).unwrap_err();
    assert_names(&e, &location);
    let e = object::wait(object::get_ranges(&location, &[0..10, 90..120])).map(|b| b.len()).unwrap_err();
    assert_names(&e, &location);
}

#[test]
fn read_whole_and_read_head_on_objects() {
    let bucket = server().fresh("read-whole");
    let location = format!("{bucket}/metadata/v1.metadata.json");
    let data = pattern(300, 4);
    put(&location, data.clone());
    assert_eq!(input::read_whole(&location, "metadata file").unwrap(), data);
    let missing = format!("{bucket}/metadata/v2.metadata.json");
    let e = input::read_whole(&missing, "metadata file").unwrap_err();
    assert_names(&e, &missing);
    assert!(e.message.contains("does not exist"), "{e:?}");

    assert_eq!(input::read_head(&location, 16).unwrap(), data[..16]);
    // An object shorter than asked gives what it has.
    let short = format!("{bucket}/short");
    put(&short, "SQLite?");
    assert_eq!(input::read_head(&short, 128).unwrap(), b"SQLite?");
}

#[test]
fn read_head_of_an_empty_object_is_empty() {
    // An empty local file reads as no bytes; an empty object must too (a zero-length range is
    // no request at all, which S3 could not express).
    let bucket = server().fresh("read-head-empty");
    let location = format!("{bucket}/empty");
    put(&location, Bytes::new());
    assert_eq!(input::read_head(&location, 8).unwrap(), b"");
    let f = InputFile::open_sized(&location, "file", 0).unwrap();
    assert_eq!(f.read_range(0, 0).unwrap(), Bytes::new());
}

// ---- listings ----

#[test]
fn list_walks_more_than_a_page_in_key_order() {
    let bucket = server().fresh("list-pages");
    let folder = format!("{bucket}/log");
    let keys = numbered(&folder, 1100);
    put_many(&keys);
    // Neighbours that a string prefix would catch but the folder does not hold, and a nested
    // object that a recursive listing must include.
    put(&format!("{bucket}/logs/x"), "x");
    put(&format!("{bucket}/log-old/x"), "x");
    let nested = format!("{folder}/truncated/00000000000000000005");
    put(&nested, "mark");

    let mark = requests_since(&bucket, 0).len();
    let all = object::wait(object::list(&folder, None)).unwrap();
    let mut want = keys.clone();
    want.push(nested.clone());
    assert_eq!(locations(&all), want);
    assert!(all.iter().take(1100).zip(&keys).all(|(l, k)| l.size == k.len() as u64));
    // 1,101 keys are two pages of S3's 1,000.
    assert_eq!(of(&requests_since(&bucket, mark), "GET").len(), 2);

    // After a key: what follows it, in order (the log's walk from a position).
    let after = object::wait(object::list(&folder, Some(&keys[499]))).unwrap();
    assert_eq!(locations(&after), want[500..]);
    // A trailing slash names the same folder.
    assert_eq!(object::wait(object::list(&format!("{folder}/"), Some(&keys[1098]))).unwrap().len(), 2);
    assert!(object::wait(object::list(&format!("{bucket}/nothing"), None)).unwrap().is_empty());
}

#[test]
fn list_folder_and_input_list_show_objects_and_sub_folders() {
    let bucket = server().fresh("list-folder");
    let folder = format!("{bucket}/warehouse/main/t");
    put(&format!("{folder}/a.json"), "aa");
    put(&format!("{folder}/b.json"), "bbb");
    put(&format!("{folder}/data/x.parquet"), "x");
    put(&format!("{folder}/metadata/v1/deep.json"), "y");
    put(&format!("{bucket}/warehouse/main/t2/other.json"), "z");

    let mut found = object::wait(object::list_folder(&folder)).unwrap();
    found.sort_by(|a, b| a.location.cmp(&b.location));
    let named: Vec<(String, u64)> =
        found.iter().map(|l| (l.location.trim_end_matches('/').to_string(), l.size)).collect();
    let want = [("a.json", 2), ("b.json", 3), ("data", 0), ("metadata", 0)];
    let want: Vec<(String, u64)> = want.iter().map(|(n, s)| (format!("{folder}/{n}"), *s)).collect();
    assert_eq!(named, want);

    // input::list: the same entries, a sub-folder without a time (it has none of its own).
    let mut listed = input::list(&folder).unwrap();
    listed.sort_by(|a, b| a.location.cmp(&b.location));
    let entries: Vec<(String, bool)> = listed.iter().map(|l| (l.location.clone(), l.modified.is_some())).collect();
    let want = [("a.json", true), ("b.json", true), ("data", false), ("metadata", false)];
    let want: Vec<(String, bool)> = want.iter().map(|(n, t)| (format!("{folder}/{n}"), *t)).collect();
    assert_eq!(entries, want);
    assert!(input::list(&format!("{bucket}/nowhere")).unwrap().is_empty());
}

// ---- deletes ----

#[test]
fn delete_removes_1100_objects_in_bulk() {
    let bucket = server().fresh("delete-bulk");
    let keys = numbered(&format!("{bucket}/data"), 1100);
    put_many(&keys);
    let keep = format!("{bucket}/keep");
    put(&keep, "kept");
    let mut doomed = keys.clone();
    // Keys that were never there are not an error.
    doomed.push(format!("{bucket}/data/never-1"));
    doomed.push(format!("{bucket}/never/2"));

    let mark = requests_since(&bucket, 0).len();
    object::wait(object::delete(&doomed)).unwrap();
    let requests = requests_since(&bucket, mark);
    // DeleteObjects takes 1,000 keys a request: 2 POSTs, no DELETE per key.
    assert_eq!(of(&requests, "POST").len(), 2, "{requests:?}");
    assert!(of(&requests, "DELETE").is_empty());
    assert_eq!(locations(&object::wait(object::list(&bucket, None)).unwrap()), [keep]);
    // Deleting nothing, or the already deleted, is fine too.
    object::wait(object::delete(&[])).unwrap();
    object::wait(object::delete(&keys[..3])).unwrap();
}

#[test]
fn remove_files_takes_local_and_object_paths() {
    let bucket = server().fresh("remove-files");
    let dir = common::TestDir::new();
    let local = dir.path().join("staged.parquet");
    std::fs::write(&local, b"local").unwrap();
    let (a, b) = (format!("{bucket}/data/a.parquet"), format!("{bucket}/data/b.parquet"));
    put(&a, "a");
    put(&b, "b");
    let kept = format!("{bucket}/data/kept.parquet");
    put(&kept, "kept");
    let missing = format!("{bucket}/data/never.parquet");

    skade::io::remove_files([local.to_str().unwrap(), a.as_str(), missing.as_str(), b.as_str()]);
    assert!(!local.exists());
    assert!(get(&a).is_none() && get(&b).is_none());
    assert_eq!(get(&kept).unwrap(), "kept");
}

// ---- multipart uploads ----

#[test]
fn an_upload_is_invisible_until_finished_and_goes_in_parts() {
    let bucket = server().fresh("upload");
    let location = format!("{bucket}/data/big.parquet");
    let data = pattern(25 * MIB, 5);
    let mut upload = object::Upload::new(&location).unwrap();
    for chunk in data.chunks(MIB) {
        object::wait(upload.write(Bytes::copy_from_slice(chunk))).unwrap();
    }
    // The upload is under way at the server (created, parts going) but no object shows yet.
    assert!(!of(&requests_since(&bucket, 0), "POST").is_empty());
    assert!(object::wait(object::head(&location)).unwrap().is_none());
    assert!(object::wait(object::list(&bucket, None)).unwrap().is_empty());

    object::wait(upload.finish()).unwrap();
    assert_eq!(object::wait(object::head(&location)).unwrap().unwrap().0, data.len() as u64);
    let got = get(&location).unwrap();
    assert!(got[..] == data[..], "the object read back differs ({} bytes)", got.len());

    // POST ?uploads, PUT of each 10 MiB part (the last one 5), POST of the completion.
    let requests: Vec<Request> =
        requests_since(&bucket, 0).into_iter().filter(|r| r.path.ends_with("/big.parquet")).collect();
    let writes: Vec<&str> =
        requests.iter().filter(|r| r.method == "POST" || r.method == "PUT").map(|r| r.method.as_str()).collect();
    assert_eq!(writes, ["POST", "PUT", "PUT", "PUT", "POST"], "{requests:?}");
    let mut sizes: Vec<u64> = of(&requests, "PUT").iter().map(|r| r.bytes).collect();
    sizes.sort();
    assert_eq!(sizes, [5 * MIB as u64, 10 * MIB as u64, 10 * MIB as u64], "{requests:?}");
    assert!(requests.iter().all(|r| r.status == 200 || r.method == "HEAD" || r.method == "GET"), "{requests:?}");
}

// ---- faults ----

#[test]
fn slow_down_twice_is_retried() {
    let bucket = server().fresh("slow-down-retried");
    let location = format!("{bucket}/log/00000000000000000001.batch");
    let path = format!("/{}/log/", name(&bucket));
    server().fault(json!({"method": "PUT", "prefix": path, "status": 503, "code": "SlowDown", "count": 2}));
    assert!(object::wait(object::put_new(&location, Bytes::from_static(b"batch"))).unwrap());
    server().fault(json!({"method": "GET", "prefix": path, "status": 503, "code": "SlowDown", "count": 2}));
    assert_eq!(get(&location).unwrap(), "batch");

    let statuses = |method: &str| of(&requests_since(&bucket, 0), method).iter().map(|r| r.status).collect::<Vec<_>>();
    assert_eq!(statuses("PUT"), [503, 503, 200]);
    assert_eq!(statuses("GET"), [503, 503, 200]);
}

#[test]
fn slow_down_past_the_retries_fails_naming_the_object() {
    // One retry: the second 503 is the last answer.
    let bucket = fresh_with("slow-down-fails", Duration::from_secs(5), 1);
    let location = format!("{bucket}/data/f.parquet");
    let path = format!("/{}/data/", name(&bucket));
    server().fault(json!({"method": "PUT", "prefix": path, "status": 503, "code": "SlowDown", "count": 2}));
    let e = object::wait(object::put(&location, Bytes::from_static(b"data"))).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io);
    assert_names(&e, &location);
    assert!(e.message.contains("SlowDown") || e.message.contains("503"), "{e:?}");
    let statuses: Vec<u16> = of(&requests_since(&bucket, 0), "PUT").iter().map(|r| r.status).collect();
    assert_eq!(statuses, [503, 503]);
    assert!(get(&location).is_none());
}

#[test]
fn a_timeout_fails_naming_the_object_and_a_conditional_put_is_not_retried() {
    // 1 s per request and one retry; the server holds faulted requests for 3 s, then serves
    // them (nothing waits for that: a held request only needs to outlast the timeout). (300 ms
    // timed out unheld requests too on a loaded 2-core machine, where the server shares the
    // cores with builds.)
    let bucket = fresh_with("timeouts", Duration::from_secs(1), 1);
    let location = format!("{bucket}/k");
    put(&location, "bytes");
    let path = format!("/{}/k", name(&bucket));

    server().fault(json!({"method": "GET", "prefix": path, "delay": 3.0, "count": 2}));
    let e = object::wait(object::get(&location)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Io);
    assert_names(&e, &location);
    // One held GET: the retry (a GET is idempotent) answers.
    server().fault(json!({"method": "GET", "prefix": path, "delay": 3.0, "count": 1}));
    assert_eq!(get(&location).unwrap(), "bytes");

    // A conditional PUT that timed out may have landed: it is not retried (its caller settles
    // it by reading back). Had it been, the unheld second attempt would have succeeded.
    let offer = format!("{bucket}/new");
    server().fault(json!({"method": "PUT", "prefix": format!("/{}/new", name(&bucket)), "delay": 3.0, "count": 1}));
    let e = object::wait(object::put_new(&offer, Bytes::from_static(b"offer"))).unwrap_err();
    assert_names(&e, &offer);
}

#[test]
fn a_wrong_access_key_is_a_permission_error_without_credentials() {
    let bucket = wrong_key_bucket("wrong-key");
    let location = format!("{bucket}/log/00000000000000000000.batch");

    // (S3 names its code in the body of an answer; a HEAD's answer has none)
    let refusals = [
        (object::wait(object::put_new(&location, Bytes::from_static(b"x"))).map(|_| ()), Some("InvalidAccessKeyId")),
        (object::wait(object::get(&location)).map(|_| ()), Some("InvalidAccessKeyId")),
        (object::wait(object::head(&location)).map(|_| ()), None),
    ];
    for (r, code) in refusals {
        let e = r.unwrap_err();
        assert_eq!(e.kind, ErrorKind::Permission, "{e:?}");
        assert_names(&e, &location);
        assert!(code.is_none_or(|c| e.message.contains(c)), "{e:?}");
        assert!(e.message.contains("check the S3 secret's KEY_ID"), "no way out in {e:?}");
        for credential in [WRONG_KEY_ID, WRONG_SECRET, SECRET] {
            assert!(!e.message.contains(credential), "{e:?} shows a credential");
        }
    }
    // A refusal is final: one request each, none retried.
    let statuses: Vec<(String, u16)> = requests_since(&bucket, 0).into_iter().map(|r| (r.method, r.status)).collect();
    let want = [("PUT", 403), ("GET", 403), ("HEAD", 403)];
    assert_eq!(statuses, want.map(|(m, s)| (m.to_string(), s)));
}

#[test]
fn a_missing_bucket_is_named_by_writes_and_listings() {
    let bucket = missing_bucket("no-such-bucket");
    let location = format!("{bucket}/log/00000000000000000000.batch");
    let e = object::wait(object::put_new(&location, Bytes::from_static(b"x"))).unwrap_err();
    assert_names(&e, &location);
    assert!(e.message.contains(&format!("bucket {} does not exist", name(&bucket))), "{e:?}");
    let e = object::wait(object::list(&format!("{bucket}/log"), None)).unwrap_err();
    assert!(e.message.contains(&format!("bucket {} does not exist", name(&bucket))), "{e:?}");
}

#[test]
fn a_read_from_a_missing_bucket_names_the_bucket() {
    // S3 tells a missing bucket (404 NoSuchBucket) from a missing object (404 NoSuchKey) in a
    // GET's body: a missing bucket is no "object not there", which a caller would act on (the log
    // takes a missing position as free).
    let bucket = missing_bucket("no-such-bucket-read");
    let location = format!("{bucket}/metadata/v1.metadata.json");
    let e = object::wait(object::get(&location)).unwrap_err();
    assert!(e.message.contains(&format!("bucket {} does not exist", name(&bucket))), "{e:?}");
    let e = input::read_whole(&location, "metadata file").unwrap_err();
    assert_names(&e, &location);
    assert!(e.message.contains(&format!("bucket {} does not exist", name(&bucket))), "{e:?}");
}

#[test]
fn an_unreachable_endpoint_fails_naming_the_object_in_bounded_time() {
    let bucket = unreachable_bucket("unreachable");
    let location = format!("{bucket}/k");
    let start = Instant::now();
    let e = object::wait(object::put_new(&location, Bytes::from_static(b"x"))).unwrap_err();
    assert_names(&e, &location);
    let e = object::wait(object::get(&location)).unwrap_err();
    assert_names(&e, &location);
    // The one bound this file checks by time: the default policy (60 s, 6 retries) would hold a
    // statement for minutes; these options must give up within seconds.
    assert!(start.elapsed() < Duration::from_secs(10), "took {:?}", start.elapsed());
}

#[test]
fn refusals_and_missing_buckets_name_where_the_request_went() {
    // The design's retry table: a 403 names what to check (the secret, by name), a missing
    // bucket the endpoint that has none; the key and secret themselves never appear.
    let endpoint = format!("http://{}", server().endpoint);
    let location = format!("{}/k", wrong_key_bucket("refusal-names-secret"));
    let e = object::wait(object::put_new(&location, Bytes::from_static(b"x"))).unwrap_err();
    assert!(e.message.contains("secret bad_secret") && e.message.contains(&endpoint), "{e:?}");
    assert!(!e.message.contains(WRONG_KEY_ID) && !e.message.contains(WRONG_SECRET), "{e:?}");
    let location = format!("{}/k", missing_bucket("no-such-bucket-endpoint"));
    let e = object::wait(object::put_new(&location, Bytes::from_static(b"x"))).unwrap_err();
    assert!(e.message.contains(&endpoint), "{e:?}");
}

#[test]
fn transport_failures_say_why() {
    // object_store words both "error sending request": only the cause tells a wrong endpoint
    // (refused) from a slow server (timed out).
    let location = format!("{}/k", unreachable_bucket("refused"));
    let e = object::wait(object::get(&location)).unwrap_err();
    assert!(e.message.contains("Connection refused"), "{e:?}");
    // (without Rust's " (os error N)", as every I/O message of skade)
    assert!(!e.message.contains("os error"), "{e:?}");
    let bucket = fresh_with("timed-out", Duration::from_millis(300), 0);
    let location = format!("{bucket}/k");
    server().fault(json!({"method": "GET", "prefix": format!("/{}/k", name(&bucket)), "delay": 1.0}));
    let e = object::wait(object::get(&location)).unwrap_err();
    assert!(e.message.contains("timed out"), "{e:?}");
}

// ---- credentials by prefix ----

#[test]
fn the_longest_registered_prefix_picks_the_credentials() {
    let wrong = S3Options { key_id: "AKIAOTHER".into(), secret: "other".into(), ..server().options() };
    let created = |location: &str| object::wait(object::put_new(location, Bytes::from_static(b"x")));

    // The bucket's key is right, the sub-folder's is wrong.
    let bucket = server().fresh("scope-sub-wrong");
    object::set_options(&format!("{bucket}/special"), wrong.clone()).unwrap();
    assert_eq!(created(&format!("{bucket}/special/x")).unwrap_err().kind, ErrorKind::Permission);
    assert!(created(&format!("{bucket}/specialty/x")).unwrap());
    assert!(created(&format!("{bucket}/x")).unwrap());

    // The other way round: only the sub-folder is reachable.
    let bucket = format!("s3://{}", server().bucket("scope-sub-right"));
    object::set_options(&bucket, wrong).unwrap();
    object::set_options(&format!("{bucket}/special/"), server().options()).unwrap();
    assert!(created(&format!("{bucket}/special/x")).unwrap());
    assert_eq!(created(&format!("{bucket}/specialty/x")).unwrap_err().kind, ErrorKind::Permission);
    assert_eq!(created(&format!("{bucket}/x")).unwrap_err().kind, ErrorKind::Permission);
    // ... and the server saw exactly that: one 200, two 403s.
    let statuses: Vec<u16> = requests_since(&bucket, 0).iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 403, 403]);
}

// ---- the iceberg crate's storage ----

#[test]
fn iceberg_storage_creates_once_reads_and_uploads() {
    let bucket = server().fresh("iceberg-storage");
    let io = skade::io::storage::file_io();
    let location = format!("{bucket}/warehouse/main/t/metadata/00001-a.metadata.json");
    let output = io.new_output(&location).unwrap();
    object::wait(output.write(Bytes::from_static(b"{\"format-version\":2}"))).unwrap();
    // Whole files are metadata: a second write is refused and changes nothing.
    let e = object::wait(io.new_output(&location).unwrap().write(Bytes::from_static(b"{}"))).unwrap_err();
    assert!(e.to_string().contains(&location), "{e}");
    let input = io.new_input(&location).unwrap();
    assert_eq!(object::wait(input.read()).unwrap(), "{\"format-version\":2}");
    assert_eq!(object::wait(input.metadata()).unwrap().size, 20);
    assert!(object::wait(input.exists()).unwrap());
    let reader = object::wait(input.reader()).unwrap();
    assert_eq!(object::wait(reader.read(1..17)).unwrap(), "\"format-version\"");
    let missing = io.new_input(format!("{bucket}/warehouse/main/t/metadata/none.json")).unwrap();
    assert!(!object::wait(missing.exists()).unwrap());

    // A writer is a multipart upload above 10 MiB, visible once closed.
    let data_file = format!("{bucket}/warehouse/main/t/data/00000-0-a.parquet");
    let data = pattern(11 * MIB, 6);
    let mut writer = object::wait(io.new_output(&data_file).unwrap().writer()).unwrap();
    for chunk in data.chunks(MIB) {
        object::wait(writer.write(Bytes::copy_from_slice(chunk))).unwrap();
    }
    assert!(!object::wait(io.exists(&data_file)).unwrap());
    object::wait(writer.close()).unwrap();
    let got = object::wait(io.new_input(&data_file).unwrap().read()).unwrap();
    assert!(got[..] == data[..], "the data file read back differs ({} bytes)", got.len());
    let requests: Vec<Request> =
        requests_since(&bucket, 0).into_iter().filter(|r| r.path.ends_with("/00000-0-a.parquet")).collect();
    assert_eq!((of(&requests, "POST").len(), of(&requests, "PUT").len()), (2, 2), "{requests:?}");

    // delete_prefix removes the table's objects and nothing beside them.
    let beside = format!("{bucket}/warehouse/main/t2/x");
    put(&beside, "x");
    object::wait(io.delete_prefix(format!("{bucket}/warehouse/main/t"))).unwrap();
    assert_eq!(locations(&object::wait(object::list(&bucket, None)).unwrap()), [beside]);
}
