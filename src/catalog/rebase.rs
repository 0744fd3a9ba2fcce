//! When a commit may rebase onto a table's newer head, and when it is a conflict (see
//! docs/design/commit.md). Appends always rebase, except appends of keys that may collide with
//! keys committed meanwhile (`read::keys::ranges_may_overlap`, judged file by file). Deletes and
//! updates, computed on the table as it was read, rebase only over snapshots that appended: a
//! concurrent delete, update or compaction may have removed the same rows, and its own deletes
//! could miss rows this transaction added or changed.

use iceberg::spec::Operation;

/// Whether deletes computed on the table at sequence number `at_read` may rebase onto a head at
/// `head_sequence`, whose snapshots after `at_read` made the operations `since`. Each snapshot
/// takes the next sequence number: one missing from `since` was expired meanwhile, and what it
/// did is unknown, so it counts as a delete.
pub fn deletes_rebase(at_read: i64, head_sequence: i64, since: &[Operation]) -> bool {
    let expired_meanwhile = since.len() as i64 != head_sequence - at_read;
    !expired_meanwhile && since.iter().all(|op| *op == Operation::Append)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletes_rebase_over_appends_only() {
        assert!(deletes_rebase(5, 5, &[]), "nothing committed meanwhile");
        assert!(deletes_rebase(5, 7, &[Operation::Append, Operation::Append]));
        for other in [Operation::Delete, Operation::Overwrite, Operation::Replace] {
            assert!(!deletes_rebase(5, 7, &[Operation::Append, other.clone()]), "{other:?} meanwhile");
        }
        assert!(!deletes_rebase(5, 7, &[Operation::Append]), "a snapshot expired meanwhile counts as a delete");
    }
}
