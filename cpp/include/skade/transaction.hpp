// One DuckDB transaction on a skade catalog = one core transaction = one atomic commit.
#pragma once

#include "skade/common.hpp"
#include "duckdb/transaction/transaction.hpp"
#include "duckdb/transaction/transaction_manager.hpp"

namespace duckdb {

class SkadeCatalog;
class SkadeSchemaEntry;

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

	//! The schema as this transaction sees it (cached for the transaction), or nullptr.
	optional_ptr<SkadeSchemaEntry> GetSchema(ClientContext &context, const string &name);
	vector<string> SchemaNames();
	//! Forgets cached entries after DDL; entries stay alive until the transaction ends because
	//! bound plans may still point at them.
	void InvalidateEntries();
	//! Reads the catalog's bucket secrets again, once per transaction, at its first use (not in
	//! the constructor: DuckDB starts a transaction under a lock its secret lookup takes too).
	void ReadSecrets(ClientContext &context);

private:
	SkadeCatalog &catalog;
	SkadeTxnHandle txn;
	mutex lock;
	case_insensitive_map_t<unique_ptr<SkadeSchemaEntry>> schemas;
	vector<unique_ptr<SkadeSchemaEntry>> retired;
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
