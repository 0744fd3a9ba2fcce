// The C ABI of skade's Rust core (src/ffi/). The only header the C++ shim includes from Rust.
//
// - Every fallible call returns a skade_status*: NULL on success, otherwise an error with a code
//   (SKADE_ERR_*) and a message; free it with skade_status_free.
// - Handles are opaque and freed with their _free function.
// - Rows cross only as the Arrow C Data Interface. Unless a comment says the callee takes an
//   ArrowArray, the caller keeps ownership of what it passes.
// - No call lets a Rust panic escape; the shim never lets a C++ exception into Rust.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ArrowSchema;
struct ArrowArray;
struct ArrowArrayStream;

// Error codes: the discriminants of skade::error::ErrorKind.
enum {
	SKADE_ERR_INVALID_INPUT = 1,
	SKADE_ERR_CATALOG = 2,
	SKADE_ERR_CONSTRAINT = 3,
	SKADE_ERR_CONFLICT = 4,
	SKADE_ERR_IO = 5,
	SKADE_ERR_NOT_IMPLEMENTED = 6,
	SKADE_ERR_CORRUPT = 7,
	SKADE_ERR_PERMISSION = 8,
	SKADE_ERR_INTERNAL = 9,
	SKADE_ERR_INTERRUPTED = 10,
	SKADE_ERR_BINDER = 11,
};

typedef struct SkadeStatus skade_status;
typedef struct SkadeStrings skade_strings;
typedef struct SkadeCatalog skade_catalog;
typedef struct SkadeTxn skade_txn;
typedef struct SkadeTable skade_table;
typedef struct SkadeScan skade_scan;
typedef struct SkadeWriter skade_writer;
typedef struct SkadeOrderedWrite skade_ordered_write;

int32_t skade_status_code(const skade_status *status);
const char *skade_status_message(const skade_status *status);
void skade_status_free(skade_status *status);

size_t skade_strings_len(const skade_strings *list);
const char *skade_strings_get(const skade_strings *list, size_t i);
void skade_strings_free(skade_strings *list);

// ---- catalogs (ATTACH) ----
skade_status *skade_catalog_open(const char *path, const char *const *keys, const char *const *values,
                                 size_t n_options, bool read_only, skade_catalog **result);
void skade_catalog_free(skade_catalog *catalog);
// Makes every acknowledged commit durable (CHECKPOINT; DETACH does it too).
skade_status *skade_catalog_flush(const skade_catalog *catalog);
// DETACH: makes every acknowledged commit durable; when that fails they stay in this process (ATTACH again, CHECKPOINT).
skade_status *skade_catalog_detach(const skade_catalog *catalog);
// [catalog file path, data path]
skade_status *skade_catalog_path(const skade_catalog *catalog, skade_strings **result);

// ---- storage (the buckets an ATTACH uses) ----
// How the core reaches locations under `url` (an s3://bucket[/path] prefix; the longest registered
// prefix of a location wins, as a secret's SCOPE does). keys/values: the S3 secret's keys key_id,
// secret, session_token, region, endpoint, url_style, use_ssl, kms_key_id, requester_pays, and
// secret_name (the secret's name, for messages), unset ones left out. Pairs naming no secret and
// setting nothing that reaches a bucket (no keys, token, region, endpoint, KMS key, requester pays)
// forget url's options: the AWS environment (AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL, ...) applies.
// Called at ATTACH and at each transaction's start; unchanged options keep the bucket's client.
// An unknown key is an error naming it; no error ever holds a credential.
skade_status *skade_storage_options(const char *url, const char *const *keys, const char *const *values, size_t n);

