-- The PostgreSQL store's history reads: schema v1's index and statement against v2's (issue 14).
-- Run against a scratch database (it creates and drops the schemas bench_v1 and bench_v2):
--   scripts/postgres-local.sh start && scripts/postgres-local.sh psql -f Benchmarks/postgres/history-reads.sql
-- Each schema holds 5,000 ordinary cards with 12 records each (a fifth auxiliary, stored in random order) and one
-- heavy card with 5,000 primary records and 10 auxiliary ones. It prints the mean time of a 60-card read, then the
-- plan of the heavy card's auxiliary view: with v1, "Rows Removed by Filter" is every primary record it read.
\set QUIET on
DROP SCHEMA IF EXISTS bench_v1 CASCADE;
DROP SCHEMA IF EXISTS bench_v2 CASCADE;
CREATE SCHEMA bench_v1;
CREATE TABLE bench_v1.transactions (
    stored_sequence bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    digital_card_id text COLLATE "C" NOT NULL, record_id text COLLATE "C" NOT NULL, date text NOT NULL,
    instant double precision NOT NULL, status text NOT NULL, type text NOT NULL, currency_code text NOT NULL,
    amount text NOT NULL, display_amount text, merchant_name text, merchant_type text, merchant_postal_code text,
    terminal_id text, merchant_id text, is_auxiliary boolean NOT NULL, UNIQUE (digital_card_id, record_id));
INSERT INTO bench_v1.transactions (digital_card_id, record_id, date, instant, status, type, currency_code, amount,
                                   merchant_name, is_auxiliary)
SELECT 'DC-' || c, 'r' || i, '2026-01-01T00:00:00Z', 1.7e9 + random() * 1e6, 'approved', 'purchase', 'EUR', '12.50',
       'Shop', random() < 0.2
FROM generate_series(1, 5000) AS c, generate_series(1, 12) AS i ORDER BY random();
INSERT INTO bench_v1.transactions (digital_card_id, record_id, date, instant, status, type, currency_code, amount,
                                   merchant_name, is_auxiliary)
SELECT 'DC-HEAVY', 'r' || i, '2026-01-01T00:00:00Z', 1.7e9 + i * 60, 'approved', 'purchase', 'EUR', '12.50', 'Shop',
       i <= 10
FROM generate_series(1, 5010) AS i;
CREATE SCHEMA bench_v2;
CREATE TABLE bench_v2.transactions AS SELECT * FROM bench_v1.transactions;
CREATE INDEX transactions_newest_first
    ON bench_v1.transactions (digital_card_id, instant DESC, stored_sequence DESC);
CREATE INDEX transactions_newest_first_by_kind
    ON bench_v2.transactions (digital_card_id, is_auxiliary, instant DESC, stored_sequence DESC);
VACUUM ANALYZE bench_v1.transactions;
VACUUM ANALYZE bench_v2.transactions;
-- Each version's statement, once: v1's as it was, v2's as PostgresBatchStatements.newestTransactions has it.
CREATE TABLE bench_v1.statement AS SELECT $v1$
SELECT k.ordinal, t.record_id, t.date, t.instant, t.status, t.type, t.currency_code, t.amount,
       t.display_amount, t.merchant_name, t.merchant_type, t.merchant_postal_code, t.terminal_id,
       t.merchant_id, t.is_auxiliary
FROM unnest($1::text[], $2::bool[], $3::int8[]) WITH ORDINALITY AS k(digital_card_id, auxiliary, row_limit, ordinal)
CROSS JOIN LATERAL (
    SELECT * FROM transactions AS t
    WHERE t.digital_card_id = k.digital_card_id AND (k.auxiliary IS NULL OR t.is_auxiliary = k.auxiliary)
    ORDER BY t.instant DESC, t.stored_sequence DESC
    LIMIT k.row_limit
) AS t
ORDER BY k.ordinal, t.instant DESC, t.stored_sequence DESC
$v1$::text AS sql;
CREATE TABLE bench_v2.statement AS SELECT $v2$
SELECT k.ordinal, t.record_id, t.date, t.instant, t.status, t.type, t.currency_code, t.amount,
       t.display_amount, t.merchant_name, t.merchant_type, t.merchant_postal_code, t.terminal_id,
       t.merchant_id, t.is_auxiliary
FROM unnest($1::text[], $2::bool[], $3::int8[]) WITH ORDINALITY AS k(digital_card_id, auxiliary, row_limit, ordinal)
CROSS JOIN LATERAL (
    SELECT * FROM (
        (SELECT * FROM transactions AS p
         WHERE p.digital_card_id = k.digital_card_id AND NOT p.is_auxiliary AND k.auxiliary IS NOT TRUE
         ORDER BY p.instant DESC, p.stored_sequence DESC
         LIMIT k.row_limit)
        UNION ALL
        (SELECT * FROM transactions AS a
         WHERE a.digital_card_id = k.digital_card_id AND a.is_auxiliary AND k.auxiliary IS NOT FALSE
         ORDER BY a.instant DESC, a.stored_sequence DESC
         LIMIT k.row_limit)
    ) AS both_kinds
    ORDER BY both_kinds.instant DESC, both_kinds.stored_sequence DESC
    LIMIT k.row_limit
) AS t
ORDER BY k.ordinal, t.instant DESC, t.stored_sequence DESC

$v2$::text AS sql;
\set QUIET off
-- Two rounds, each version in turn: the mean of a 60-card read (planning included, as the store sends it), then the
-- plan of the heavy card's auxiliary view.
DO $$
DECLARE
  version text; statement text; started timestamptz; total interval; line text;
  cards text[]; kinds bool[]; limits int8[]; n int;
BEGIN
  FOR round IN 1..2 LOOP
    FOREACH version IN ARRAY ARRAY['v1', 'v2'] LOOP
      PERFORM set_config('search_path', 'bench_' || version, true);
      SELECT sql INTO statement FROM statement;
      PERFORM setseed(0.5);
      total := '0';
      FOR i IN 1..110 LOOP
        -- 60 history reads of random ordinary cards: 60% of both kinds, 20% primary, 20% auxiliary.
        SELECT array_agg('DC-' || (1 + floor(random() * 5000))::int),
               array_agg(CASE WHEN random() < 0.6 THEN NULL ELSE random() < 0.5 END), array_agg(10::int8)
          INTO cards, kinds, limits FROM generate_series(1, 60);
        started := clock_timestamp();
        EXECUTE 'SELECT count(*) FROM (' || statement || ') AS x' INTO n USING cards, kinds, limits;
        IF i > 10 THEN total := total + (clock_timestamp() - started); END IF;
      END LOOP;
      RAISE NOTICE 'round %, %: % ms per statement of 60 ordinary cards (planning included, mean of 100)',
        round, version, round(extract(epoch from total) * 10, 3);
      RAISE NOTICE 'round %, %: the heavy card''s auxiliary view:', round, version;
      FOR line IN EXECUTE 'EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, SUMMARY OFF, TIMING OFF) ' || statement
        USING ARRAY['DC-HEAVY'], ARRAY[true], ARRAY[10::int8]
      LOOP
        RAISE NOTICE '%', line;
      END LOOP;
    END LOOP;
  END LOOP;
END $$;
DROP SCHEMA bench_v1 CASCADE;
DROP SCHEMA bench_v2 CASCADE;
