//! Opening and closing catalogs (ATTACH / DETACH).

use std::ffi::c_char;
use std::path::Path;

use super::{arg, free, guard, handle, out, SkadeStatus};
use crate::catalog::options::AttachOptions;
use crate::catalog::Catalog;

pub struct SkadeCatalog(pub(crate) Catalog);

/// Opens or creates the catalog at `path`. `keys`/`values` are the ATTACH options DuckDB did not
/// consume itself.
#[no_mangle]
pub unsafe extern "C" fn skade_catalog_open(
    path: *const c_char,
    keys: *const *const c_char,
    values: *const *const c_char,
    n_options: usize,
    read_only: bool,
    result: *mut *mut SkadeCatalog,
) -> *mut SkadeStatus {
    guard(|| {
        let path = arg(path, "path")?;
        let keys = super::arg_list(keys, n_options, "option name")?;
        let values = super::arg_list(values, n_options, "option value")?;
        let options =
            AttachOptions::parse(keys.iter().map(String::as_str).zip(values.iter().map(String::as_str)), read_only)?;
        let lineage = options.lineage.clone();
        let catalog = match crate::io::object::is_object(path) {
            true => Catalog::open_lake(path, options)?,
            false => Catalog::open(Path::new(path), options)?,
        };
        // (off DuckDB's threads: delivery never slows or fails a commit)
        crate::lineage::delivery::start(&catalog, &lineage);
        out(result, Box::into_raw(Box::new(SkadeCatalog(catalog))))
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_catalog_free(catalog: *mut SkadeCatalog) {
    // (a connection closed without DETACH: what collectors acknowledged is kept all the same)
    if let Some(c) = catalog.as_ref() {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            crate::lineage::delivery::persist_acknowledged(&c.0);
            crate::lineage::delivery::release_leases(&c.0);
        }));
    }
    free(catalog)
}

/// Makes every acknowledged commit durable (CHECKPOINT).
#[no_mangle]
pub unsafe extern "C" fn skade_catalog_flush(catalog: *const SkadeCatalog) -> *mut SkadeStatus {
    guard(|| handle(catalog, "catalog")?.0.flush())
}

/// DETACH: makes every acknowledged commit durable; on failure they stay in this process.
#[no_mangle]
pub unsafe extern "C" fn skade_catalog_detach(catalog: *const SkadeCatalog) -> *mut SkadeStatus {
    guard(|| {
        let catalog = &handle(catalog, "catalog")?.0;
        crate::lineage::delivery::persist_acknowledged(catalog);
        crate::lineage::delivery::release_leases(catalog);
        catalog.detach()
    })
}

/// The catalog file's absolute path, valid while the handle lives.
#[no_mangle]
pub unsafe extern "C" fn skade_catalog_path(
    catalog: *const SkadeCatalog,
    result: *mut *mut super::SkadeStrings,
) -> *mut SkadeStatus {
    guard(|| {
        let c = &handle(catalog, "catalog")?.0;
        let items = [c.path().display().to_string(), c.data_path().to_string()];
        out(result, super::SkadeStrings::boxed(items))
    })
}