// ---- transactions ----
// database: the name DuckDB attached the catalog under (messages name its tables as a user writes
// them there: lake.orders, lake.sales.orders), or NULL (schema.table).
skade_status *skade_txn_begin(const skade_catalog *catalog, const char *database, skade_txn **result);
skade_status *skade_txn_commit(const skade_txn *txn);
skade_status *skade_txn_rollback(const skade_txn *txn);
void skade_txn_free(skade_txn *txn);
// The generation of the committed state the transaction reads: transactions of one catalog with
// the same generation read the same committed state (their own changes aside).
skade_status *skade_txn_generation(const skade_txn *txn, uint64_t *result);

skade_status *skade_txn_schemas(const skade_txn *txn, skade_strings **result);
// result: [stored name], or NULL when the schema does not exist
skade_status *skade_txn_schema(const skade_txn *txn, const char *name, skade_strings **result);
skade_status *skade_txn_tables(const skade_txn *txn, const char *schema, skade_strings **result);
// result: NULL when the table does not exist
skade_status *skade_txn_table(const skade_txn *txn, const char *schema, const char *name, skade_table **result);

skade_status *skade_txn_create_schema(const skade_txn *txn, const char *name, bool if_not_exists);
skade_status *skade_txn_drop_schema(const skade_txn *txn, const char *name, bool if_exists, bool cascade);
// on_conflict: 0 error, 1 ignore, 2 replace. result: NULL when ignored. partitioned_by, sorted_by: the
// keys of PARTITIONED BY and SORTED BY as JSON lists (as for ALTER's set_partitioned_by and
// set_sorted_by), or NULL.
skade_status *skade_txn_create_table(const skade_txn *txn, const char *schema, const char *name,
                                     const struct ArrowSchema *columns, const char *const *duckdb_types,
                                     size_t n_columns, const char *const *not_null, size_t n_not_null,
                                     const char *const *primary_key, size_t n_primary_key,
                                     const char *partitioned_by, const char *sorted_by, int32_t on_conflict,
                                     skade_table **result);
// Deletes rows by the row ids this transaction's scans produced; `deleted` gets the count.
skade_status *skade_txn_delete_rows(const skade_txn *txn, const char *uuid, const int64_t *row_ids, size_t n,
                                    uint64_t *deleted);
// Ends a statement that wrote rows to table `uuid`: a constraint error if a new primary key is
// duplicated or already live; otherwise its files become part of the transaction.
skade_status *skade_txn_end_statement(const skade_txn *txn, const char *uuid);
skade_status *skade_txn_drop_table(const skade_txn *txn, const char *schema, const char *name, bool if_exists);
// ALTER TABLE: `op` add_column, drop_column, rename_column, alter_type, drop_not_null, set_not_null, set_default,
// rename_table, set_partitioned_by, set_sorted_by or add_primary_key, or add_field, drop_field, rename_field
// and alter_field_type (a field inside a column: `column` is its path, a JSON list of names from the column
// down), or set_comment and set_column_comment (COMMENT ON TABLE / COLUMN: `to` the comment, NULL to remove
// it); `column` the column, `to` a new name (the partition keys, the sort keys, the key's columns: JSON
// lists; no keys: RESET), `if_flag` IF [NOT] EXISTS, `column_type` (a one-column schema) and `duckdb_type`
// the new type (add_*, alter_*type; else null). `default_value`: add_column's DEFAULT or set_default's
// (SET DEFAULT; null: DROP DEFAULT), one row in `column_type`, moved out (null: none; v3 tables only).
// `changed`: whether anything did.
skade_status *skade_txn_alter_table(const skade_txn *txn, const char *schema, const char *name, const char *op,
                                    const char *column, const char *to, bool if_flag,
                                    const struct ArrowSchema *column_type, const char *duckdb_type,
                                    struct ArrowArray *default_value, bool *changed);

