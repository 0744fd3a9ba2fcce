//! The bucket log (`src/commit_log/bucket.rs`, issue 44 increment 5) against the local S3 server:
//! the folder log's rules on objects, the probe that refuses a store ignoring `If-None-Match`,
//! every unclear answer of a conditional PUT settled by reading the position back (503s, a 409,
//! our own retried PUT, a PUT that never lands), and what each operation costs in requests. The
//! race runs over the folder log too: one protocol, two stores.

mod common;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::s3::S3Server;
use serde_json::json;
use skade::commit_log::bucket::BucketLog;
use skade::commit_log::folder::FolderLog;
use skade::commit_log::{provider_for_open, Batch, Committer, LogReader, Offered};
use skade::io::object;

/// A fresh bucket with a log location under it.
struct Lake {
    bucket: String,
    location: String,
}

impl Lake {
    fn new(name: &str) -> Lake {
        let url = S3Server::shared().fresh(name);
        Lake { bucket: url["s3://".len()..].to_string(), location: format!("{url}/lake/log") }
    }

    fn log(&self) -> BucketLog {
        BucketLog::open(&self.location).unwrap()
    }

    fn adopted(&self) -> BucketLog {
        let log = self.log();
        assert_eq!(log.adopt(b"stamp").unwrap(), b"stamp");
        log
    }

    fn object(&self, seq: u64) -> String {
        format!("{}/{seq:020}.batch", self.location)
    }

    /// The server's path of position `seq`.
    fn path(&self, seq: u64) -> String {
        self.object(seq)["s3:/".len()..].to_string()
    }

    fn exists(&self, seq: u64) -> bool {
        object::wait(object::head(&self.object(seq))).unwrap().is_some()
    }

    /// Every request the server served for this bucket: (method, path, status); a LIST or a bulk
    /// delete shows as the bucket's own path.
    fn served(&self) -> Vec<(String, String, u16)> {
        let bucket = format!("/{}", self.bucket);
        let mine = |p: &str| p == bucket || p.starts_with(&format!("{bucket}/"));
        S3Server::shared().requests(&bucket).into_iter().filter(|(_, p, _)| mine(p)).collect()
    }

    /// The requests served after the first `before`.
    fn served_since(&self, before: usize) -> Vec<(String, String, u16)> {
        self.served().split_off(before)
    }

    /// Injects a fault on the requests to position `seq`.
    fn fault(&self, seq: u64, fault: serde_json::Value) {
        let mut fault = fault;
        fault["prefix"] = json!(self.path(seq));
        S3Server::shared().fault(fault);
    }
}

fn request(method: &str, path: &str, status: u16) -> (String, String, u16) {
    (method.to_string(), path.to_string(), status)
}

fn seqs(batches: &[skade::commit_log::Batch]) -> Vec<u64> {
    batches.iter().map(|b| b.seq).collect()
}

#[test]
fn a_position_is_won_once_and_the_loser_gets_every_batch_since() {
    let lake = Lake::new("won-once");
    let log = lake.log();
    assert_eq!(Committer::adoption(&log).unwrap(), None);
    assert_eq!(log.adopt(b"stamp a").unwrap(), b"stamp a");
    assert_eq!(lake.log().adopt(b"stamp b").unwrap(), b"stamp a", "the first stamp holds");
    assert_eq!(log.offer(1, b"one").unwrap(), Offered::Won(1));
    assert_eq!(log.offer(2, b"two").unwrap(), Offered::Won(2));
    // a committer prepared on head 0 races position 1 and loses to both
    let late = lake.log();
    let Offered::Lost(batches) = late.offer(1, b"late").unwrap() else { panic!("won a taken position") };
    assert_eq!(
        batches.iter().map(|b| (b.seq, b.bytes.as_slice())).collect::<Vec<_>>(),
        [(1, &b"one"[..]), (2, &b"two"[..])]
    );
    assert_eq!(late.offer(3, b"late").unwrap(), Offered::Won(3));
    assert_eq!(seqs(&log.tail(2, 10).unwrap()), [2, 3]);
    assert!(log.wait_served(3, Duration::ZERO).unwrap());
    assert!(!log.wait_served(4, Duration::from_millis(50)).unwrap());
    // the probe left nothing behind
    assert!(object::wait(object::list(&format!("{}/probe", lake.location), None)).unwrap().is_empty());
}

