//! The envelope every log provider of this crate wraps a batch in (a folder's file, a bucket's
//! object): magic `SKLG`, format, the position, the batch's length and its xxh3-64 checksum. A
//! stored batch is read back only through [`open_envelope`], so a damaged, torn or misplaced one
//! (another position's, copied by hand) is an error, never a batch.

const MAGIC: &[u8; 4] = b"SKLG";
const FORMAT: u8 = 1;
/// magic, format, position, length, checksum
const HEADER: usize = 4 + 1 + 8 + 8 + 8;

/// The stored form of `bytes` at position `seq`.
pub fn envelope(seq: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + bytes.len());
    out.extend_from_slice(MAGIC);
    out.push(FORMAT);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(&twox_hash::XxHash3_64::oneshot(bytes).to_le_bytes());
    out.extend_from_slice(bytes);
    out
}

/// The batch in a stored envelope read at `seq`, or what is wrong with it (the caller names the
/// file or object).
pub fn open_envelope(stored: &[u8], seq: u64) -> std::result::Result<Vec<u8>, String> {
    if stored.len() < HEADER || &stored[..4] != MAGIC {
        return Err(format!("not a batch ({} bytes)", stored.len()));
    }
    if stored[4] != FORMAT {
        return Err(format!("batch format {} is newer than this skade reads ({FORMAT})", stored[4]));
    }
    let word = |at: usize| u64::from_le_bytes(stored[at..at + 8].try_into().unwrap_or_default());
    if word(5) != seq {
        return Err(format!("it holds position {} instead", word(5)));
    }
    let body = &stored[HEADER..];
    if word(13) != body.len() as u64 {
        return Err(format!("{} bytes of {} (torn)", body.len(), word(13)));
    }
    if word(21) != twox_hash::XxHash3_64::oneshot(body) {
        return Err("its checksum does not match".into());
    }
    Ok(body.to_vec())
}
