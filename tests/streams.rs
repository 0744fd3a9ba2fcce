//! Change streams: the push stream's windows (catch-up, one per commit, lag recovery, resume
//! from a cursor), its polling variant, the wait for a commit, and consumers' cursors staged in
//! transactions (exactly-once against concurrent readers).

mod common;

use std::time::{Duration, Instant};

use common::*;
use skade::catalog::consumers::Start;
use skade::runtime_block_on as block_on;
use skade::stream::wait::{wait_for_commit, WaitFor};
use skade::stream::{ChangeStream, ChangeWindow};

/// (id, _change_type) of a window's rows.
fn window_rows(w: &ChangeWindow) -> Vec<(i64, String)> {
    let mut out = vec![];
    for b in &w.batches {
        let change = arrow::compute::cast(b.column_by_name("_change_type").unwrap(), &DataType::Utf8).unwrap();
        for i in 0..b.num_rows() {
            out.push((
                b.column(0).as_primitive::<Int64Type>().value(i),
                change.as_string::<i32>().value(i).to_string(),
            ));
        }
    }
    out
}

fn ids_inserted(w: &ChangeWindow) -> Vec<i64> {
    window_rows(w).into_iter().filter(|(_, c)| c == "INSERT").map(|(i, _)| i).collect()
}

#[test]
fn a_stream_catches_up_then_yields_one_window_per_commit_and_resumes_after_its_cursor() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    commit_append(&catalog, &uuid, 0..3);
    let first = current_snapshot(&catalog, &uuid);
    commit_append(&catalog, &uuid, 3..5);
    // from the first snapshot's commit: one catch-up window with what came after it
    let from = skade::stream::ConsumerCursor {
        table_uuid: uuid.clone(),
        snapshot_id: Some(first),
        commit_seq: catalog.commit_seq_of(&uuid, first).unwrap().unwrap(),
    };
    let mut stream = ChangeStream::changes(&catalog, "main", "t", Some(from)).unwrap();
    let w = block_on(stream.next()).unwrap();
    assert_eq!(ids_inserted(&w), vec![3, 4]);
    assert_eq!(w.from, Some(first));
    // then one window per commit, as the broadcast announces them
    commit_append(&catalog, &uuid, 5..6);
    commit_append(&catalog, &uuid, 6..8);
    let a = block_on(stream.next()).unwrap();
    let b = block_on(stream.next()).unwrap();
    assert_eq!((ids_inserted(&a), ids_inserted(&b)), (vec![5], vec![6, 7]));
    assert_eq!(b.from, a.to.snapshot_id);
    // resuming from a window's end delivers only what came after it
    let cursor = a.to.clone();
    let mut resumed = ChangeStream::changes(&catalog, "main", "t", Some(cursor)).unwrap();
    assert_eq!(ids_inserted(&block_on(resumed.next()).unwrap()), vec![6, 7]);
    // a stream from now on sees only later commits, and deletes as DELETE rows
    let mut live = ChangeStream::changes(&catalog, "main", "t", None).unwrap();
    let txn = catalog.begin();
    delete_where(&txn, &uuid, |id| id == 0);
    txn.commit().unwrap();
    assert_eq!(window_rows(&block_on(live.next()).unwrap()), vec![(0, "DELETE".to_string())]);
}

#[test]
fn other_tables_and_ddl_move_no_rows_and_a_drop_ends_the_stream() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    let mut stream = ChangeStream::changes(&catalog, "main", "t", None).unwrap();
    let txn = catalog.begin();
    let other = create(&txn, "u");
    txn.commit().unwrap();
    commit_append(&catalog, &other, 0..10);
    commit_append(&catalog, &uuid, 100..101);
    assert_eq!(ids_inserted(&block_on(stream.next()).unwrap()), vec![100]);
    let txn = catalog.begin();
    txn.drop_table("main", "t", false).unwrap();
    txn.commit().unwrap();
    let e = block_on(stream.next()).unwrap_err();
    assert!(e.message.contains("was dropped at commit_seq"), "{}", e.message);
}