#[test]
fn an_unadopted_prefix_is_an_error_not_a_fresh_log() {
    let lake = Lake::new("unadopted");
    let log = lake.log();
    for e in [log.offer(1, b"x").unwrap_err(), log.tail(1, 9).unwrap_err(), log.start().unwrap_err()] {
        assert!(e.message.contains(&format!("{} is not an adopted commit log", lake.location)), "{}", e.message);
    }
    assert!(lake.served().iter().all(|(m, _, _)| m != "PUT"), "wrote to a log it was only asked to use");
    log.adopt(b"stamp").unwrap();
    assert_eq!(log.offer(1, b"x").unwrap(), Offered::Won(1));
    // the in-tree provider of an s3:// location is this one
    assert_eq!(provider_for_open(None, Some(&lake.location)).unwrap().name(), "skade bucket log");
    assert_eq!(provider_for_open(None, Some("/tmp/lake.log")).unwrap().name(), "skade folder log");
}

/// Four committers, each a thread with its own open log (as processes or hosts have), offer 50
/// batches each on the heads they learn: they win distinct positions 1..=200, and a reader finds
/// every batch exactly once. The folder log's race too, since it is the same protocol.
fn race<L: Committer + LogReader + 'static>(open: impl Fn() -> L + Send + Sync + 'static) {
    open().adopt(b"stamp").unwrap();
    let open = Arc::new(open);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let open = open.clone();
            std::thread::spawn(move || {
                let log = open();
                let (mut head, mut won) = (0, vec![]);
                while won.len() < 50 {
                    match log.offer(head + 1, format!("{t}-{}", won.len()).as_bytes()).unwrap() {
                        Offered::Won(seq) => {
                            won.push(seq);
                            head = seq;
                        }
                        Offered::Lost(batches) => head = batches.last().unwrap().seq,
                    }
                }
                won
            })
        })
        .collect();
    let mut all: Vec<u64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
    all.sort_unstable();
    assert_eq!(all, (1..=200).collect::<Vec<_>>());
    let batches = open().tail(1, usize::MAX).unwrap();
    assert_eq!(seqs(&batches), (1..=200).collect::<Vec<_>>());
    let bytes: BTreeSet<String> = batches.iter().map(|b| String::from_utf8(b.bytes.clone()).unwrap()).collect();
    let expected: BTreeSet<String> = (0..4).flat_map(|t| (0..50).map(move |i| format!("{t}-{i}"))).collect();
    assert_eq!(bytes, expected, "every batch exactly once");
}

#[test]
fn racing_committers_win_distinct_gapless_positions_and_every_batch_lands_once() {
    let dir = common::TestDir::new();
    let folder = dir.path().join("lake.log").to_str().unwrap().to_string();
    race(move || FolderLog::open(&folder).unwrap());
    let lake = Arc::new(Lake::new("race"));
    let bucket = lake.clone();
    race(move || bucket.log());
    // a long replay by a log just opened: a LIST of the truncation marks (where the log starts),
    // 64 GETs one by one, then one LIST and the rest 32 at a time, in order
    let before = lake.served().len();
    assert_eq!(lake.log().tail(1, usize::MAX).unwrap().len(), 200);
    let served = lake.served_since(before);
    let lists = served.iter().filter(|(m, p, _)| m == "GET" && *p == format!("/{}", lake.bucket)).count();
    let gets = served.iter().filter(|(m, p, _)| m == "GET" && p.ends_with(".batch")).count();
    assert_eq!((lists, gets), (2, 200 + 1), "{served:?}");
}

