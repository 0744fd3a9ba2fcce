// The extension's entry: registers the storage extension and the table functions.
#include "skade/common.hpp"
#include "skade/functions.hpp"
#include "skade/modify.hpp"
#include "skade/storage.hpp"

#include "duckdb/main/config.hpp"
#include "duckdb/main/extension/extension_loader.hpp"
#include "duckdb/optimizer/optimizer_extension.hpp"

namespace duckdb {

static void LoadInternal(ExtensionLoader &loader) {
	loader.SetDescription("skade: a single-file Apache Iceberg lakehouse with change data capture");
	RegisterSkadeStorage(loader.GetDatabaseInstance());
	loader.RegisterFunction(SkadeTablesFunction());
	loader.RegisterFunction(SkadeCommitLogFunction());
	loader.RegisterFunction(SkadeSnapshotsFunction());
	loader.RegisterFunction(SkadeCommitsSinceFunction());
	loader.RegisterFunction(SkadeLineageFunctions());
	for (auto &set : SkadeLineageDeliveryFunctions()) {
		loader.RegisterFunction(set);
	}
	loader.RegisterFunction(SkadeCheckFunction());
	loader.RegisterFunction(SkadeExpireSnapshotsFunction());
	loader.RegisterFunction(SkadeRemoveOrphanFilesFunction());
	loader.RegisterFunction(SkadeCompactFunction());
	loader.RegisterFunction(SkadeUpgradeTableFunction());
	loader.RegisterFunction(SkadeAddFilesFunctions());
	loader.RegisterFunction(SkadeChangelogFunctions());
	loader.RegisterFunction(SkadeLookupFunction());
	loader.RegisterFunction(SkadeLookupStatsFunction());
	for (auto &set : SkadeConsumerFunctions()) {
		loader.RegisterFunction(set);
	}
	for (auto &set : SkadeConsumeFunctions()) {
		loader.RegisterFunction(set);
	}
	for (auto &function : SkadeServeFunctions()) {
		loader.RegisterFunction(function);
	}
	OptimizerExtension::Register(DBConfig::GetConfig(loader.GetDatabaseInstance()), SkadeLineageInputs());
	OptimizerExtension::Register(DBConfig::GetConfig(loader.GetDatabaseInstance()), SkadeVacuumRule());
	OptimizerExtension::Register(DBConfig::GetConfig(loader.GetDatabaseInstance()), SkadeReturningRule());
}

} // namespace duckdb

// DuckDB's loader looks up `<file base name>_duckdb_cpp_init`; the link exports this symbol
// alone (tools/build_extension.py). A failing init throws to the loader, as DuckDB expects.
extern "C" {
DUCKDB_CPP_EXTENSION_ENTRY(skade, loader) {
	duckdb::LoadInternal(loader);
}
}
