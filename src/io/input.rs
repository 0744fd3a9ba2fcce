//! Files read by their warehouse location: whole, by byte ranges (positional reads), as Parquet's
//! reader wants them, or a folder listed: local files by positional reads, `s3://` objects by
//! ranged GETs (`object`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::AsRawFd;
use std::sync::{Mutex, OnceLock};
use std::time::SystemTime;

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::reader::{ChunkReader, Length};

use super::{local_path, object};
use crate::error::{io_message, Error, Result};

/// The lengths of objects read so far: a HEAD per object, not per scan. Objects skade names
/// are never rewritten under their name (uuid names, metadata created if absent), so a length
/// once known stays true (`range_cache::kept_by_name`; others are asked each time).
static OBJECT_SIZES: Mutex<Option<HashMap<String, u64>>> = Mutex::new(None);
const MAX_OBJECT_SIZES: usize = 200_000;

fn known_size(location: &str) -> Option<u64> {
    OBJECT_SIZES.lock().unwrap_or_else(|p| p.into_inner()).as_ref()?.get(location).copied()
}

fn note_size(location: &str, len: u64) {
    if !super::range_cache::kept_by_name(location) {
        return; // (a file the user named may be written again)
    }
    let mut sizes = OBJECT_SIZES.lock().unwrap_or_else(|p| p.into_inner());
    let sizes = sizes.get_or_insert_with(HashMap::new);
    if sizes.len() >= MAX_OBJECT_SIZES {
        sizes.clear();
    }
    sizes.insert(location.to_string(), len);
}

/// A file open for reading. `what` names its kind in errors ("data file", "delete file").
pub struct InputFile {
    /// None for an object: opening one costs no request, its first read is the first.
    file: Option<File>,
    location: String,
    what: &'static str,
    len: OnceLock<u64>,
}

impl InputFile {
    pub fn open(location: &str, what: &'static str) -> Result<InputFile> {
        if object::is_object(location) {
            object::split(location)?;
            let len = OnceLock::new();
            if let Some(known) = known_size(location) {
                let _ = len.set(known);
            }
            return Ok(InputFile { file: None, location: location.to_string(), what, len });
        }
        let file = File::open(local_path(location))
            .map_err(|e| Error::io(format!("{what} {location} cannot be opened: {}", io_message(&e))))?;
        Ok(InputFile { file: Some(file), location: location.to_string(), what, len: OnceLock::new() })
    }

    /// Opens a file whose length is known (a manifest records it): an object then needs no HEAD.
    pub fn open_sized(location: &str, what: &'static str, len: u64) -> Result<InputFile> {
        let f = InputFile::open(location, what)?;
        let _ = f.len.set(len);
        Ok(f)
    }

    pub fn location(&self) -> &str {
        &self.location
    }

    /// The file's length (asked of the file system once).
    pub fn size(&self) -> Result<u64> {
        if let Some(len) = self.len.get() {
            return Ok(*len);
        }
        let Some(file) = &self.file else {
            let found = object::wait(object::head(&self.location))
                .map_err(|e| Error::new(e.kind, format!("{} {}", self.what, e.message)))?;
            let (len, _) = found.ok_or_else(|| {
                Error::io(format!("{} {} cannot be opened: it does not exist", self.what, self.location))
            })?;
            note_size(&self.location, len);
            return Ok(*self.len.get_or_init(|| len));
        };
        let len = file
            .metadata()
            .map_err(|e| Error::io(format!("{} {} cannot be read: {}", self.what, self.location, io_message(&e))))?
            .len();
        Ok(*self.len.get_or_init(|| len))
    }

    /// Whether the file is an object (each read a request: worth merging and overlapping).
    pub fn is_object(&self) -> bool {
        self.file.is_none()
    }

    /// The byte ranges (start, length), in order: an object's concurrently (one round trip),
    /// a local file's one after another.
    pub fn read_ranges(&self, ranges: &[(u64, u64)]) -> Result<Vec<Bytes>> {
        if self.file.is_some() || ranges.len() < 2 {
            return ranges.iter().map(|&(start, len)| self.read_range(start, len as usize)).collect();
        }
        let reads = ranges.iter().map(|&(start, len)| object::get_range(&self.location, start..start + len));
        object::wait(futures::future::try_join_all(reads))
            .map_err(|e| Error::new(e.kind, format!("{} {}", self.what, e.message)))
    }

    /// `len` bytes at `offset`, with positional reads into a buffer that is not zeroed first
    /// (zeroing it cost a point lookup as much as the read: std's `read_exact_at` needs an
    /// initialized slice, so this calls pread itself).
    pub fn read_range(&self, offset: u64, len: usize) -> Result<Bytes> {
        let fail = |e: std::io::Error| {
            Error::io(format!(
                "cannot read {len} bytes at offset {offset} of {} {}: {}",
                self.what,
                self.location,
                io_message(&e)
            ))
        };
        let Some(file) = &self.file else {
            return object::wait(object::get_range(&self.location, offset..offset + len as u64))
                .map_err(|e| Error::new(e.kind, format!("{} {}", self.what, e.message)));
        };
        let mut buf: Vec<u8> = Vec::with_capacity(len);
        while buf.len() < len {
            let done = buf.len();
            let at = libc::off_t::try_from(offset + done as u64)
                .map_err(|_| fail(std::io::ErrorKind::InvalidInput.into()))?;
            // SAFETY: the kernel writes at most `len - done` bytes into the vector's spare
            // capacity, and `set_len` covers only the bytes it reports written.
            let n = unsafe { libc::pread(file.as_raw_fd(), buf.as_mut_ptr().add(done).cast(), len - done, at) };
            match n {
                n if n > 0 => unsafe { buf.set_len(done + n as usize) },
                0 => return Err(fail(std::io::ErrorKind::UnexpectedEof.into())),
                _ => {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(fail(e));
                    }
                }
            }
        }
        Ok(Bytes::from(buf))
    }
}

