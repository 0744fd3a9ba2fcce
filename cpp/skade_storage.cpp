// ATTACH '<file>' AS lake (TYPE skade, ...): opens the catalog file through the core.
#include "skade/storage.hpp"

#include "skade/catalog.hpp"
#include "skade/secrets.hpp"
#include "skade/transaction.hpp"

#include "duckdb/common/file_system.hpp"
#include "duckdb/common/string_util.hpp"
#include "duckdb/main/attached_database.hpp"
#include "duckdb/main/config.hpp"
#include "duckdb/parser/parsed_data/attach_info.hpp"
#include "duckdb/storage/storage_extension.hpp"

namespace duckdb {

namespace {

// Whether the ATTACH named an access mode (DuckDB's own option names).
bool AccessModeGiven(const AttachInfo &info) {
	for (auto &entry : info.options) {
		auto key = StringUtil::Lower(entry.first);
		if (key == "read_only" || key == "readonly" || key == "read_write" || key == "readwrite") {
			return true;
		}
	}
	return false;
}

unique_ptr<Catalog> SkadeAttach(optional_ptr<StorageExtensionInfo> storage_info, ClientContext &context,
                                AttachedDatabase &db, const string &name, AttachInfo &info, AttachOptions &options) {
	vector<string> keys;
	vector<string> values;
	for (auto &entry : options.options) {
		keys.push_back(entry.first);
		values.push_back(entry.second.IsNull() ? string() : entry.second.ToString());
	}
	vector<const char *> key_ptrs;
	vector<const char *> value_ptrs;
	for (idx_t i = 0; i < keys.size(); i++) {
		key_ptrs.push_back(keys[i].c_str());
		value_ptrs.push_back(values[i].c_str());
	}
	auto read_only = options.access_mode == AccessMode::READ_ONLY;
	SkadeCatalogHandle handle;
	if (info.path.empty() || info.path == IN_MEMORY_PATH) {
		throw InvalidInputException("a skade catalog is a file: ATTACH it with a path (e.g. 'lake.skade'), not '%s'",
		                            info.path);
	}
	// 'skade:s3://bucket/lake' with TYPE skade too (DuckDB strips the prefix only without TYPE)
	auto path = StringUtil::StartsWith(info.path, "skade:") ? info.path.substr(6) : info.path;
	if (read_only && FileSystem::IsRemoteFile(info.path) && !AccessModeGiven(info)) {
		// DuckDB attaches every remote path read-only unless told otherwise: say so at ATTACH
		// rather than at the first write
		throw InvalidInputException("DuckDB attaches a remote path such as '%s' read-only unless told otherwise: "
		                            "add READ_WRITE (or READ_ONLY) to the ATTACH options",
		                            info.path);
	}
	// The buckets' credentials first: opening may already read or write there.
	auto bucket_urls = SkadeBucketUrls(path, options.options);
	SkadePassSecrets(context, bucket_urls);
	SkadeCheck(skade_catalog_open(path.c_str(), key_ptrs.data(), value_ptrs.data(), keys.size(), read_only,
	                              handle.out()));
	return make_uniq<SkadeCatalog>(db, std::move(handle), path, std::move(bucket_urls));
}

unique_ptr<TransactionManager> SkadeCreateTransactionManager(optional_ptr<StorageExtensionInfo> storage_info,
                                                             AttachedDatabase &db, Catalog &catalog) {
	return make_uniq<SkadeTransactionManager>(db, catalog.Cast<SkadeCatalog>());
}

} // namespace

void RegisterSkadeStorage(DatabaseInstance &instance) {
	auto extension = make_shared_ptr<StorageExtension>();
	extension->attach = SkadeAttach;
	extension->create_transaction_manager = SkadeCreateTransactionManager;
	StorageExtension::Register(DBConfig::GetConfig(instance), "skade", std::move(extension));
}

} // namespace duckdb
