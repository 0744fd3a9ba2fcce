// DuckDB transactions on a skade catalog, and the per-transaction cache of catalog entries.
#include "skade/transaction.hpp"

#include "skade/catalog.hpp"
#include "skade/schema_entry.hpp"
#include "skade/secrets.hpp"

#include "duckdb/parser/parsed_data/create_schema_info.hpp"

namespace duckdb {

SkadeTransaction::SkadeTransaction(TransactionManager &manager, ClientContext &context, SkadeCatalog &catalog)
    : Transaction(manager, context), catalog(catalog) {
	// The attached database's name: the core's messages name tables in it (`lake.orders`).
	auto database = SkadeNameString(catalog.GetName());
	SkadeCheck(skade_txn_begin(catalog.Handle(), database.c_str(), txn.out()));
}

SkadeTransaction::~SkadeTransaction() {
}

SkadeTransaction &SkadeTransaction::Get(ClientContext &context, Catalog &catalog) {
	auto &txn = Transaction::Get(context, catalog).Cast<SkadeTransaction>();
	txn.ReadSecrets(context);
	return txn;
}

SkadeTransaction &SkadeTransaction::Get(CatalogTransaction transaction, Catalog &catalog) {
	if (transaction.transaction) {
		auto &txn = transaction.transaction->Cast<SkadeTransaction>();
		if (transaction.HasContext()) {
			txn.ReadSecrets(transaction.GetContext());
		}
		return txn;
	}
	return Get(transaction.GetContext(), catalog);
}

void SkadeTransaction::ReadSecrets(ClientContext &context) {
	// Every use of a transaction comes through Get: the first one, at binding, reads the secrets,
	// before any statement of the transaction reaches a bucket. (The core keeps a bucket's client
	// when its options did not change.)
	if (secrets_read.load()) {
		return;
	}
	lock_guard<mutex> guard(secrets_lock);
	if (secrets_read.load()) {
		return;
	}
	SkadePassSecrets(context, catalog.BucketUrls());
	secrets_read = true;
}

optional_ptr<SkadeSchemaEntry> SkadeTransaction::GetSchema(ClientContext &context, const string &name) {
	lock_guard<mutex> guard(lock);
	auto it = schemas.find(name);
	if (it != schemas.end()) {
		return it->second.get();
	}
	skade_strings *found = nullptr;
	SkadeCheck(skade_txn_schema(txn.get(), name.c_str(), &found));
	if (!found) {
		return nullptr;
	}
	auto stored = SkadeTakeStrings(found);
	CreateSchemaInfo info;
	SkadeSetSchemaName(info, stored.empty() ? name : stored[0]);
	// Every catalog has "main": EXPORT DATABASE must not write a CREATE SCHEMA for it.
	info.internal = StringUtil::CIEquals(SkadeSchemaName(info), DEFAULT_SCHEMA);
	auto entry = make_uniq<SkadeSchemaEntry>(catalog, info, *this);
	auto result = entry.get();
	schemas[name] = std::move(entry);
	return result;
}

vector<string> SkadeTransaction::SchemaNames() {
	skade_strings *names = nullptr;
	SkadeCheck(skade_txn_schemas(txn.get(), &names));
	return SkadeTakeStrings(names);
}

void SkadeTransaction::InvalidateEntries() {
	lock_guard<mutex> guard(lock);
	for (auto &entry : schemas) {
		retired.push_back(std::move(entry.second));
	}
	schemas.clear();
}

SkadeTransactionManager::SkadeTransactionManager(AttachedDatabase &db, SkadeCatalog &catalog)
    : TransactionManager(db), catalog(catalog) {
}

Transaction &SkadeTransactionManager::StartTransaction(ClientContext &context) {
	auto transaction = make_uniq<SkadeTransaction>(*this, context, catalog);
	auto &result = *transaction;
	lock_guard<mutex> guard(lock);
	transactions[result] = std::move(transaction);
	return result;
}

ErrorData SkadeTransactionManager::CommitTransaction(ClientContext &context, Transaction &transaction) {
	auto &txn = transaction.Cast<SkadeTransaction>();
	ErrorData error;
	auto status = skade_txn_commit(txn.Handle());
	if (status) {
		error = SkadeErrorData(status);
	}
	lock_guard<mutex> guard(lock);
	transactions.erase(transaction);
	return error;
}

void SkadeTransactionManager::RollbackTransaction(Transaction &transaction) {
	auto &txn = transaction.Cast<SkadeTransaction>();
	auto status = skade_txn_rollback(txn.Handle());
	if (status) {
		skade_status_free(status); // rollback only removes files; nothing to report
	}
	lock_guard<mutex> guard(lock);
	transactions.erase(transaction);
}

void SkadeTransactionManager::Checkpoint(ClientContext &context, bool force) {
	// Under DURABILITY 'eventual' or 'none', CHECKPOINT makes every acknowledged commit durable.
	SkadeCheck(skade_catalog_flush(catalog.Handle()));
}

} // namespace duckdb