impl Length for InputFile {
    fn len(&self) -> u64 {
        self.size().unwrap_or(0)
    }
}

impl ChunkReader for InputFile {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        let Some(file) = &self.file else {
            // Parquet asks for a reader only for whole pages it then reads to their end.
            let end = self.size().map_err(|e| ParquetError::External(Box::new(e)))?;
            let bytes = self.read_range(start, (end - start.min(end)) as usize);
            return Ok(Box::new(std::io::Cursor::new(bytes.map_err(|e| ParquetError::External(Box::new(e)))?)));
        };
        let mut file = file.try_clone()?;
        file.seek(SeekFrom::Start(start))?;
        Ok(Box::new(std::io::BufReader::new(file)))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.read_range(start, length).map_err(|e| ParquetError::External(Box::new(e)))
    }
}

/// The whole file at `location`.
pub fn read_whole(location: &str, what: &str) -> Result<Vec<u8>> {
    if object::is_object(location) {
        return match object::wait(object::get(location))? {
            Some(bytes) => Ok(bytes.to_vec()),
            None => Err(Error::io(format!("cannot read {what} {location}: it does not exist"))),
        };
    }
    std::fs::read(local_path(location))
        .map_err(|e| Error::io(format!("cannot read {what} {location}: {}", io_message(&e))))
}

/// The first `n` bytes of the file at `location` (fewer if it is shorter).
pub fn read_head(location: &str, n: u64) -> Result<Vec<u8>> {
    if object::is_object(location) {
        let f = InputFile::open(location, "file")?;
        let len = f.size()?.min(n);
        return Ok(f.read_range(0, len as usize)?.to_vec());
    }
    let mut head = Vec::with_capacity(n as usize);
    File::open(local_path(location))
        .and_then(|f| f.take(n).read_to_end(&mut head))
        .map_err(|e| Error::io(format!("cannot read {location}: {}", io_message(&e))))?;
    Ok(head)
}

/// A file found in a folder: its location and when it was last written.
pub struct Listed {
    pub location: String,
    pub modified: Option<SystemTime>,
}

/// The files of the folder at `location` (none when it does not exist).
pub fn list(location: &str) -> Result<Vec<Listed>> {
    if object::is_object(location) {
        let found = object::wait(object::list_folder(location))?;
        return Ok(found
            .into_iter()
            .map(|o| Listed {
                // A sub-folder has no time of its own.
                modified: (!o.location.ends_with('/')).then_some(o.modified),
                location: o.location.trim_end_matches('/').to_string(),
            })
            .collect());
    }
    let entries = match std::fs::read_dir(local_path(location)) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(Error::io(format!("cannot list {location}: {}", io_message(&e)))),
    };
    let mut out = vec![];
    for entry in entries.flatten() {
        let modified = entry.metadata().ok().and_then(|m| m.modified().ok());
        out.push(Listed { location: format!("{location}/{}", entry.file_name().to_string_lossy()), modified });
    }
    Ok(out)
}

/// Every file under the folder at `location`, in sub-folders too (none when it does not exist).
pub fn list_all(location: &str) -> Result<Vec<Listed>> {
    if object::is_object(location) {
        let found = object::wait(object::list(location, None))?;
        return Ok(found.into_iter().map(|o| Listed { location: o.location, modified: Some(o.modified) }).collect());
    }
    let mut out = vec![];
    let mut folders = vec![location.trim_end_matches('/').to_string()];
    while let Some(folder) = folders.pop() {
        for entry in list(&folder)? {
            let path = local_path(&entry.location);
            match std::fs::symlink_metadata(path) {
                Ok(m) if m.is_dir() => folders.push(entry.location),
                Ok(m) if m.is_file() => out.push(entry),
                // (a link to a file is listed; links to folders are not followed: no loops)
                Ok(m) if m.file_type().is_symlink() && std::fs::metadata(path).is_ok_and(|t| t.is_file()) => {
                    out.push(entry)
                }
                _ => {} // (gone meanwhile, or neither)
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_file_is_named_without_rusts_os_code() {
        let location = format!("/nonexistent-{}/f.parquet", uuid::Uuid::new_v4());
        let e = super::InputFile::open(&location, "data file").err().unwrap().message;
        assert_eq!(e, format!("data file {location} cannot be opened: No such file or directory"));
        let e = super::read_whole(&location, "metadata file").unwrap_err().message;
        assert_eq!(e, format!("cannot read metadata file {location}: No such file or directory"));
    }
}