// ---- views (src/ffi/views.rs) ----
skade_status *skade_txn_views(const skade_txn *txn, const char *schema, skade_strings **result);
// result: [name, sql, has comment ("0"/"1"), comment, alias count, aliases..., then (column,
// comment) pairs], or NULL when no view has that name.
skade_status *skade_txn_view(const skade_txn *txn, const char *schema, const char *name, skade_strings **result);
// sql: the SELECT as DuckDB prints it; aliases: CREATE VIEW v (a, b); comment may be NULL; columns:
// the bound columns' Arrow export, duckdb_types their types. on_conflict as for tables.
skade_status *skade_txn_create_view(const skade_txn *txn, const char *schema, const char *name, const char *sql,
                                    const char *const *aliases, size_t n_aliases, const char *comment,
                                    const struct ArrowSchema *columns, const char *const *duckdb_types,
                                    size_t n_columns, int32_t on_conflict, bool *created);
skade_status *skade_txn_drop_view(const skade_txn *txn, const char *schema, const char *name, bool if_exists);
skade_status *skade_txn_rename_view(const skade_txn *txn, const char *schema, const char *name, const char *to);
// COMMENT ON VIEW (column NULL) or on one of its columns; a NULL comment removes it.
skade_status *skade_txn_comment_view(const skade_txn *txn, const char *schema, const char *name, const char *column,
                                     const char *comment);

// ---- macros (src/ffi/macros.rs); a macro's kind is "scalar" or "table" ----
// result: [kind, name, sql] for every macro of the schema (sql: the CREATE MACRO statement).
skade_status *skade_txn_macros(const skade_txn *txn, const char *schema, skade_strings **result);
// sql: the CREATE MACRO statement as DuckDB prints it, unqualified. on_conflict as for tables.
skade_status *skade_txn_create_macro(const skade_txn *txn, const char *schema, const char *name, const char *kind,
                                     const char *sql, int32_t on_conflict, bool *created);
skade_status *skade_txn_drop_macro(const skade_txn *txn, const char *schema, const char *name, const char *kind,
                                   bool if_exists);

// ---- tables ----
void skade_table_free(skade_table *table);
// The same table read at an AT clause: unit VERSION (value: snapshot id) or TIMESTAMP (value:
// microseconds since the epoch, UTC).
skade_status *skade_table_at(const skade_table *table, const char *unit, int64_t value, skade_table **result);
const char *skade_table_name(const skade_table *table);
const char *skade_table_schema_name(const skade_table *table);
const char *skade_table_uuid(const skade_table *table);
// The id of the table's current schema (immutable: the shim caches column shapes, their comments
// included, under uuid and id).
int32_t skade_table_schema_id(const skade_table *table);
// The columns; a column's comment is its field's "doc" metadata (absent: none).
skade_status *skade_table_arrow_schema(const skade_table *table, struct ArrowSchema *result);
// result: [the table's comment], or empty when it has none.
skade_status *skade_table_comment(const skade_table *table, skade_strings **result);
// The primary key's column names, in the order PRIMARY KEY declared them (none: no key).
skade_status *skade_table_primary_key(const skade_table *table, skade_strings **result);
uint64_t skade_table_estimated_rows(const skade_table *table);
// Whether the table's new files keep their rows in the order written (no sort order, primary key
// or partitioning reorders them): only then does an INSERT need to keep its query's order.
bool skade_table_keeps_arrival_order(const skade_table *table);

// ---- scans ----
// Plans a scan of `table` as it was bound, at its version (see skade_table_at). columns:
// top-level indexes (none: count only). constants (may be NULL) is taken over.
// lineage: append Iceberg v3's `_row_id` and `_last_updated_sequence_number` (nullable BIGINTs)
// after the columns (an error naming the way out on a v2 table).
// row_ids: append a BIGINT row-id column last (for DELETE/UPDATE; valid within the transaction).
skade_status *skade_scan_open(const skade_txn *txn, const skade_table *table, const uint64_t *columns,
                              size_t n_columns, bool lineage, bool row_ids, const char *filter_json,
                              struct ArrowArray *constants, const struct ArrowSchema *constants_schema,
                              skade_scan **result);