#[test]
fn a_damaged_object_is_an_error_naming_it() {
    let lake = Lake::new("damaged");
    let log = lake.adopted();
    for s in 1..=3 {
        log.offer(s, b"batch").unwrap();
    }
    let stored = object::wait(object::get(&lake.object(3))).unwrap().unwrap();
    let mut flipped = stored.to_vec();
    *flipped.last_mut().unwrap() ^= 1;
    object::wait(object::put(&lake.object(3), flipped.into())).unwrap();
    let e = log.tail(1, 9).unwrap_err();
    assert!(e.message.contains(&lake.object(3)) && e.message.contains("checksum"), "{}", e.message);
    object::wait(object::put(&lake.object(2), bytes::Bytes::from_static(b"garbage"))).unwrap();
    let e = log.tail(2, 9).unwrap_err();
    assert!(e.message.contains(&format!("commit log object {} is damaged", lake.object(2))), "{}", e.message);
    // position 3's envelope copied to 2: misplaced, not a batch
    object::wait(object::put(&lake.object(2), stored)).unwrap();
    assert!(log.tail(2, 1).unwrap_err().message.contains("it holds position 3 instead"));
}

#[test]
fn truncation_keeps_the_stamp_and_two_marks_and_stale_readers_and_committers_get_errors() {
    let lake = Lake::new("truncation");
    let log = lake.adopted().with_keep_age(Duration::ZERO);
    let stalled = lake.log();
    for s in 1..=3 {
        assert_eq!(stalled.offer(s, b"early").unwrap(), Offered::Won(s));
    }
    assert_eq!(seqs(&log.tail(1, 9).unwrap()), [1, 2, 3]);
    for s in 4..=8 {
        assert_eq!(log.offer(s, b"batch").unwrap(), Offered::Won(s));
    }
    assert_eq!(log.truncate_below(4).unwrap(), 3);
    assert_eq!(log.truncate_below(4).unwrap(), 0);
    assert_eq!(log.truncate_below(6).unwrap(), 2);
    assert_eq!(log.truncate_below(7).unwrap(), 1);
    let marks = object::wait(object::list(&format!("{}/truncated", lake.location), None)).unwrap();
    let marks: Vec<&str> = marks.iter().map(|l| l.location.rsplit('/').next().unwrap()).collect();
    assert_eq!(marks, ["6", "7"], "the two newest marks stay");
    let reader = lake.log();
    assert_eq!(LogReader::adoption(&reader).unwrap().unwrap(), b"stamp");
    assert_eq!(reader.start().unwrap(), 7);
    assert_eq!(seqs(&reader.tail(7, 9).unwrap()), [7, 8]);
    // behind the truncation: errors, never a win or an empty tail taken for the head
    let e = lake.log().tail(1, 9).unwrap_err();
    assert!(e.message.contains("was truncated (the log starts at 7)") && e.message.contains(&lake.location));
    assert!(lake.log().offer(5, b"stale").unwrap_err().message.contains("truncated"));
    // a committer whose head (3) was truncated under it, once it no longer trusts that head (it
    // won it moments ago: bucket.rs's HEAD_TRUST, 1 s)
    std::thread::sleep(Duration::from_millis(1100));
    assert!(stalled.offer(4, b"stale").unwrap_err().message.contains("was truncated"));
    assert!(!lake.exists(4), "a truncated position was written again");
    assert!(log.truncate_below(99).unwrap_err().message.contains("holds no batch there"));
    assert!(log.offer(10, b"ahead").unwrap_err().message.contains("a gap"));
    // a committer stalled between seeing its head and its PUT long enough (half the age
    // truncation spares) that truncation removed the position meanwhile: the win is void
    let trusting = lake.log().with_keep_age(Duration::from_millis(200));
    assert_eq!(seqs(&trusting.tail(7, 9).unwrap()), [7, 8]);
    for s in 9..=11 {
        assert_eq!(log.offer(s, b"batch").unwrap(), Offered::Won(s));
    }
    assert_eq!(log.truncate_below(11).unwrap(), 4);
    // (it trusts head 8, read moments ago, and PUTs 9, which truncation removed)
    let e = trusting.offer(9, b"late").unwrap_err();
    assert_eq!(e.kind, skade::ErrorKind::Conflict);
    assert!(e.message.contains("position 9") && e.message.contains("starts at 11"), "{}", e.message);
    assert!(!lake.exists(9), "a void win was left in the log");
    // an interrupted truncation's leftovers go with the next one
    object::wait(object::put(&lake.object(2), bytes::Bytes::from_static(b"left"))).unwrap();
    assert_eq!(log.truncate_below(11).unwrap(), 0, "nothing below the start");
    log.offer(12, b"batch").unwrap();
    assert_eq!(log.truncate_below(12).unwrap(), 2);
    assert!(!lake.exists(2) && !lake.exists(11));
}

