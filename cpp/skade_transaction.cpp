// DuckDB transactions on a skade catalog, the catalog entries they share, and their catalog versions.
#include "skade/transaction.hpp"

#include "skade/catalog.hpp"
#include "skade/functions.hpp"
#include "skade/schema_entry.hpp"
#include "skade/secrets.hpp"
#include "skade/table_entry.hpp"

#include "duckdb/common/enums/database_modification_type.hpp"
#include "duckdb/parser/parsed_data/create_schema_info.hpp"

namespace duckdb {

namespace {

//! Entry sets' ids count up from 1; versions of transactions' changes from DuckDB's
//! TRANSACTION_ID_START (2^62), as DuckDB's own catalog numbers its uncommitted changes: the two
//! never meet.
atomic<idx_t> next_entry_set_id {1};
atomic<idx_t> next_local_version {TRANSACTION_ID_START};

} // namespace

SkadeEntrySet::SkadeEntrySet(uint64_t generation_p) : id(next_entry_set_id++), generation(generation_p) {
}

SkadeEntrySet::~SkadeEntrySet() {
}

SkadeTransaction::SkadeTransaction(TransactionManager &manager, ClientContext &context, SkadeCatalog &catalog)
    : Transaction(manager, context), catalog(catalog) {
	// The attached database's name: the core's messages name tables in it (`lake.orders`).
	auto database = SkadeNameString(catalog.GetName());
	SkadeCheck(skade_txn_begin(catalog.Handle(), database.c_str(), txn.out()));
	SkadeWatchPreparedPlans(context);
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

SkadeEntrySet &SkadeTransaction::Entries() {
	if (!entries) {
		uint64_t generation = 0;
		SkadeCheck(skade_txn_generation(txn.get(), &generation));
		entries = catalog.SharedEntries(generation);
		shared_entries = true;
	}
	return *entries;
}

optional_ptr<SkadeSchemaEntry> SkadeTransaction::GetSchema(ClientContext &context, const string &name) {
	lock_guard<mutex> guard(lock);
	auto &set = Entries();
	lock_guard<mutex> set_guard(set.lock);
	auto it = set.schemas.find(name);
	if (it != set.schemas.end()) {
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
	auto entry = make_uniq<SkadeSchemaEntry>(catalog, info);
	auto result = entry.get();
	set.schemas[name] = std::move(entry);
	return result;
}

vector<string> SkadeTransaction::SchemaNames() {
	skade_strings *names = nullptr;
	SkadeCheck(skade_txn_schemas(txn.get(), &names));
	return SkadeTakeStrings(names);
}

void SkadeTransaction::OwnEntries() {
	auto generation = entries ? entries->generation : 0;
	if (entries) {
		retired.push_back(std::move(entries));
	}
	entries = make_shared_ptr<SkadeEntrySet>(generation);
	shared_entries = false;
	local_version = next_local_version++;
}

void SkadeTransaction::InvalidateEntries() {
	lock_guard<mutex> guard(lock);
	OwnEntries();
}

idx_t SkadeTransaction::CatalogVersion() {
	lock_guard<mutex> guard(lock);
	if (local_version) {
		return local_version;
	}
	return Entries().id;
}

optional_ptr<SkadeTableEntry> SkadeTransaction::Pinned(const string &key) {
	lock_guard<mutex> guard(lock);
	auto it = pinned.find(key);
	return it == pinned.end() ? nullptr : it->second.get();
}

SkadeTableEntry &SkadeTransaction::Pin(const string &key, unique_ptr<SkadeTableEntry> entry) {
	lock_guard<mutex> guard(lock);
	// (two threads may pin one at once: the first stays, as bound plans may point at it)
	return *pinned.emplace(key, std::move(entry)).first->second;
}

void SkadeTransaction::SetModifications(DatabaseModificationType type) {
	// Any write (DML, DDL, a skade function that changes the lake) may change what a plan bound
	// before it read, its row counts and column statistics included; and entries built after it
	// may reflect the transaction's own changes, which other transactions must not see.
	lock_guard<mutex> guard(lock);
	if (shared_entries || !entries) {
		OwnEntries();
	} else {
		local_version = next_local_version++;
	}
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
