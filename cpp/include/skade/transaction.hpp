// One DuckDB transaction on a skade catalog = one core transaction = one atomic commit.
#pragma once

#include "skade/common.hpp"
#include "duckdb/transaction/transaction.hpp"
#include "duckdb/transaction/transaction_manager.hpp"

namespace duckdb {

class SkadeCatalog;
class SkadeSchemaEntry;
class SkadeTableEntry;

//! The schemas (and through them the tables, views and macros) of a catalog as one committed state
//! has them, shared by every transaction that reads that state and has written nothing; or a
//! transaction's own set after its first write or DDL. A prepared statement's plan points into a set: DuckDB
//! runs the plan again only while the catalog version it was bound at (the set's id) is current,
//! and every transaction reporting that version holds the set.
struct SkadeEntrySet {
	explicit SkadeEntrySet(uint64_t generation);
	~SkadeEntrySet();

	//! Unique in the process (numbers below DuckDB's TRANSACTION_ID_START).
	const idx_t id;
	//! The core's generation of the committed state (see skade_txn_generation).
	const uint64_t generation;
	mutex lock;
	case_insensitive_map_t<unique_ptr<SkadeSchemaEntry>> schemas;
};

class SkadeTransaction : public Transaction {
public:
	SkadeTransaction(TransactionManager &manager, ClientContext &context, SkadeCatalog &catalog);
	~SkadeTransaction() override;

	static SkadeTransaction &Get(ClientContext &context, Catalog &catalog);
	static SkadeTransaction &Get(CatalogTransaction transaction, Catalog &catalog);

	skade_txn *Handle() const {
		return txn.get();
	}
	SkadeCatalog &GetCatalog() {
		return catalog;
	}

	//! The schema as this transaction sees it (from its entry set), or nullptr.
	optional_ptr<SkadeSchemaEntry> GetSchema(ClientContext &context, const string &name);
	vector<string> SchemaNames();
	//! After DDL: the transaction's entries become its own, built again from its changed catalog;
	//! the ones before stay alive until the transaction ends, because bound plans may still point
	//! at them.
	void InvalidateEntries();
	//! DuckDB's catalog version as this transaction sees the catalog: its entry set's id while it
	//! has changed nothing, otherwise a number taken at its latest change (DuckDB marks each
	//! statement that writes, before it runs), which no other transaction ever reports.
	idx_t CatalogVersion();
	//! A table as an AT clause pins it ("table uuid@unit value"), with that snapshot's columns,
	//! or nullptr; Pin keeps one for the transaction.
	optional_ptr<SkadeTableEntry> Pinned(const string &key);
	SkadeTableEntry &Pin(const string &key, unique_ptr<SkadeTableEntry> entry);
	void SetModifications(DatabaseModificationType type) override;
	//! Reads the catalog's bucket secrets again, once per transaction, at its first use (not in
	//! the constructor: DuckDB starts a transaction under a lock its secret lookup takes too).
	void ReadSecrets(ClientContext &context);

private:
	SkadeCatalog &catalog;
	SkadeTxnHandle txn;
	//! The entry set, taken at the first lookup (lock held).
	SkadeEntrySet &Entries();
	//! Leaves the entry set for one of the transaction's own, and takes a new local version (lock
	//! held).
	void OwnEntries();

	mutex lock;
	shared_ptr<SkadeEntrySet> entries;
	//! Whether `entries` is the set shared by the transactions of its generation.
	bool shared_entries = false;
	vector<shared_ptr<SkadeEntrySet>> retired;
	//! Set by the transaction's changes (0: none yet).
	idx_t local_version = 0;
	unordered_map<string, unique_ptr<SkadeTableEntry>> pinned;
	atomic<bool> secrets_read {false};
	mutex secrets_lock;
};

class SkadeTransactionManager : public TransactionManager {
public:
	SkadeTransactionManager(AttachedDatabase &db, SkadeCatalog &catalog);

	Transaction &StartTransaction(ClientContext &context) override;
	ErrorData CommitTransaction(ClientContext &context, Transaction &transaction) override;
	void RollbackTransaction(Transaction &transaction) override;
	void Checkpoint(ClientContext &context, bool force = false) override;

private:
	SkadeCatalog &catalog;
	mutex lock;
	reference_map_t<Transaction, unique_ptr<SkadeTransaction>> transactions;
};

} // namespace duckdb
