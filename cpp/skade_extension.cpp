// The extension's entry: registers the storage extension and the table functions.
#include "skade/common.hpp"
#include "skade/functions.hpp"
#include "skade/storage.hpp"

#include "duckdb/main/extension/extension_loader.hpp"

namespace duckdb {

static void LoadInternal(ExtensionLoader &loader) {
	loader.SetDescription("skade: a single-file Apache Iceberg lakehouse with change data capture");
	RegisterSkadeStorage(loader.GetDatabaseInstance());
	loader.RegisterFunction(SkadeTablesFunction());
	loader.RegisterFunction(SkadeSnapshotsFunction());
	loader.RegisterFunction(SkadeCommitsSinceFunction());
	loader.RegisterFunction(SkadeCheckFunction());
	loader.RegisterFunction(SkadeExpireSnapshotsFunction());
	loader.RegisterFunction(SkadeCompactFunction());
	loader.RegisterFunction(SkadeChangelogFunctions());
	loader.RegisterFunction(SkadeLookupFunction());
	loader.RegisterFunction(SkadeLookupStatsFunction());
}

} // namespace duckdb

// Called by the Rust entry point `skade_duckdb_cpp_init` (src/extension.rs), which DuckDB's
// loader finds in the shared library.
extern "C" void skade_cpp_init(void *loader) {
	duckdb::LoadInternal(*reinterpret_cast<duckdb::ExtensionLoader *>(loader));
}
