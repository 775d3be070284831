-- sqlite holding a table of 300,000 rows in memory (:memory:): its page cache (4 KiB pages and
-- their headers), indexes built, rows grouped, updated and deleted.
CREATE TABLE t(id INTEGER PRIMARY KEY, a TEXT, b INTEGER, c TEXT);
WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 300000)
INSERT INTO t SELECT i, printf('name-%d-%s', i, hex(randomblob(8))), abs(random()) % 1000,
  hex(randomblob(20)) FROM r;
CREATE INDEX ta ON t(a);
CREATE INDEX tb ON t(b, c);
SELECT count(*), sum(length(a)) FROM t WHERE b < 500;
SELECT b, count(*), length(group_concat(substr(c, 1, 4))) FROM t GROUP BY b ORDER BY 2 DESC LIMIT 3;
UPDATE t SET c = c || a WHERE b % 3 = 0;
DELETE FROM t WHERE b % 5 = 0;
SELECT count(DISTINCT substr(a, 1, 9)) FROM t;
