#!/bin/sh
# The PostgreSQL container's start: on the first start, a cluster in /data owned by `postgres`
# with the role `coderag` (password POSTGRES_PASSWORD, scram-sha-256 from any address) and the
# database `coderag`; then the server in the foreground as `postgres`.
set -eu
BIN=/usr/lib/postgresql/15/bin
PGDATA=/data/pgdata
as_postgres() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
# the server's socket folder, which a booted Debian makes through tmpfiles.d
mkdir -p /var/run/postgresql && chown postgres:postgres /var/run/postgresql
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD (CODERAG_DB_PASSWORD in compose)}"
  mkdir -p "$PGDATA" && chown postgres:postgres /data "$PGDATA"
  pw=$(mktemp) && printf '%s\n' "$POSTGRES_PASSWORD" > "$pw" && chown postgres "$pw"
  as_postgres "$BIN/initdb" -D "$PGDATA" -U coderag --pwfile="$pw" --auth=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 >/dev/null
  rm -f "$pw"
  printf 'host all all 0.0.0.0/0 scram-sha-256\nhost all all ::/0 scram-sha-256\n' \
    >> "$PGDATA/pg_hba.conf"
  echo "CREATE DATABASE coderag" | as_postgres "$BIN/postgres" --single -D "$PGDATA" postgres \
    >/dev/null
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups \
  "$BIN/postgres" -D "$PGDATA" -c listen_addresses="${PGHOST_LISTEN:-*}" -p "${PGPORT:-5432}"
