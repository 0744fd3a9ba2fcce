//! Iceberg v3 deletion vectors (`deletion-vector-v1` Puffin blobs, apache/iceberg
//! `format/puffin-spec.md`): the deleted positions of one data file. Written here, as the
//! iceberg crate keeps its own type private and reads none (docs/design/iceberg-v3.md).
//!
//! A blob is: the length of what follows up to the checksum (u32, big-endian), the magic
//! `D1 D3 39 64`, the positions as a portable 64-bit Roaring bitmap (the count of 32-bit
//! bitmaps as a little-endian u64, then each one's high 32 bits as a little-endian u32 and its
//! portable 32-bit serialization, in ascending order: `RoaringTreemap`'s own layout), and a
//! CRC-32 of the magic and the bitmap (u32, big-endian).

use roaring::RoaringTreemap;

use crate::error::{Error, Result};

const MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];

/// The deleted positions a blob holds, ascending: exactly `count` of them (its manifest entry's
/// `record_count`, checked before they are listed: a few bytes of runs can name billions).
/// `what` names it in errors (its file and offset).
pub fn decode(blob: &[u8], what: &str, count: u64) -> Result<Vec<u64>> {
    let damaged = |why: &str| Error::corrupt(format!("deletion vector {what} is damaged: {why}"));
    if blob.len() < 12 {
        return Err(damaged(&format!("{} bytes is shorter than any deletion vector", blob.len())));
    }
    let length = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
    if length != blob.len() - 8 {
        return Err(damaged(&format!("it says it holds {length} bytes, its blob holds {}", blob.len() - 8)));
    }
    if blob[4..8] != MAGIC {
        return Err(damaged("its magic bytes are not D1 D3 39 64"));
    }
    let body = &blob[4..blob.len() - 4];
    let stored = u32::from_be_bytes(blob[blob.len() - 4..].try_into().unwrap_or_default());
    if crc32fast::hash(body) != stored {
        return Err(damaged("its checksum does not match its contents"));
    }
    let mut bitmap_bytes = std::io::Cursor::new(&body[4..]);
    let bitmap =
        RoaringTreemap::deserialize_from(&mut bitmap_bytes).map_err(|e| damaged(&format!("its bitmap: {e}")))?;
    if bitmap_bytes.position() != body.len() as u64 - 4 {
        return Err(damaged("bytes follow its bitmap"));
    }
    if bitmap.len() != count {
        return Err(damaged(&format!("it holds {} positions, its manifest entry says {count}", bitmap.len())));
    }
    Ok(bitmap.iter().collect())
}

/// The blob holding `positions` (any order, repeats allowed).
pub fn encode(positions: impl IntoIterator<Item = u64>) -> Result<Vec<u8>> {
    let bitmap: RoaringTreemap = positions.into_iter().collect();
    let mut body = MAGIC.to_vec();
    bitmap.serialize_into(&mut body).map_err(|e| Error::internal(format!("cannot write a deletion vector: {e}")))?;
    let length = u32::try_from(body.len())
        .map_err(|_| Error::invalid(format!("a deletion vector of {} bytes is too large", body.len())))?;
    let mut blob = length.to_be_bytes().to_vec();
    blob.extend_from_slice(&body);
    blob.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
    Ok(blob)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_across_32_bit_keys() {
        let positions = vec![0, 1, 7, 65_535, 65_536, 1 << 31, (1 << 32) + 5, (3 << 32) + 1];
        let blob = encode(positions.iter().rev().copied().chain([7])).unwrap();
        assert_eq!(decode(&blob, "t", 8).unwrap(), positions);
        assert_eq!(decode(&encode([]).unwrap(), "t", 0).unwrap(), Vec::<u64>::new());
        // (a count other than the entry's is refused before any position is listed)
        assert!(decode(&encode(0..1_000_000).unwrap(), "t", 3).unwrap_err().message.contains("entry says 3"));
    }

    /// The spec's layout, byte by byte, for positions {1, 3}: one 32-bit bitmap (key 0) holding
    /// an array container of two values.
    #[test]
    fn the_blob_is_the_specs_layout() {
        let blob = encode([3, 1]).unwrap();
        let body_len = (blob.len() - 8) as u32;
        assert_eq!(&blob[0..4], &body_len.to_be_bytes());
        assert_eq!(&blob[4..8], &MAGIC);
        assert_eq!(&blob[8..16], &1u64.to_le_bytes()); // one bitmap
        assert_eq!(&blob[16..20], &0u32.to_le_bytes()); // its key: the high 32 bits
        let crc = crc32fast::hash(&blob[4..blob.len() - 4]);
        assert_eq!(&blob[blob.len() - 4..], &crc.to_be_bytes());
    }

    #[test]
    fn damage_is_named() {
        let blob = encode([1, 2, 3]).unwrap();
        let mut flipped = blob.clone();
        let i = flipped.len() - 6;
        flipped[i] ^= 1;
        assert!(decode(&flipped, "f.puffin@4", 3).unwrap_err().message.contains("checksum"));
        let mut magic = blob.clone();
        magic[4] = 0;
        assert!(decode(&magic, "f", 3).unwrap_err().message.contains("magic"));
        assert!(decode(&blob[..blob.len() - 1], "f", 3).unwrap_err().message.contains("says it holds"));
        assert!(decode(&[0; 5], "f", 3).unwrap_err().message.contains("shorter"));
    }
}