void skade_scan_free(skade_scan *scan);
uint64_t skade_scan_task_count(const skade_scan *scan);
uint64_t skade_scan_task_rows(const skade_scan *scan, uint64_t task);
uint64_t skade_scan_estimated_rows(const skade_scan *scan);
skade_status *skade_scan_task_stream(const skade_scan *scan, uint64_t task, struct ArrowArrayStream *result);
// Column statistics of a scan of `table` (as for skade_scan_open) for DuckDB's optimizer: one
// two-row batch of the table's columns, row 0 lower and row 1 upper bounds (NULL: unknown);
// null_free[i] (n_columns: the table's column count) whether column i holds no NULL; max_rows
// the rows of the data files the scan reads, before deletes (no scan returns more).
skade_status *skade_scan_column_stats(const skade_txn *txn, const skade_table *table, bool *null_free,
                                      size_t n_columns, uint64_t *max_rows, struct ArrowArrayStream *result);

// ---- inserts ----
// `memory_limit`: DuckDB's, in bytes; a statement's primary-key check holds its keys within a share of it.
// `carries_rows`: an UPDATE's writer, whose rows replace rows (skade_writer_write_carried).
skade_status *skade_writer_open(const skade_txn *txn, const char *uuid, uint64_t memory_limit, bool carries_rows,
                                skade_writer **result);
// Takes over `array` (a struct array of the table's columns).
skade_status *skade_writer_write(skade_writer *writer, struct ArrowArray *array, const struct ArrowSchema *schema);
// As skade_writer_write, for rows that replace the rows `row_ids` (one each, from the transaction's
// scans): on an Iceberg v3 table each keeps the replaced row's `_row_id`.
skade_status *skade_writer_write_carried(skade_writer *writer, struct ArrowArray *array,
                                         const struct ArrowSchema *schema, const int64_t *row_ids, size_t n_row_ids);
// Stages the writer's files in the running statement; `rows` gets its row count. (A writer of an
// ordered write hands its last batch to that write instead.)
skade_status *skade_writer_finish(skade_writer *writer, uint64_t *rows);
void skade_writer_free(skade_writer *writer);
// An INSERT that keeps its query's order (DuckDB's preserve_insertion_order) while its threads write
// in parallel: each thread's writer (skade_ordered_write_writer) is told the batch index of its rows
// (skade_writer_start_batch) and finished as usual; skade_ordered_write_finish, once every thread
// finished, writes what is held and stages the statement's files in batch order.
skade_status *skade_ordered_write_open(const skade_txn *txn, const char *uuid, uint64_t memory_limit,
                                       skade_ordered_write **result);
skade_status *skade_ordered_write_writer(const skade_ordered_write *ordered, skade_writer **result);
// The rows written from now on are batch `batch`'s; every batch below `min_batch` has ended in every thread.
skade_status *skade_writer_start_batch(skade_writer *writer, uint64_t batch, uint64_t min_batch);
skade_status *skade_ordered_write_finish(const skade_ordered_write *ordered);
void skade_ordered_write_free(skade_ordered_write *ordered);

// ---- table functions ----
skade_status *skade_function_schema(const char *name, struct ArrowSchema *result);
skade_status *skade_fn_tables(const skade_txn *txn, struct ArrowArrayStream *result);
// PRAGMA database_size: the bytes of the catalog file and of the data and delete files of every
// table's current snapshot, as the transaction sees them.
skade_status *skade_fn_database_size(const skade_txn *txn, uint64_t *bytes);
skade_status *skade_fn_snapshots(const skade_txn *txn, const char *uuid, struct ArrowArrayStream *result);
// skade_changelog: the columns of the changelog of table `uuid`, and its rows for the snapshots
// after `from` (if has_from; else from creation) up to `to` (if has_to; else current), netted to
// the window's effect if `collapse`. With `times`, the bounds are microseconds since the epoch.
skade_status *skade_fn_changelog_schema(const skade_txn *txn, const char *uuid, struct ArrowSchema *result);
// `columns` (n_columns of them) are the output columns the query uses: the core may leave the
// others NULL (it reads only those plus what pairing needs). `filter_json` and `constants`
// describe the query's filters (as for skade_scan_open): the core skips files, row groups and
// snapshots that cannot match; the caller still applies them.
skade_status *skade_fn_changelog(const skade_txn *txn, const char *uuid, int64_t from, bool has_from, int64_t to,
                                 bool has_to, bool times, bool collapse, const uint64_t *columns, size_t n_columns,
                                 const char *filter_json, struct ArrowArray *constants,
                                 const struct ArrowSchema *constants_schema, struct ArrowArrayStream *result);
