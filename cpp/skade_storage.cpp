// ATTACH '<file>' AS lake (TYPE skade, ...): opens the catalog file through the core.
#include "skade/storage.hpp"

#include "skade/catalog.hpp"
#include "skade/secrets.hpp"
#include "skade/transaction.hpp"

#include "duckdb/main/attached_database.hpp"
#include "duckdb/main/config.hpp"
#include "duckdb/parser/parsed_data/attach_info.hpp"
#include "duckdb/storage/storage_extension.hpp"

namespace duckdb {

namespace {

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
	// The buckets' credentials first: opening may already read or write there.
	auto bucket_urls = SkadeBucketUrls(info.path, options.options);
	SkadePassSecrets(context, bucket_urls);
	SkadeCheck(skade_catalog_open(info.path.c_str(), key_ptrs.data(), value_ptrs.data(), keys.size(), read_only,
	                              handle.out()));
	return make_uniq<SkadeCatalog>(db, std::move(handle), info.path, std::move(bucket_urls));
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
