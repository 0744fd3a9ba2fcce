//! Decoded dictionaries of data files' column chunks, for probes: a probe returning a
//! dictionary-encoded column decodes its row's dictionary index alone and looks it up here, so a
//! chunk's dictionary page is read and decoded once, not once per probe (decoding a 16 KB string
//! dictionary cost more than the rest of a probe). Keyed by file path, row group and column:
//! data files are immutable, so an entry never goes stale. Bounded; when full it starts over.

use std::collections::HashMap;
use std::sync::Mutex;

use arrow::array::{Array, ArrayRef};

use crate::error::Result;

/// Bound on the decoded dictionaries held, in bytes.
const MAX_BYTES: usize = 64 << 20;

/// A file's decoded dictionaries, by (row group, column).
type OfFile = HashMap<(usize, usize), ArrayRef>;

#[derive(Default)]
pub struct Dictionaries {
    /// By file path; with the bytes all of them hold.
    held: Mutex<(HashMap<String, OfFile>, usize)>,
}

impl Dictionaries {
    /// The dictionary of column `leaf` in row group `g` of file `path`, decoded by `load` when not
    /// held (outside the lock: two probes may decode it at once, and one of them is kept).
    pub fn get(&self, path: &str, g: usize, leaf: usize, load: impl FnOnce() -> Result<ArrayRef>) -> Result<ArrayRef> {
        if let Some(d) = self.held.lock().unwrap().0.get(path).and_then(|f| f.get(&(g, leaf))) {
            return Ok(d.clone());
        }
        let dictionary = load()?;
        let bytes = dictionary.get_array_memory_size();
        let mut held = self.held.lock().unwrap();
        if held.1 + bytes > MAX_BYTES {
            *held = Default::default();
        }
        if held.0.entry(path.to_string()).or_default().insert((g, leaf), dictionary.clone()).is_none() {
            held.1 += bytes;
        }
        Ok(dictionary)
    }

    /// Forgets a file's dictionaries (the file is about to be removed).
    pub fn forget(&self, path: &str) {
        let mut held = self.held.lock().unwrap();
        if let Some(file) = held.0.remove(path) {
            let bytes: usize = file.values().map(|d| d.get_array_memory_size()).sum();
            held.1 = held.1.saturating_sub(bytes);
        }
    }
}