// The live rows of table `uuid` whose primary key is one of `keys` (a struct array: one field
// per key column, named like it; one row per key), at snapshot `as_of` if has_as_of.
// `name` is the table's name as the statement gave it (for messages); `schema_id` the table's
// schema when the statement was bound: the rows have its columns, or the call fails.
skade_status *skade_fn_lookup(const skade_txn *txn, const char *uuid, const char *name, int32_t schema_id,
                              struct ArrowArray *keys, const struct ArrowSchema *keys_schema, int64_t as_of,
                              bool has_as_of, struct ArrowArrayStream *result);
// The lookup counters since load (one row).
skade_status *skade_fn_lookup_stats(struct ArrowArrayStream *result);
// Expires snapshots of table `uuid` as its own commit (each bound only if its has_ flag is set);
// one row: expired_snapshots, removed_files.
skade_status *skade_fn_expire_snapshots(const skade_txn *txn, const char *uuid, int64_t older_than_us,
                                        bool has_older_than, int64_t retain_last, bool has_retain_last,
                                        struct ArrowArrayStream *result);
// Removes (or, dry_run, lists) the files in table `uuid`'s folders that no commit references and
// that are older than older_than_us (when has_older_than; else 3 days): one row per file.
skade_status *skade_fn_remove_orphan_files(const skade_txn *txn, const char *uuid, int64_t older_than_us,
                                           bool has_older_than, bool dry_run, struct ArrowArrayStream *result);
// Starts an Iceberg REST catalog server for the lake of `txn`, attached as `lake`, on host:port
// (host null: 127.0.0.1; port 0: any free one); token, client_id and client_secret may be null.
// One row: address, lake, token_required (src/rest/).
skade_status *skade_fn_serve(const skade_txn *txn, const char *lake, const char *host, int64_t port,
                             const char *token, const char *client_id, const char *client_secret,
                             struct ArrowArrayStream *result);
// The running servers: address, lake, token_required, requests, commits, errors.
skade_status *skade_fn_servers(struct ArrowArrayStream *result);
// Stops the servers of a lake (its name) or at an address (as skade_servers shows it): one row,
// how many.
skade_status *skade_fn_serve_stop(const char *lake_or_address, struct ArrowArrayStream *result);
// Rewrites table `uuid`'s live rows into new files, deletes applied, as its own `replace` commit;
// one row: removed_data_files, removed_delete_files, added_data_files, rows.
skade_status *skade_fn_compact(const skade_txn *txn, const char *uuid, struct ArrowArrayStream *result);
skade_status *skade_fn_upgrade_table(const skade_txn *txn, const char *uuid, int64_t version,
                                     struct ArrowArrayStream *result);
// Adopts the Parquet files `paths` (n_paths of them, globs already expanded) into table `uuid`
// where they lie, staged in `txn` (they commit with it, as one append); all of them or none, the
// error naming the file and column that do not fit. One row: added_data_files, rows.
skade_status *skade_fn_add_files(const skade_txn *txn, const char *uuid, const char *const *paths, size_t n_paths,
                                 struct ArrowArrayStream *result);
