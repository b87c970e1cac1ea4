#!/usr/bin/env bash
# Credential retention: batched deletes on today's tables against dropping daily partitions,
# measured on the PostgreSQL of $BENCH_DATABASE_URL (an admin URL; a scratch database
# `retention_bench` is created there and dropped at the end). docs/credentials.md, "Retention",
# holds the figures of the last run.
#
#   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres bash apps/issuer/tests/bench/retention-cost.sh
#
# ROWS credentials (default 2,000,000) over DAYS days of expiry (default 20), 1 % revoked (with
# their feed rows); half of the days are then removed:
#   A. today's schema (jti primary key, revocations.jti referencing it), removed by the pruning
#      statement of CredentialStore.pruneExpired in batches of BATCH rows, then VACUUM, then the
#      same number of rows inserted again (does the table grow, or reuse the space?);
#   B. both tables range-partitioned by day of expires_at (the primary keys then have to carry
#      expires_at), removed by DETACH + DROP of the old partitions.
# Both also time LOOKUPS primary-key reads of a random jti (what introspection, revocation and
# relay assignment do), planned for each value as node-postgres' unnamed statements are (the jti
# does not say which partition holds it, so none is pruned).
set -euo pipefail
ADMIN_URL=${BENCH_DATABASE_URL:?set BENCH_DATABASE_URL (an admin connection URL)}
ROWS=${ROWS:-2000000}
DAYS=${DAYS:-20}
BATCH=${BATCH:-5000}
LOOKUPS=${LOOKUPS:-20000}
DB=retention_bench
URL=${ADMIN_URL%/*}/$DB
HALF=$((DAYS / 2))

psql -qX "$ADMIN_URL" -c "drop database if exists $DB" -c "create database $DB"
trap 'psql -qX "$ADMIN_URL" -c "drop database if exists $DB" >/dev/null' EXIT
q() { psql -qXAt -v ON_ERROR_STOP=1 "$URL" "$@"; }

# Rows: expiry spread evenly over DAYS days from 2026-01-01, an hour after issue.
ROWS_SQL="select 'crd_' || left(md5(i::text), 20), 'ten_' || (i % 50), 'prj_' || (i % 500), 'key_' || (i % 2000),
  'kid', 'live', 'relay:session',
  e - interval '1 hour', e, case when i % 100 = 0 then e - interval '30 minutes' end
  from (select i, timestamptz '2026-01-01' + (i::float8 / $ROWS) * interval '$DAYS days' as e
        from generate_series(1, $ROWS) i) g"
REVOKED_SQL="select jti, tenant_id, revoked_at, expires_at from credentials where revoked_at is not null order by revoked_at"

cols="jti text not null, tenant_id text not null, project_id text not null, api_key_id text not null,
  kid text not null, mode text not null, scopes text not null, issued_at timestamptz not null,
  expires_at timestamptz not null, revoked_at timestamptz"
indexes="create index on credentials (expires_at);
  create index on credentials (issued_at);
  create index on credentials (tenant_id, expires_at) where revoked_at is null;
  create index on credentials (project_id, issued_at, jti);"

lookups() {
  q <<SQL
set plan_cache_mode = force_custom_plan;
\\timing on
do \$\$ declare r timestamptz; j text; begin
  for i in 1..$LOOKUPS loop
    j := 'crd_' || left(md5((1 + (random() * ($ROWS - 1))::int)::text), 20);
    select revoked_at into r from credentials where jti = j;
  end loop; end \$\$;
SQL
}

measure() { # label, statement(s)
  local label=$1 start end t0 t1
  start=$(q -c 'checkpoint' -c 'select pg_current_wal_lsn()')
  t0=$(date +%s%N)
  q -c "$2"
  t1=$(date +%s%N)
  end=$(q -c 'select pg_current_wal_lsn()')
  local wal
  wal=$(q -c "select pg_wal_lsn_diff('$end', '$start')::bigint")
  printf '%-52s %8.2f s  WAL %8.1f MiB\n' "$label" "$(((t1 - t0) / 1000000))e-3" "$(echo "$wal / 1048576" | bc -l)"
}

sizes() {
  q -c "select pg_stat_force_next_flush()" >/dev/null
  q -c "select 'heap+toast ' || pg_size_pretty(sum(pg_table_size(c.oid))) || ', indexes ' || pg_size_pretty(sum(pg_indexes_size(c.oid)))
          from pg_class c join pg_namespace n on n.oid = c.relnamespace
          where n.nspname = 'public' and c.relkind = 'r' and c.relname like 'credentials%'" \
    -c "select 'live ' || sum(n_live_tup) || ', dead ' || sum(n_dead_tup) from pg_stat_user_tables where relname like 'credentials%'"
}

echo "== PostgreSQL $(q -c 'show server_version'), $ROWS rows over $DAYS days, $HALF days removed"
echo "== A. today's schema, batched deletes ($BATCH rows per transaction)"
q -c "create table credentials ($cols, primary key (jti), check (expires_at > issued_at))
  with (autovacuum_enabled = off)" -c "$indexes" \
  -c "create table revocations (sequence bigserial primary key, jti text not null unique references credentials (jti),
        tenant_id text not null, revoked_at timestamptz not null, expires_at timestamptz not null)
      with (autovacuum_enabled = off)"
measure "insert $ROWS rows" "insert into credentials $ROWS_SQL; insert into revocations (jti, tenant_id, revoked_at, expires_at) $REVOKED_SQL"
sizes
lookups | grep -i '^time' | sed 's/^/lookups: /'
CUTOFF="timestamptz '2026-01-01' + interval '$HALF days'"
measure "batched delete of days 1-$HALF" "do \$\$ declare n int; begin loop
  with doomed as (select jti from credentials where expires_at < $CUTOFF order by expires_at limit $BATCH for update skip locked),
    feed as (delete from revocations r using doomed d where r.jti = d.jti returning 1),
    gone as (delete from credentials c using doomed d where c.jti = d.jti returning 1)
  select count(*) into n from gone;
  commit; exit when n < $BATCH; end loop; end \$\$"
sizes
measure "vacuum (what autovacuum does after it)" "vacuum credentials, revocations"
sizes
measure "insert as many rows again" "insert into credentials select 'crd_' || left(md5((i + $ROWS)::text), 20),
  'ten_' || (i % 50), 'prj_' || (i % 500), 'key_' || (i % 2000), 'kid', 'live', 'relay:session',
  e - interval '1 hour', e, null
  from (select i, timestamptz '2026-01-01' + interval '$DAYS days' + (i::float8 / $ROWS) * interval '$DAYS days' as e
        from generate_series(1, $ROWS / 2) i) g"
sizes
q -c 'drop table revocations, credentials'

echo "== B. partitioned by day of expires_at, old partitions detached and dropped"
q -c "create table credentials ($cols, primary key (jti, expires_at), check (expires_at > issued_at)) partition by range (expires_at)" \
  -c "$indexes" \
  -c "create table revocations (sequence bigserial, jti text not null, tenant_id text not null, revoked_at timestamptz not null,
        expires_at timestamptz not null, primary key (sequence, expires_at), unique (jti, expires_at),
        foreign key (jti, expires_at) references credentials (jti, expires_at)) partition by range (expires_at)"
for ((d = 0; d < DAYS + 2; d++)); do
  from=$(date -u -d "2026-01-01 +$d days" +%F)
  to=$(date -u -d "2026-01-01 +$((d + 1)) days" +%F)
  tag=${from//-/}
  q -c "create table credentials_$tag partition of credentials for values from ('$from') to ('$to') with (autovacuum_enabled = off)" \
    -c "create table revocations_$tag partition of revocations for values from ('$from') to ('$to') with (autovacuum_enabled = off)"
done
measure "insert $ROWS rows" "insert into credentials $ROWS_SQL; insert into revocations (jti, tenant_id, revoked_at, expires_at) $REVOKED_SQL"
sizes
lookups | grep -i '^time' | sed "s/^/lookups ($((DAYS + 2)) partitions): /"
drops=""
for ((d = 0; d < HALF; d++)); do
  tag=$(date -u -d "2026-01-01 +$d days" +%Y%m%d)
  drops+="alter table revocations detach partition revocations_$tag; drop table revocations_$tag;
    alter table credentials detach partition credentials_$tag; drop table credentials_$tag; "
done
measure "detach + drop of days 1-$HALF" "$drops"
sizes
