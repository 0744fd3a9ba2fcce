//! The folder commit log raced by several processes: each child is this test binary run again
//! (SKADE_LOG_CHILD set) committing batches through its own committer; every batch lands once,
//! at distinct, gapless positions, and a child killed mid-race leaves the log readable with
//! every win it was told of.

use std::process::{Command, Stdio};

use skade::commit_log::folder::FolderLogProvider;
use skade::commit_log::{CommitLogProvider, Offered};

const PER_CHILD: usize = 40;

/// A child's work: commit PER_CHILD batches, racing from its own view of the head, printing each
/// position it won once the win is durable.
fn child(folder: &str, id: &str, batches: usize) {
    let provider = FolderLogProvider;
    let committer = provider.committer(folder).unwrap();
    let reader = provider.reader(folder).unwrap();
    let mut head = reader.tail(1, usize::MAX).unwrap().last().map_or(0, |b| b.seq);
    let mut won = 0;
    while won < batches {
        match committer.offer(head + 1, format!("{id}:{won}").as_bytes()).unwrap() {
            Offered::Won(seq) => {
                println!("won {seq}");
                head = seq;
                won += 1;
            }
            Offered::Lost(batches) => head = batches.last().unwrap().seq,
        }
    }
}

fn spawn(folder: &str, id: &str, batches: usize) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "the_child_entry", "--nocapture", "--test-threads=1"])
        .env("SKADE_LOG_CHILD", format!("{folder}\n{id}\n{batches}"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wins(output: &[u8]) -> Vec<u64> {
    // (libtest's own "test the_child_entry ... " may share a line with the first)
    String::from_utf8_lossy(output).lines().filter_map(|l| l.split("won ").nth(1)?.trim().parse().ok()).collect()
}

#[test]
fn the_child_entry() {
    if let Ok(args) = std::env::var("SKADE_LOG_CHILD") {
        let parts: Vec<&str> = args.split('\n').collect();
        child(parts[0], parts[1], parts[2].parse().unwrap());
    }
}

/// A new, adopted log's folder.
fn scratch(name: &str) -> String {
    let dir = std::env::temp_dir().join(format!("skade-log-{name}-{}", uuid::Uuid::new_v4()));
    let folder = dir.to_str().unwrap().to_string();
    FolderLogProvider.committer(&folder).unwrap().adopt(b"stamp").unwrap();
    folder
}

#[test]
fn two_and_four_processes_each_land_every_batch_once_gaplessly() {
    for n in [2, 4] {
        let folder = scratch("race");
        let children: Vec<_> = (0..n).map(|i| spawn(&folder, &format!("p{i}"), PER_CHILD)).collect();
        let mut all = vec![];
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(out.status.success());
            all.extend(wins(&out.stdout));
        }
        all.sort_unstable();
        assert_eq!(all, (1..=(n * PER_CHILD) as u64).collect::<Vec<_>>(), "{n} processes");
        let batches = FolderLogProvider.reader(&folder).unwrap().tail(1, usize::MAX).unwrap();
        assert_eq!(batches.len(), n * PER_CHILD);
        let mut bodies: Vec<Vec<u8>> = batches.into_iter().map(|b| b.bytes).collect();
        bodies.sort();
        bodies.dedup();
        assert_eq!(bodies.len(), n * PER_CHILD, "a batch landed twice");
        let _ = std::fs::remove_dir_all(&folder);
    }
}

#[test]
fn a_process_killed_mid_race_loses_no_acknowledged_win() {
    let folder = scratch("kill");
    let mut victim = spawn(&folder, "victim", usize::MAX); // still racing when it is killed
    let survivor = spawn(&folder, "survivor", PER_CHILD);
    std::thread::sleep(std::time::Duration::from_millis(30));
    victim.kill().unwrap(); // SIGKILL
    let victim_out = victim.wait_with_output().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(victim_out.status.signal(), Some(9));
    assert!(!wins(&victim_out.stdout).is_empty(), "the victim won nothing before it was killed");
    let survivor_out = survivor.wait_with_output().unwrap();
    assert!(survivor_out.status.success());
    let batches = FolderLogProvider.reader(&folder).unwrap().tail(1, usize::MAX).unwrap();
    let positions: Vec<u64> = batches.iter().map(|b| b.seq).collect();
    assert_eq!(positions, (1..=positions.len() as u64).collect::<Vec<_>>(), "gapless");
    for seq in wins(&victim_out.stdout).into_iter().chain(wins(&survivor_out.stdout)) {
        assert!(positions.contains(&seq), "acknowledged win {seq} is missing");
    }
    assert_eq!(batches.iter().filter(|b| b.bytes.starts_with(b"survivor")).count(), PER_CHILD);
    let _ = std::fs::remove_dir_all(&folder);
}