#[test]
fn slow_downs_and_an_undecided_409_still_win_exactly_once() {
    let lake = Lake::new("retries");
    let log = lake.adopted();
    lake.fault(1, json!({"method": "PUT", "status": 503, "code": "SlowDown", "count": 2}));
    assert_eq!(log.offer(1, b"one").unwrap(), Offered::Won(1));
    lake.fault(2, json!({"method": "PUT", "status": 409, "code": "ConditionalRequestConflict", "count": 1}));
    let before = lake.served().len();
    assert_eq!(log.offer(2, b"two").unwrap(), Offered::Won(2));
    assert_eq!(
        lake.served_since(before),
        [request("PUT", &lake.path(2), 409), request("GET", &lake.path(2), 404), request("PUT", &lake.path(2), 200)]
    );
    let puts = |seq| lake.served().iter().filter(|(m, p, _)| m == "PUT" && *p == lake.path(seq)).count();
    assert_eq!(puts(1), 3, "two SlowDowns retried by the client, then the win");
    assert_eq!(seqs(&log.tail(1, 9).unwrap()), [1, 2]);
}

#[test]
fn a_put_that_times_out_is_offered_again_until_decided_and_a_put_that_never_lands_is_an_error() {
    let lake = Lake::new("late");
    // a client that gives up after 1 s, under a prefix of its own
    let prefix = format!("s3://{}/slow", lake.bucket);
    let options = object::S3Options { timeout: Some(Duration::from_secs(1)), ..S3Server::shared().options() };
    object::set_options(&prefix, options).unwrap();
    let slow = Lake { bucket: lake.bucket.clone(), location: format!("{prefix}/log") };
    let log = slow.log();
    log.adopt(b"stamp").unwrap();
    // the first PUT reaches the store after the client gave up: the same bytes are PUT again
    // (the late one then finds the position taken), never an error for a commit that lands
    slow.fault(1, json!({"method": "PUT", "delay": 3.0, "count": 1}));
    let before = lake.served().len();
    assert_eq!(log.offer(1, b"one").unwrap(), Offered::Won(1));
    let late = Instant::now() + Duration::from_secs(10);
    while !lake.served_since(before).contains(&request("PUT", &slow.path(1), 412)) {
        assert!(Instant::now() < late, "the delayed PUT never arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(log.tail(1, 9).unwrap(), [Batch { seq: 1, bytes: b"one".to_vec() }]);
    // the late PUT lands before the read-back: the position holds our batch, a win
    slow.fault(2, json!({"method": "PUT", "delay": 1.3, "count": 1}));
    slow.fault(2, json!({"method": "GET", "delay": 0.7, "count": 1}));
    assert_eq!(log.offer(2, b"two").unwrap(), Offered::Won(2));
    // a PUT that fails every time (the client's retries too): an error naming it, saying the
    // outcome is unknown (a 5xx may have been applied), and here nothing written
    slow.fault(3, json!({"method": "PUT", "status": 500, "code": "InternalError", "count": 1000}));
    let e = log.offer(3, b"three").unwrap_err();
    assert!(e.message.contains(&slow.object(3)) && e.message.contains("500"), "{}", e.message);
    assert!(e.message.contains("outcome is unknown"), "{}", e.message);
    assert!(!slow.exists(3));
    assert_eq!(seqs(&log.tail(1, 9).unwrap()), [1, 2]);
    // a refusal cannot land later: the commit was not made, said at once (one PUT)
    let refused = Lake::new("refused");
    let log = refused.log();
    log.adopt(b"stamp").unwrap();
    refused.fault(1, json!({"method": "PUT", "status": 403, "code": "AccessDenied", "count": 1}));
    let before = refused.served().len();
    let e = log.offer(1, b"one").unwrap_err();
    assert_eq!(e.kind, skade::ErrorKind::Permission, "{}", e.message);
    assert_eq!(refused.served_since(before).iter().filter(|(m, _, _)| m == "PUT").count(), 1);
}

#[test]
fn the_probe_refuses_a_store_that_ignores_if_none_match() {
    let lake = Lake::new("probe");
    // both probe PUTs answered 200 and stored nothing: a store that creates whatever it is sent
    S3Server::shared().fault(json!({
        "method": "PUT", "prefix": format!("/{}/lake/log/probe/", lake.bucket), "status": 200, "count": 2
    }));
    let e = lake.log().adopt(b"stamp").unwrap_err();
    let endpoint = format!("http://{}/{}", S3Server::shared().endpoint, lake.bucket);
    assert!(
        e.message.contains(&format!("{endpoint} does not honour If-None-Match: skade cannot commit through it safely")),
        "{}",
        e.message
    );
    assert!(!lake.exists(0), "adopted through a store that cannot arbitrate");
    // an honest store passes: its second probe PUT is refused, and the probe is removed
    let before = lake.served().len();
    lake.adopted();
    let probes: Vec<_> = lake.served_since(before).into_iter().filter(|(_, p, _)| p.contains("/probe/")).collect();
    assert_eq!(probes.iter().map(|(m, _, s)| (m.as_str(), *s)).collect::<Vec<_>>(), [("PUT", 200), ("PUT", 412)]);
    assert!(object::wait(object::list(&format!("{}/probe", lake.location), None)).unwrap().is_empty());
}

#[test]
fn a_won_offer_on_a_known_head_is_one_put_and_a_tail_of_k_is_k_plus_1_gets() {
    let lake = Lake::new("requests");
    let log = lake.adopted();
    assert_eq!(log.offer(1, b"one").unwrap(), Offered::Won(1));
    let before = lake.served().len();
    assert_eq!(log.offer(2, b"two").unwrap(), Offered::Won(2));
    assert_eq!(lake.served_since(before), [request("PUT", &lake.path(2), 200)]);
    // another committer learns the head by reading, then wins the next position with one PUT
    let other = lake.log();
    other.start().unwrap();
    let before = lake.served().len();
    assert_eq!(seqs(&other.tail(1, 9).unwrap()), [1, 2]);
    let gets: Vec<_> = (1..=3).map(|s| request("GET", &lake.path(s), if s < 3 { 200 } else { 404 })).collect();
    assert_eq!(lake.served_since(before), gets);
    let before = lake.served().len();
    assert_eq!(other.offer(3, b"three").unwrap(), Offered::Won(3));
    assert_eq!(lake.served_since(before), [request("PUT", &lake.path(3), 200)]);
    // polls at the head a host just read up to are one GET each (whether the log is still
    // there and where it starts is asked once per HEAD_TRUST, not at every poll)
    let third = lake.log();
    third.start().unwrap();
    assert_eq!(seqs(&third.tail(1, 9).unwrap()), [1, 2, 3]);
    let before = lake.served().len();
    for _ in 0..3 {
        assert!(third.tail(4, 9).unwrap().is_empty());
    }
    let polls = lake.served_since(before);
    assert_eq!(polls.iter().filter(|r| **r == request("GET", &lake.path(4), 404)).count(), 3, "{polls:?}");
    assert_eq!(polls.len(), 3, "{polls:?}");
    // a position that appears is read at the next poll
    assert_eq!(log.offer(4, b"four").unwrap(), Offered::Won(4));
    assert_eq!(seqs(&third.tail(4, 9).unwrap()), [4]);
}
