-- The demo `make` runs in each DuckDB it builds for: the DuckDB CLI for 1.5.5 (`duckdb -unsigned`),
-- tools/demo.py for 2.0.1, each in build/demo/v<version>/. It installs skade from the local
-- repository `make` lays out.
SET extension_directory = 'extensions';
FORCE INSTALL skade FROM '../../repository';
LOAD skade;
ATTACH 'lake.skade' AS lake (TYPE skade);
CREATE TABLE lake.orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount DOUBLE);
INSERT INTO lake.orders VALUES (1, 'a', 10), (2, 'b', 20);
INSERT INTO lake.orders SELECT i, 'c' || (i % 7), i * 1.5 FROM range(3, 1000) t(i);
UPDATE lake.orders SET amount = 25 WHERE id = 2;
DELETE FROM lake.orders WHERE id = 3;
SELECT version() AS duckdb, count(*) AS orders, sum(amount) AS total FROM lake.orders;
SELECT * FROM lake.orders WHERE id <= 3 ORDER BY id;
SELECT * FROM lake.orders AT (VERSION => 1) ORDER BY id;
SELECT id, amount, _change_type, _commit_snapshot_id FROM skade_changelog('lake.orders', 2) ORDER BY ALL;
SELECT * FROM skade_lookup('lake.orders', [2, 3, 500]);
SELECT lookups, keys, rows_found, reads FROM skade_lookup_stats();
SELECT * FROM skade_compact('lake.orders');
SELECT schema_name, table_name, kind, current_snapshot_id FROM skade_tables('lake');
SELECT commit_seq, table_name, snapshot_id, operation FROM skade_commits_since('lake', 0);