skade_status *skade_fn_commits_since(const skade_catalog *catalog, uint64_t since, struct ArrowArrayStream *result);
// The lineage events of the transactions committed after `since` (src/functions/lineage.rs).
skade_status *skade_fn_lineage(const skade_catalog *catalog, uint64_t since, struct ArrowArrayStream *result);
// Where each lineage sink stands; with flush, after historizing and waiting up to timeout_ms for
// every collector to acknowledge every event committed so far (src/functions/lineage_delivery.rs).
skade_status *skade_fn_lineage_delivery(const skade_catalog *catalog, bool flush, uint64_t timeout_ms,
                                        struct ArrowArrayStream *result);

// Lineage inputs outside the catalog that the transaction read (src/ffi/transaction.rs): a file
// (a path as the query named it, or a URL), a table of another DuckDB database (`database_path`
// empty for one in memory; its `column_count` columns' names and DuckDB types), a table of another
// skade catalog. Recorded with its commit.
skade_status *skade_txn_read_file(const skade_txn *txn, const char *path);
skade_status *skade_txn_read_table(const skade_txn *txn, const char *database_path, const char *database,
                                   const char *qualified_name, const char *const *column_names,
                                   const char *const *column_types, size_t column_count);
skade_status *skade_txn_read_skade_table(const skade_txn *txn, const skade_table *table);

// Named consumers (src/ffi/consumers.rs). Changes are staged in `txn`: they commit with it.
// Whether the query was interrupted; polled by a waiting call, must not throw.
typedef bool (*skade_interrupted_fn)(void *context);
skade_status *skade_fn_consumers(const skade_txn *txn, struct ArrowArrayStream *result);
// Creates (reset false; `tables` names them) or resets the consumer `name`. Its start: `start`
// ('now', 'beginning'; NULL: none), `at_snapshot` if `has_snapshot`, `at_commit` if `has_commit`.
skade_status *skade_fn_start_consumer(const skade_txn *txn, const char *name, bool reset, const char *const *tables,
                                      size_t n_tables, const char *start, int64_t at_snapshot, bool has_snapshot,
                                      int64_t at_commit, bool has_commit, struct ArrowArrayStream *result);
skade_status *skade_fn_drop_consumer(const skade_txn *txn, const char *name, bool if_exists,
                                     struct ArrowArrayStream *result);
skade_status *skade_fn_acknowledge(const skade_txn *txn, const char *name, int64_t seq,
                                   struct ArrowArrayStream *result);
skade_status *skade_fn_consume_schema(const skade_txn *txn, const char *name, struct ArrowSchema *result);
// The consumer's pending rows (at most max_commits commits if >= 0); `advance`: the cursor's
// advance past them is staged in `txn` (it commits with it), a second such read of the consumer in
// the statement `statement` (DuckDB's query id) is an error. With nothing pending, waits up to
// wait_ms if >= 0. `columns` (n_columns of them) are the output columns the query uses: the others
// may be NULL. `n_batches` receives how many batches the stream has.
skade_status *skade_fn_consume(const skade_txn *txn, const char *name, int64_t max_commits, bool advance,
                               uint64_t statement, int64_t wait_ms, const uint64_t *columns, size_t n_columns,
                               skade_interrupted_fn interrupted, void *context, struct ArrowArrayStream *result,
                               size_t *n_batches);
// Waits up to timeout_ms for a commit after `since` (consumer non-NULL: of its tables, after its
// cursor): the rows of skade_commits_since, none after the timeout.
skade_status *skade_fn_wait(const skade_txn *txn, int64_t since, const char *consumer, int64_t timeout_ms,
                            skade_interrupted_fn interrupted, void *context, struct ArrowArrayStream *result);
// Reads every record of the catalog file and each table's metadata file: one row per part, with what is damaged.
skade_status *skade_fn_check(const skade_catalog *catalog, struct ArrowArrayStream *result);
// A log-resident catalog's commit log as this process sees it (no row for a plain catalog).
skade_status *skade_fn_commit_log(const skade_catalog *catalog, struct ArrowArrayStream *result);

#ifdef __cplusplus
}
#endif
