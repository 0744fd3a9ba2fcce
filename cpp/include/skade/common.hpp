// Conversions between the Rust core's C ABI and DuckDB: status -> exception, owned handles,
// string lists, Arrow conversion settings. Every shim file goes through these.
#pragma once

#include "duckdb.hpp"
#include "duckdb/main/client_properties.hpp"
#include "skade_ffi.h"
#include "skade/duckdb_compat.hpp"

namespace duckdb {

//! Throws the DuckDB exception that matches a failed core call (and frees the status).
void SkadeCheck(skade_status *status);

//! The same, as ErrorData (for APIs that return errors instead of throwing).
ErrorData SkadeErrorData(skade_status *status);

//! The next batch of an Arrow stream from the core. A failed read (a data file that cannot be
//! read) is an IO Error with the core's own message, not Arrow's wrapping of it.
shared_ptr<ArrowArrayWrapper> SkadeNextChunk(ArrowArrayStreamWrapper &stream);

//! Takes a string list from the core, frees it, returns its items.
vector<string> SkadeTakeStrings(skade_strings *list);

//! Converts a C string from the core (NULL -> "").
inline string SkadeString(const char *s) {
	return s ? string(s) : string();
}

//! Arrow settings for every DataChunk <-> Arrow conversion: lossless, so UUID travels as
//! arrow.uuid rather than text.
ClientProperties SkadeArrowProperties(ClientContext &context);

//! A unique owner of a core handle.
template <class T, void (*FREE)(T *)>
class SkadeHandle {
public:
	SkadeHandle() : ptr(nullptr) {
	}
	explicit SkadeHandle(T *p) : ptr(p) {
	}
	SkadeHandle(SkadeHandle &&o) noexcept : ptr(o.ptr) {
		o.ptr = nullptr;
	}
	SkadeHandle &operator=(SkadeHandle &&o) noexcept {
		if (this != &o) {
			reset();
			ptr = o.ptr;
			o.ptr = nullptr;
		}
		return *this;
	}
	SkadeHandle(const SkadeHandle &) = delete;
	SkadeHandle &operator=(const SkadeHandle &) = delete;
	~SkadeHandle() {
		reset();
	}
	void reset() {
		if (ptr) {
			FREE(ptr);
			ptr = nullptr;
		}
	}
	T *get() const {
		return ptr;
	}
	T **out() {
		reset();
		return &ptr;
	}
	explicit operator bool() const {
		return ptr != nullptr;
	}

private:
	T *ptr;
};

using SkadeCatalogHandle = SkadeHandle<skade_catalog, skade_catalog_free>;
using SkadeTxnHandle = SkadeHandle<skade_txn, skade_txn_free>;
using SkadeTableHandle = SkadeHandle<skade_table, skade_table_free>;
using SkadeScanHandle = SkadeHandle<skade_scan, skade_scan_free>;
using SkadeWriterHandle = SkadeHandle<skade_writer, skade_writer_free>;
using SkadeOrderedWriteHandle = SkadeHandle<skade_ordered_write, skade_ordered_write_free>;

} // namespace duckdb
