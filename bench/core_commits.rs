//! One-row commits per second through the core alone (no DuckDB): 1, 2, 4 and 8 threads, each
//! appending to its own table, under each durability mode. Shows what group commit buys when
//! the per-commit work is only skade's.
//!
//! cargo run --release --example core_commits [seconds_per_point]

use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StructArray};
use arrow::datatypes::{DataType, Field, Schema};
use skade::catalog::options::{AttachOptions, Durability};
use skade::catalog::transaction::OnConflict;
use skade::Catalog;

/// Runs per point; the median is printed.
const REPEAT: usize = 3;

fn main() {
    let seconds: f64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1.5);
    let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, true)]));
    println!("one-row commits/s through the core, a table per writer (median of {REPEAT} runs)");
    println!("{:<12}{:>10}{:>10}{:>10}{:>10}   8w/1w", "", "1 w", "2 w", "4 w", "8 w");
    for durability in [Durability::Immediate, Durability::Eventual, Durability::None] {
        let dir = std::env::temp_dir().join(format!("skade-core-commits-{}-{durability:?}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let options = AttachOptions { durability, ..Default::default() };
        let catalog = Catalog::open(&dir.join("lake.skade"), options).unwrap();
        let mut rates = vec![];
        for writers in [1usize, 2, 4, 8] {
            let mut runs = vec![];
            for run in 0..REPEAT {
                // fresh tables for every run: a table's metadata grows with its snapshots
                let mut tables = vec![];
                for w in 0..writers {
                    let txn = catalog.begin();
                    let name = format!("t{writers}_{run}_{w}");
                    let t = txn
                        .create_table("main", &name, &schema, &["BIGINT".into()], &[], &[], &[], &[], OnConflict::Error)
                        .unwrap()
                        .unwrap();
                    txn.commit().unwrap();
                    tables.push(t.record.uuid.clone());
                }
                let stop = Instant::now() + Duration::from_secs_f64(seconds);
                let start = Instant::now();
                let total: usize = std::thread::scope(|s| {
                    let handles: Vec<_> = (0..writers)
                        .map(|w| {
                            let catalog = catalog.clone();
                            let uuid = tables[w].clone();
                            let schema = schema.clone();
                            s.spawn(move || {
                                let mut n = 0;
                                while Instant::now() < stop {
                                    let txn = catalog.begin();
                                    let mut writer = txn.writer(&uuid).unwrap();
                                    let id: ArrayRef = Arc::new(Int64Array::from(vec![n as i64]));
                                    let batch = RecordBatch::try_new(schema.clone(), vec![id]).unwrap();
                                    writer.write(&StructArray::from(batch)).unwrap();
                                    txn.stage_files(&uuid, writer.finish().unwrap()).unwrap();
                                    txn.end_statement(&uuid).unwrap();
                                    txn.commit().unwrap();
                                    n += 1;
                                }
                                n
                            })
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).sum()
                });
                runs.push(total as f64 / start.elapsed().as_secs_f64());
            }
            runs.sort_by(f64::total_cmp);
            rates.push(runs[REPEAT / 2]); // the median run
        }
        let name = format!("{durability:?}").to_lowercase();
        let cells: String = rates.iter().map(|r| format!("{r:>10.1}")).collect();
        println!("{name:<12}{cells}   x{:.2}", rates[3] / rates[0]);
        drop(catalog);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
