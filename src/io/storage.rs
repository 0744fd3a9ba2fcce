//! The file storage skade hands the iceberg crate: local files that are created exclusively
//! (an existing file is never replaced) and not fsynced on close: the commit path makes a whole
//! group's files durable at once (see `Catalog::commit`). iceberg's own local storage truncates
//! existing files and fsyncs each one. `s3://` locations are objects (`object`): written by
//! multipart uploads that appear only when complete, read by ranges.

use std::fs::{self, File};
use std::io::Write;
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::StreamExt;
use iceberg::io::{
    FileIO, FileIOBuilder, FileMetadata, FileRead, FileWrite, InputFile, OutputFile, Storage, StorageConfig,
    StorageFactory,
};
use serde::{Deserialize, Serialize};

use super::{local_path, object};

/// A FileIO over [`LocalStorage`].
pub fn file_io() -> FileIO {
    FileIOBuilder::new(Arc::new(LocalStorageFactory)).build()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LocalStorageFactory;

#[typetag::serde]
impl StorageFactory for LocalStorageFactory {
    fn build(&self, _config: &StorageConfig) -> iceberg::Result<Arc<dyn Storage>> {
        Ok(Arc::new(LocalStorage))
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LocalStorage;

fn object_err(e: crate::error::Error) -> iceberg::Error {
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, e.message)
}

fn err(what: &str, path: &Path, e: std::io::Error) -> iceberg::Error {
    let e = crate::error::io_message(&e);
    iceberg::Error::new(iceberg::ErrorKind::Unexpected, format!("cannot {what} {}: {e}", path.display()))
}

impl LocalStorage {
    fn create(&self, path: &str) -> iceberg::Result<File> {
        super::create_new(Path::new(local_path(path))).map_err(|e| err("create", Path::new(path), e))
    }
}

#[async_trait]
#[typetag::serde]
impl Storage for LocalStorage {
    async fn exists(&self, path: &str) -> iceberg::Result<bool> {
        if object::is_object(path) {
            return Ok(object::head(path).await.map_err(object_err)?.is_some());
        }
        Ok(Path::new(local_path(path)).exists())
    }

    async fn metadata(&self, path: &str) -> iceberg::Result<FileMetadata> {
        if object::is_object(path) {
            let found = object::head(path).await.map_err(object_err)?;
            let (size, _) =
                found.ok_or_else(|| object_err(crate::error::Error::io(format!("{path} does not exist"))))?;
            return Ok(FileMetadata { size });
        }
        let p = Path::new(local_path(path));
        let m = fs::metadata(p).map_err(|e| err("stat", p, e))?;
        Ok(FileMetadata { size: m.len() })
    }

    async fn read(&self, path: &str) -> iceberg::Result<Bytes> {
        if object::is_object(path) {
            let found = object::get(path).await.map_err(object_err)?;
            return found
                .ok_or_else(|| object_err(crate::error::Error::io(format!("cannot read {path}: it does not exist"))));
        }
        let p = Path::new(local_path(path));
        Ok(fs::read(p).map_err(|e| err("read", p, e))?.into())
    }

    async fn reader(&self, path: &str) -> iceberg::Result<Box<dyn FileRead>> {
        if object::is_object(path) {
            return Ok(Box::new(ObjectRead { location: path.to_string() }));
        }
        let p = Path::new(local_path(path));
        let file = File::open(p).map_err(|e| err("open", p, e))?;
        Ok(Box::new(PositionalRead { file, path: p.to_path_buf() }))
    }

    async fn write(&self, path: &str, bs: Bytes) -> iceberg::Result<()> {
        if object::is_object(path) {
            // Whole files written at once are metadata: never replace one.
            return object::create(path, bs).await.map_err(object_err);
        }
        let mut w = LocalWrite { file: Some(self.create(path)?), path: path.to_string() };
        w.write(bs).await?;
        w.close().await
    }

    async fn writer(&self, path: &str) -> iceberg::Result<Box<dyn FileWrite>> {
        if object::is_object(path) {
            return Ok(Box::new(ObjectWrite(object::Upload::new(path).map_err(object_err)?)));
        }
        Ok(Box::new(LocalWrite { file: Some(self.create(path)?), path: path.to_string() }))
    }

    async fn delete(&self, path: &str) -> iceberg::Result<()> {
        if object::is_object(path) {
            return object::delete(&[path.to_string()]).await.map_err(object_err);
        }
        let p = Path::new(local_path(path));
        match fs::remove_file(p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(err("delete", p, e)),
        }
    }

    async fn delete_prefix(&self, path: &str) -> iceberg::Result<()> {
        if object::is_object(path) {
            let found = object::list(path, None).await.map_err(object_err)?;
            let locations: Vec<String> = found.into_iter().map(|o| o.location).collect();
            return object::delete(&locations).await.map_err(object_err);
        }
        let p = Path::new(local_path(path));
        if p.is_dir() {
            fs::remove_dir_all(p).map_err(|e| err("delete", p, e))?;
        }
        Ok(())
    }

    async fn delete_stream(&self, mut paths: BoxStream<'static, String>) -> iceberg::Result<()> {
        while let Some(p) = paths.next().await {
            self.delete(&p).await?;
        }
        Ok(())
    }

    fn new_input(&self, path: &str) -> iceberg::Result<InputFile> {
        Ok(InputFile::new(Arc::new(self.clone()), path.to_string()))
    }

    fn new_output(&self, path: &str) -> iceberg::Result<OutputFile> {
        Ok(OutputFile::new(Arc::new(self.clone()), path.to_string()))
    }
}

/// Reads by offset (pread): concurrent readers of one file need no lock.
struct PositionalRead {
    file: File,
    path: std::path::PathBuf,
}

#[async_trait]
impl FileRead for PositionalRead {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        let len = range
            .end
            .checked_sub(range.start)
            .ok_or_else(|| err("read", &self.path, std::io::Error::other(format!("invalid range {range:?}"))))?;
        let mut buf = vec![0u8; len as usize];
        self.file.read_exact_at(&mut buf, range.start).map_err(|e| err("read", &self.path, e))?;
        Ok(buf.into())
    }
}

struct LocalWrite {
    file: Option<File>,
    path: String,
}

#[async_trait]
impl FileWrite for LocalWrite {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        let p = Path::new(local_path(&self.path));
        let file = self.file.as_mut().ok_or_else(|| err("write", p, std::io::Error::other("file is closed")))?;
        file.write_all(&bs).map_err(|e| err("write", p, e))
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        let p = Path::new(local_path(&self.path));
        self.file.take().ok_or_else(|| err("close", p, std::io::Error::other("file is closed")))?;
        Ok(())
    }
}

/// Ranged GETs of one object.
struct ObjectRead {
    location: String,
}

#[async_trait]
impl FileRead for ObjectRead {
    async fn read(&self, range: Range<u64>) -> iceberg::Result<Bytes> {
        object::get_range(&self.location, range).await.map_err(object_err)
    }
}

/// A multipart upload: the object appears only when `close` completes it.
struct ObjectWrite(object::Upload);

#[async_trait]
impl FileWrite for ObjectWrite {
    async fn write(&mut self, bs: Bytes) -> iceberg::Result<()> {
        self.0.write(bs).await.map_err(object_err)
    }

    async fn close(&mut self) -> iceberg::Result<()> {
        self.0.finish().await.map_err(object_err)
    }
}
