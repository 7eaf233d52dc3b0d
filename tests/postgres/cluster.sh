#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the PostgreSQL store's tests (issue 35).
#
#   bash tests/postgres/cluster.sh start    # initdb on first use, start, print the URL
#   bash tests/postgres/cluster.sh url      # print the URL (postgres://openphone@127.0.0.1:PORT/openphone)
#   bash tests/postgres/cluster.sh status   # exit 0 when running
#   bash tests/postgres/cluster.sh restart  # pg_ctl restart (same port, same data)
#   bash tests/postgres/cluster.sh stop
#
# Data in $OPENPHONE_PG_DIR (default $PWD/.cache/pg): data/ (the cluster), port, log, and the Unix
# socket (.s.PGSQL.PORT). Port: $OPENPHONE_PG_PORT, else 55432, else the next free one; chosen
# once at initdb and kept in $DIR/port. Listens on 127.0.0.1 and the socket only.
# Authentication: trust on loopback and the socket, except members of the role
# `openphone_password_users`, who must give their password (scram-sha-256): the tests create such a
# login to exercise the password-from-file path. fsync and synchronous_commit stay on: the
# store's tests are durability tests. OPENPHONE_PG_TLS=1 at the first start: TLS only on TCP,
# with a test CA in $DIR/ca.crt (see make_certs).
# As root (CI), initdb/pg_ctl refuse to run, so they run as the `postgres` user (else `nobody`)
# through runuser, setpriv or su, whichever exists; the cluster directory is given to that user.
set -euo pipefail

DIR=${OPENPHONE_PG_DIR:-$PWD/.cache/pg}
DATA=$DIR/data
USER_NAME=openphone
DB_NAME=openphone

die() { echo "cluster.sh: $*" >&2; exit 1; }

find_bindir() {
    local d
    if command -v pg_config >/dev/null 2>&1; then
        d=$(pg_config --bindir 2>/dev/null || true)
        if [[ -n $d && -x $d/initdb && -x $d/pg_ctl ]]; then echo "$d"; return; fi
    fi
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [[ -x $d/initdb && -x $d/pg_ctl ]]; then echo "$d"; return; fi
    done
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(command -v initdb)"; return
    fi
    die "no PostgreSQL server binaries found (looked at pg_config --bindir, /usr/lib/postgresql/*/bin, PATH). Install them: apt-get install -y postgresql"
}

# The user the server runs as: ourselves, or (as root) postgres/nobody.
RUN_USER=""
if [[ $(id -u) -eq 0 ]]; then
    if getent passwd postgres >/dev/null; then RUN_USER=postgres
    elif getent passwd nobody >/dev/null; then RUN_USER=nobody
    else die "running as root and neither user postgres nor nobody exists (initdb refuses root)"; fi
fi

