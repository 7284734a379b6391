#!/bin/sh
# Make the PostgreSQL 15 cluster of the mcp sandbox (build time, as root): a cluster in
# /var/lib/postgresql/15/main with its configuration inside (the root filesystem of a sandbox
# is read-only), the database `shop` filled by shop_data.py, and the role `mcp` that may read
# it (the URL server-postgres gets: postgresql://mcp@127.0.0.1:5432/shop, trust on loopback).
# The cluster is stopped cleanly at the end, so a sandbox starts it without recovery.
set -eu
PGBIN=/usr/lib/postgresql/15/bin
PGDATA=/var/lib/postgresql/15/main
install -d -o postgres -g postgres -m 700 "$PGDATA"
# 1 MB WAL segments and a small min_wal_size: the cluster is copied onto every sandbox's
# disk, and 16 MB segments would be most of it.
runuser -u postgres -- "$PGBIN/initdb" -D "$PGDATA" --username=postgres --auth=trust \
    --encoding=UTF8 --locale=C.UTF-8 --wal-segsize=1 >/dev/null
cat >> "$PGDATA/postgresql.conf" <<'CONF'

# worldtrace mcp sandbox
listen_addresses = '127.0.0.1'
port = 5432
unix_socket_directories = '/run/postgresql'
max_connections = 20
shared_buffers = 32MB
min_wal_size = 4MB
max_wal_size = 64MB
# A sandbox lives for one episode: nothing to recover after a crash, so no flushes to wait for.
fsync = off
synchronous_commit = off
full_page_writes = off
timezone = 'UTC'
log_timezone = 'UTC'
CONF
sh /opt/worldtrace/start_postgres.sh
psql() { runuser -u postgres -- /usr/lib/postgresql/15/bin/psql -X -q -v ON_ERROR_STOP=1 -h /run/postgresql "$@"; }
psql -d postgres -c "CREATE ROLE mcp LOGIN" -c "CREATE DATABASE shop"
python3 /opt/worldtrace/seed/shop_data.py | psql -d shop
psql -d shop \
    -c "REVOKE CREATE ON SCHEMA public FROM PUBLIC" \
    -c "GRANT CONNECT ON DATABASE shop TO mcp" \
    -c "GRANT USAGE ON SCHEMA public TO mcp" \
    -c "GRANT SELECT ON ALL TABLES IN SCHEMA public TO mcp" \
    -c "ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO mcp" \
    -c "VACUUM (ANALYZE, FREEZE)"
psql -d postgres -c "CHECKPOINT"
runuser -u postgres -- "$PGBIN/pg_ctl" -D "$PGDATA" -m fast -w -s stop
rm -f "$PGDATA/server.log"