#[test]
fn a_lagging_receiver_recovers_with_one_window_from_the_log() {
    let dir = TestDir::new();
    let options = AttachOptions { durability: skade::catalog::options::Durability::None, ..Default::default() };
    let catalog = Catalog::open(&dir.path().join("lake.skade"), options).unwrap();
    let txn = catalog.begin();
    let uuid = create(&txn, "t");
    txn.commit().unwrap();
    let mut stream = ChangeStream::changes(&catalog, "main", "t", None).unwrap();
    commit_append(&catalog, &uuid, 0..1);
    catalog.flush().unwrap();
    assert_eq!(ids_inserted(&block_on(stream.next()).unwrap()), vec![0]);
    // more commits than the broadcast buffers: the receiver lags
    let n = skade::catalog::COMMIT_EVENT_BUFFER as i64 + 10;
    for i in 1..n {
        commit_append(&catalog, &uuid, i..i + 1);
    }
    catalog.flush().unwrap();
    let w = block_on(stream.next()).unwrap();
    assert_eq!(ids_inserted(&w), (1..n).collect::<Vec<_>>(), "one window up to the last commit");
    assert_eq!(w.to.snapshot_id, Some(current_snapshot(&catalog, &uuid)));
}

#[test]
fn the_polling_stream_reads_the_log_on_a_timer() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    let mut stream = ChangeStream::polling(&catalog, "main", "t", None, Duration::from_millis(5)).unwrap();
    commit_append(&catalog, &uuid, 0..2);
    commit_append(&catalog, &uuid, 2..3);
    let mut got = vec![];
    while got.len() < 3 {
        got.extend(ids_inserted(&block_on(stream.next()).unwrap()));
    }
    assert_eq!(got, vec![0, 1, 2]);
}

#[test]
fn a_wait_returns_at_once_when_a_commit_is_there_and_when_one_lands() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    let head = catalog.head_seq();
    let never = || false;
    // nothing after the head: the timeout
    let wait = WaitFor { after: head, tables: None, timeout: Duration::from_millis(30), consumer: None };
    let start = Instant::now();
    assert!(wait_for_commit(&catalog, &wait, &never).unwrap().is_empty());
    assert!(start.elapsed() >= Duration::from_millis(30));
    // a commit already there
    commit_append(&catalog, &uuid, 0..1);
    let wait = WaitFor { after: head, tables: None, timeout: Duration::from_secs(30), consumer: None };
    assert_eq!(wait_for_commit(&catalog, &wait, &never).unwrap().len(), 1);
    // one landing from another thread wakes it
    let after = catalog.head_seq();
    let producer = {
        let (catalog, uuid) = (catalog.clone(), uuid.clone());
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            commit_append(&catalog, &uuid, 1..2);
        })
    };
    let wait = WaitFor { after, tables: None, timeout: Duration::from_secs(30), consumer: None };
    let found = wait_for_commit(&catalog, &wait, &never).unwrap();
    assert_eq!(found.iter().map(|c| c.seq).collect::<Vec<_>>(), vec![after + 1]);
    producer.join().unwrap();
    // an interruption ends it
    let wait = WaitFor { after: catalog.head_seq(), tables: None, timeout: Duration::from_secs(30), consumer: None };
    let e = wait_for_commit(&catalog, &wait, &|| true).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Interrupted);
}

#[test]
fn a_consumer_cursor_commits_once_against_concurrent_readers() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    commit_append(&catalog, &uuid, 0..2);
    let txn = catalog.begin();
    txn.create_consumer("c", &[("main".into(), "t".into())], Start::Beginning).unwrap();
    txn.commit().unwrap();
    // two transactions read the same cursor and both try to advance it: the second conflicts
    let (a, b) = (catalog.begin(), catalog.begin());
    let (ca, cb) = (a.consumer("c").unwrap(), b.consumer("c").unwrap());
    assert_eq!(ca.cursor, 0);
    a.stage_consumed(&ca, 2, 1).unwrap();
    b.stage_consumed(&cb, 2, 1).unwrap();
    a.commit().unwrap();
    let e = b.commit().unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict);
    assert!(e.message.contains("consumer \"c\""), "{}", e.message);
    assert_eq!(catalog.begin().consumer("c").unwrap().cursor, 2);
    // acknowledgements only move it forward, whatever their order
    let (a, b) = (catalog.begin(), catalog.begin());
    commit_append(&catalog, &uuid, 2..3);
    commit_append(&catalog, &uuid, 3..4);
    a.acknowledge("c", 4).unwrap();
    b.acknowledge("c", 3).unwrap();
    a.commit().unwrap();
    b.commit().unwrap();
    assert_eq!(catalog.begin().consumer("c").unwrap().cursor, 4);
    // and the cursor survives a reopen
    drop(catalog);
    let catalog = open(&dir.path().join("lake.skade"));
    assert_eq!(catalog.begin().consumer("c").unwrap().cursor, 4);
}