as_server_user() {
    if [[ -z $RUN_USER ]]; then "$@"; return; fi
    if command -v runuser >/dev/null 2>&1; then runuser -u "$RUN_USER" -- "$@"
    elif command -v setpriv >/dev/null 2>&1; then
        setpriv --reuid="$RUN_USER" --regid="$(id -g "$RUN_USER")" --init-groups -- "$@"
    elif command -v su >/dev/null 2>&1; then
        su -s /bin/sh "$RUN_USER" -c "$(printf '%q ' "$@")"
    else die "running as root and none of runuser, setpriv, su exists to drop to $RUN_USER"; fi
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pick_port() {
    if [[ -n ${OPENPHONE_PG_PORT:-} ]]; then
        port_busy "$OPENPHONE_PG_PORT" && die "OPENPHONE_PG_PORT=$OPENPHONE_PG_PORT is in use on 127.0.0.1"
        echo "$OPENPHONE_PG_PORT"; return
    fi
    local p
    for p in $(seq 55432 55531); do
        if ! port_busy "$p"; then echo "$p"; return; fi
    done
    die "no free port in 55432..55531 on 127.0.0.1 (set OPENPHONE_PG_PORT)"
}

port() { [[ -f $DIR/port ]] || die "no cluster in $DIR (run: bash tests/postgres/cluster.sh start)"; cat "$DIR/port"; }
url() { local p; p=$(port); echo "postgres://$USER_NAME@127.0.0.1:$p/$DB_NAME"; }

running() { [[ -f $DATA/PG_VERSION ]] && as_server_user "$BIN/pg_ctl" status -D "$DATA" >/dev/null 2>&1; }

# OPENPHONE_PG_TLS=1 at first start: a test CA ($DIR/ca.crt) and a server certificate for
# localhost and 127.0.0.1 signed by it; TCP then accepts TLS connections only (hostssl).
make_certs() {
    command -v openssl >/dev/null 2>&1 || die "OPENPHONE_PG_TLS needs openssl"
    (
        cd "$DIR"
        openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=openphone test CA" \
            -keyout ca.key -out ca.crt -addext basicConstraints=critical,CA:TRUE \
            -addext keyUsage=critical,keyCertSign,cRLSign
        openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\n' >server.ext
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
            -extfile server.ext -out server.crt
        rm -f server.csr server.ext ca.key ca.srl
    ) >"$DIR/certs.log" 2>&1 || { cat "$DIR/certs.log" >&2; die "making the test certificates failed"; }
    chmod 600 "$DIR/server.key"
    [[ -n $RUN_USER ]] && chown "$RUN_USER" "$DIR/server.key" "$DIR/server.crt"
    return 0
}

init_cluster() {
    mkdir -p "$DIR"
    [[ -n $RUN_USER ]] && chown "$RUN_USER" "$DIR"
    as_server_user test -w "$DIR" || die "$DIR is not writable by ${RUN_USER:-$(id -un)} (is every parent directory traversable?)"
    local p; p=$(pick_port)
    as_server_user "$BIN/initdb" -D "$DATA" -U "$USER_NAME" -E UTF8 --locale=C \
        --auth-local=trust --auth-host=trust >"$DIR/initdb.log" 2>&1 \
        || { cat "$DIR/initdb.log" >&2; die "initdb failed"; }
    as_server_user tee -a "$DATA/postgresql.conf" >/dev/null <<CONF

# tests/postgres/cluster.sh
listen_addresses = '127.0.0.1'
port = $p
unix_socket_directories = '$DIR'
max_connections = 300
fsync = on
synchronous_commit = on
full_page_writes = on
password_encryption = 'scram-sha-256'
log_min_messages = warning
CONF
    local host=host
    if [[ -n ${OPENPHONE_PG_TLS:-} ]]; then
        make_certs
        host=hostssl
        as_server_user tee -a "$DATA/postgresql.conf" >/dev/null <<CONF
ssl = on
ssl_cert_file = '$DIR/server.crt'
ssl_key_file = '$DIR/server.key'
CONF
    fi
    as_server_user tee "$DATA/pg_hba.conf" >/dev/null <<HBA
# tests/postgres/cluster.sh: loopback and the socket only. Members of openphone_password_users
# must give their password; everyone else is trusted (a throwaway test cluster).
local all +openphone_password_users scram-sha-256
$host all +openphone_password_users 127.0.0.1/32 scram-sha-256
local all all trust
$host all all 127.0.0.1/32 trust
HBA
    echo "$p" >"$DIR/port"
}

start() {
    if [[ ! -f $DATA/PG_VERSION ]]; then init_cluster; fi
    if running; then url; return; fi
    local p; p=$(port)
    port_busy "$p" && die "port $p (from $DIR/port) is in use by another process"
    as_server_user "$BIN/pg_ctl" start -w -t 60 -D "$DATA" -l "$DIR/log" >/dev/null \
        || { tail -n 30 "$DIR/log" >&2 || true; die "pg_ctl start failed (log: $DIR/log)"; }
    local psql=("$BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$p" -U "$USER_NAME")
    if ! as_server_user "${psql[@]}" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$DB_NAME'" | grep -q 1; then
        as_server_user "${psql[@]}" -d postgres -c "CREATE DATABASE $DB_NAME"
    fi
    as_server_user "${psql[@]}" -d "$DB_NAME" -c "DO \$\$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'openphone_password_users') THEN
            CREATE ROLE openphone_password_users NOLOGIN;
        END IF; END \$\$;"
    url
}

BIN=$(find_bindir)
case ${1:-} in
start) start ;;
stop)
    if running; then as_server_user "$BIN/pg_ctl" stop -w -m fast -D "$DATA" >/dev/null; fi ;;
restart)
    running || die "not running (start it first)"
    as_server_user "$BIN/pg_ctl" restart -w -t 60 -m fast -D "$DATA" -l "$DIR/log" >/dev/null \
        || { tail -n 30 "$DIR/log" >&2 || true; die "pg_ctl restart failed (log: $DIR/log)"; } ;;
url) url ;;
status)
    if running; then echo "running: $(url) (data $DATA)"; else echo "not running (data $DATA)"; exit 1; fi ;;
*) echo "usage: bash tests/postgres/cluster.sh start|stop|restart|url|status" >&2; exit 2 ;;
esac
