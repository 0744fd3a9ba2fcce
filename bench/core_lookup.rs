//! Point lookups through the core alone (no DuckDB): the peer workload's table (32 clustered
//! appends of 31,250 rows, 8 deleted ranges of 1,000 ids), 200 probes of random ids (about 10%
//! absent), one `Transaction::lookup` per probe. Prints warm probes/s, p50/p99, and bytes, reads,
//! opens and rows decoded per probe; checks every probe's row. Exits 1 when a ceiling breaks.
//!
//! cargo run --release --example core_lookup [warm_passes]

use std::collections::HashSet;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{ArrayRef, AsArray, Float64Array, Int64Array, RecordBatch, StringArray, StructArray};
use arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema};
use skade::catalog::options::AttachOptions;
use skade::catalog::transaction::OnConflict;
use skade::lookup::stats;
use skade::{Catalog, Transaction};

const ROWS: i64 = 31_250;
const APPENDS: i64 = 32;
const PROBES: usize = 200;

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("customer", DataType::Utf8, true),
        Field::new("amount", DataType::Float64, true),
    ]))
}

fn rows(lo: i64, hi: i64) -> StructArray {
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(lo..hi));
    let customer: ArrayRef = Arc::new(StringArray::from_iter_values((lo..hi).map(|i| format!("c{}", i % 997))));
    let amount: ArrayRef = Arc::new(Float64Array::from_iter_values((lo..hi).map(|i| (i % 1000) as f64 * 1.5)));
    StructArray::from(RecordBatch::try_new(schema(), vec![id, customer, amount]).unwrap())
}

fn delete_range(txn: &Transaction, uuid: &str, lo: i64, hi: i64) {
    let plan = txn.scan(&txn.table_by_uuid(uuid).unwrap(), vec![0], None, true).unwrap();
    let mut doomed = vec![];
    for t in 0..plan.task_count() {
        for b in plan.open(t).unwrap() {
            let b = b.unwrap();
            let ids = b.column(0).as_primitive::<Int64Type>();
            let row_ids = b.column(1).as_primitive::<Int64Type>();
            doomed.extend((0..b.num_rows()).filter(|&i| (lo..hi).contains(&ids.value(i))).map(|i| row_ids.value(i)));
        }
    }
    txn.delete_rows(uuid, &doomed).unwrap();
}

/// A small deterministic generator (the workload's random ids).
struct Lcg(u64);
impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

fn counters() -> [u64; 4] {
    [
        stats::BYTES_READ.load(Relaxed),
        stats::READS.load(Relaxed),
        stats::FILE_OPENS.load(Relaxed),
        stats::ROWS_DECODED.load(Relaxed),
    ]
}

fn main() {
    let dir = std::env::temp_dir().join(format!("skade-core-lookup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let catalog = Catalog::open(&dir.join("lake.skade"), AttachOptions::default()).unwrap();
    let txn = catalog.begin();
    let types = ["BIGINT", "VARCHAR", "DOUBLE"].map(String::from);
    let key = vec!["id".to_string()];
    let uuid = txn
        .create_table("main", "orders", &schema(), &types, &key, &key, &[], &[], OnConflict::Error)
        .unwrap()
        .unwrap();
    let uuid = uuid.record.uuid.clone();
    txn.commit().unwrap();
    for i in 0..APPENDS {
        let txn = catalog.begin();
        let mut w = txn.writer(&uuid).unwrap();
        w.write(&rows(i * ROWS, (i + 1) * ROWS)).unwrap();
        txn.stage_files(&uuid, w.finish().unwrap()).unwrap();
        txn.end_statement(&uuid).unwrap();
        txn.commit().unwrap();
    }
    let mut rng = Lcg(7);
    let mut deleted = HashSet::new();
    for _ in 0..8 {
        let lo = rng.below((APPENDS * ROWS - 1000) as u64) as i64;
        let txn = catalog.begin();
        delete_range(&txn, &uuid, lo, lo + 1000);
        txn.commit().unwrap();
        deleted.extend(lo..lo + 1000);
    }
    let keys: Vec<i64> = (0..PROBES).map(|_| rng.below((APPENDS * ROWS * 11 / 10) as u64) as i64).collect();
    let present = |k: i64| k < APPENDS * ROWS && !deleted.contains(&k);

    let txn = catalog.begin();
    let probe = |k: i64| {
        let key: ArrayRef = Arc::new(Int64Array::from(vec![k]));
        let keys = StructArray::from(vec![(Arc::new(Field::new("id", DataType::Int64, false)), key)]);
        txn.lookup(&uuid, None, &keys).unwrap().batch
    };
    let check = |k: i64, b: &RecordBatch| {
        if !present(k) {
            assert_eq!(b.num_rows(), 0, "key {k} is absent");
            return;
        }
        assert_eq!(b.num_rows(), 1, "key {k}");
        assert_eq!(b.column(0).as_primitive::<Int64Type>().value(0), k);
        assert_eq!(b.column(1).as_string::<i32>().value(0), format!("c{}", k % 997));
        assert_eq!(b.column(2).as_primitive::<Float64Type>().value(0), (k % 1000) as f64 * 1.5);
    };
    println!(
        "{} rows, {PROBES} probes, {} absent",
        APPENDS * ROWS - deleted.len() as i64,
        keys.iter().filter(|k| !present(**k)).count()
    );
    let mut failed = false;
    // More warm passes (an argument) make the probe loop dominate a profile.
    let warm: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let passes = std::iter::once("first pass").chain(std::iter::repeat_n("warm pass", warm));
    for pass in passes {
        let before = counters();
        let mut times = vec![];
        let start = Instant::now();
        for &k in &keys {
            let t = Instant::now();
            let b = probe(k);
            times.push(t.elapsed().as_secs_f64());
            check(k, &b);
        }
        let total = start.elapsed().as_secs_f64();
        let after = counters();
        let per = |i: usize| (after[i] - before[i]) as f64 / PROBES as f64;
        times.sort_by(f64::total_cmp);
        println!(
            "{pass:<11} {:>8.0} probes/s   p50 {:6.1} us   p99 {:6.1} us   {:>7.0} bytes, {:.2} reads, {:.3} opens, {:.0} rows decoded per probe",
            PROBES as f64 / total,
            times[PROBES / 2] * 1e6,
            times[PROBES * 99 / 100 - 1] * 1e6,
            per(0),
            per(1),
            per(2),
            per(3)
        );
        if pass == "warm pass" {
            println!("goals: >= 47,000 warm probes/s, <= 24 KB and <= 2 reads per probe");
            // RED-when-broken ceilings: a lost pruning step or cache multiplies these.
            if per(0) > 48.0 * 1024.0 || per(1) > 4.0 || per(2) > 0.25 || per(3) > 4096.0 {
                eprintln!("ceiling broken: pruning or a cache no longer works");
                failed = true;
            }
        }
    }
    let all: ArrayRef = Arc::new(Int64Array::from(keys.clone()));
    let batch_keys = StructArray::from(vec![(Arc::new(Field::new("id", DataType::Int64, false)), all)]);
    let mut best = f64::INFINITY;
    let mut found = None;
    for _ in 0..5 {
        let t = Instant::now();
        found = Some(txn.lookup(&uuid, None, &batch_keys).unwrap().batch);
        best = best.min(t.elapsed().as_secs_f64());
    }
    let found = found.unwrap();
    let distinct: HashSet<i64> = keys.iter().copied().filter(|&k| present(k)).collect();
    assert_eq!(found.num_rows(), distinct.len());
    println!("batched: {PROBES} keys in one call {:.2} ms (best of 5)", best * 1e3);
    // A key beyond every file's bounds: the fixed cost of a lookup, no read at all.
    let t = Instant::now();
    for i in 0..20_000 {
        assert_eq!(probe(APPENDS * ROWS * 2 + i).num_rows(), 0);
    }
    println!("absent key, pruned by file bounds: {:.1} us per probe", t.elapsed().as_secs_f64() / 20_000.0 * 1e6);
    let _ = std::fs::remove_dir_all(&dir);
    if failed {
        std::process::exit(1);
    }
}
