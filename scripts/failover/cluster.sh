#!/usr/bin/env bash
# A two-node PostgreSQL 15 cluster under Patroni, on this machine, for failover tests.
#
#   cluster.sh up            install what is missing, start etcd, two Patroni nodes and
#                            HAProxy; wait until only the leader serves behind HAProxy
#                            and the other node is its synchronous standby; print the
#                            front's connection string (the only line on stdout)
#   cluster.sh down          stop everything and remove the data (idempotent)
#   cluster.sh status        one line per node and the front; exit 0 when the front serves
#   cluster.sh url           print the front's connection string
#   cluster.sh kill-primary  kill -9 the leader's postmaster; print "<node> <pid>"
#   cluster.sh switchover    graceful switchover to the standby; wait until the front
#                            routes to it; print the new leader's name
#   cluster.sh primary-pid   print "<node> <pid>" of the leader's postmaster, for a caller
#                            that kills it itself without waiting for this script
#   cluster.sh settle        wait (up to 90 s) until there is a leader, the other node is its
#                            synchronous standby again and the front routes to the leader
#                            only: the state a failover test starts its next fault from
#   cluster.sh install       install what is missing (as `up` does) and start nothing
#   cluster.sh leader        print the leader's name (empty when there is none)
#   cluster.sh node-url NAME print a node's own connection string (not through HAProxy)
#
# Exit codes: 0 done; 1 failed (a failed `up` prints the end of the log at fault and
# takes down what it started);
# 2 usage; 3 the cluster cannot be had here (binaries missing and no root or
# apt-get to install them): a test treats 3 as "skip".
#
# Knobs: IDEMPO_FAILOVER_PORT (first of the ports it uses, default 15430: the front
# on +0, PostgreSQL on +1 and +2, Patroni's REST API on +11 and +12, etcd on +21
# and +22), IDEMPO_FAILOVER_DIR (state folder, default $TMPDIR/idempo-failover-<port>),
# IDEMPO_FAILOVER_SYNC (default on; off runs asynchronous replication, to show what
# a failover then loses: the failover test is expected to fail that way).
#
# What it sets and why (docs/operations.md says more):
# - synchronous_mode: every acknowledged commit is on the standby before the
#   client hears of it, so a promoted standby has it.
# - ttl 10, loop_wait 2, retry_timeout 4 (loop_wait + 2 x retry_timeout <= ttl):
#   failover within seconds, not the defaults' half minute.
# - primary_start_timeout 0: a crashed primary fails over at once instead of
#   being restarted in place.
# - Patroni runs under `tini -s`, a subreaper: a killed postmaster is reaped at
#   once instead of staying a zombie that looks alive to Patroni.
# - HAProxy checks `OPTIONS /primary` on Patroni's REST port, marks a server down
#   on its first layer-4 error and closes the sessions of a server marked down.
# - Nothing is started through the packages' systemd units, and installing never
#   upgrades what is already there (the machine's own PostgreSQL stays as it is).
set -uo pipefail

PORT="${IDEMPO_FAILOVER_PORT:-15430}"
DIR="${IDEMPO_FAILOVER_DIR:-${TMPDIR:-/tmp}/idempo-failover-$PORT}"
FRONT_PORT="$PORT"
ETCD_PORT=$((PORT + 21))
ETCD_PEER_PORT=$((PORT + 22))
STATS_PORT=$((PORT + 9))
NODES=(node1 node2)
SCOPE="idempo-failover-$PORT"
SYNC="${IDEMPO_FAILOVER_SYNC:-on}"
[ "$SYNC" = on ] || [ "$SYNC" = off ] || { echo "[cluster] IDEMPO_FAILOVER_SYNC must be on or off" >&2; exit 2; }
PACKAGES=(patroni etcd-server haproxy tini curl)

log() { printf '[cluster] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
# A failed `up` shows the end of the log it names, then leaves nothing running.
fail_up() { # message log-name
  log "$1; the end of $2.log:"
  tail -n 30 "$DIR/$2.log" >&2 2>/dev/null || true
  cmd_down >/dev/null 2>&1
  exit 1
}

pg_port() { case "$1" in node1) echo $((PORT + 1)) ;; node2) echo $((PORT + 2)) ;; esac; }
rest_port() { case "$1" in node1) echo $((PORT + 11)) ;; node2) echo $((PORT + 12)) ;; esac; }
front_url() { echo "postgres://postgres@127.0.0.1:$FRONT_PORT/postgres"; }
node_url() { echo "postgres://postgres@127.0.0.1:$(pg_port "$1")/postgres"; }

pg_bin() { find /usr/lib/postgresql -maxdepth 3 -path '*/15/bin' -type d 2>/dev/null | head -n 1; }

have_all() {
  command -v patroni >/dev/null && command -v etcd >/dev/null && command -v haproxy >/dev/null &&
    command -v tini >/dev/null && command -v curl >/dev/null && [ -n "$(pg_bin)" ]
}

# Install what is missing, never upgrading what is there, never starting a service.
ensure_installed() {
  have_all && return 0
  if [ -z "$(pg_bin)" ]; then
    log "PostgreSQL 15's server binaries are missing (this script never installs or upgrades PostgreSQL)"
    exit 3
  fi
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    log "patroni, etcd, haproxy or tini is missing and cannot be installed here (needs root and apt-get)"
    exit 3
  fi
  log "installing ${PACKAGES[*]} (apt-get --no-upgrade)"
  # policy-rc.d answering 101 keeps the packages' scripts from starting their services.
  local own_policy=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && own_policy=1
  fi
  local rc=0
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade --no-install-recommends "${PACKAGES[@]}" \
    >"${TMPDIR:-/tmp}/idempo-failover-apt.log" 2>&1; then
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-upgrade --no-install-recommends "${PACKAGES[@]}" \
      >"${TMPDIR:-/tmp}/idempo-failover-apt.log" 2>&1 || rc=$?
  fi
  [ -z "$own_policy" ] || rm -f /usr/sbin/policy-rc.d
  if [ "$rc" != 0 ] || ! have_all; then
    log "installing failed; see ${TMPDIR:-/tmp}/idempo-failover-apt.log"
    exit 3
  fi
}

# A pid is alive when it exists and is not a zombie.
alive() {
  local state
  state="$(ps -o stat= -p "$1" 2>/dev/null)" || return 1
  [ -n "$state" ] && [ "${state:0:1}" != Z ]
}

pid_of() { [ -f "$DIR/$1.pid" ] && cat "$DIR/$1.pid"; }

# Run a command detached, as the postgres user when we are root (PostgreSQL refuses root).
spawn() { # name command...
  local name="$1"
  shift
  if [ "$(id -u)" = 0 ]; then
    setsid setpriv --reuid=postgres --regid=postgres --init-groups -- "$@" >"$DIR/$name.log" 2>&1 </dev/null &
  else
    setsid "$@" >"$DIR/$name.log" 2>&1 </dev/null &
  fi
  echo $! >"$DIR/$name.pid"
}

# Poll a check every 0.2 s; give up after `seconds`, or at once when the process named
# by WATCH (a spawned one) has exited.
WATCH=""
wait_until() { # seconds description command...
  local seconds="$1" what="$2"
  shift 2
  local end=$((SECONDS + seconds))
  until "$@"; do
    [ "$SECONDS" -lt "$end" ] || return 1
    [ -z "$WATCH" ] || alive "$(pid_of "$WATCH")" || return 1
    sleep 0.2
  done
  log "$what"
}

port_in_use() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

rest() { # node path [method]
  curl -s -o /dev/null -w '%{http_code}' -m 1 -X "${3:-GET}" "http://127.0.0.1:$(rest_port "$1")$2" 2>/dev/null
}
is_primary() { [ "$(rest "$1" /primary)" = 200 ]; }
is_sync_standby() { [ "$(rest "$1" /sync)" = 200 ]; }
# The standby up and streaming: synchronous when SYNC is on.
is_standby() { if [ "$SYNC" = on ]; then is_sync_standby "$1"; else [ "$(rest "$1" /replica)" = 200 ]; fi; }
etcd_healthy() { curl -s -m 1 "http://127.0.0.1:$ETCD_PORT/health" 2>/dev/null | grep -q '"health":"true"'; }

# HAProxy's view: "node1=UP node2=DOWN" from its CSV stats page.
front_view() {
  curl -s -m 1 "http://127.0.0.1:$STATS_PORT/stats;csv" 2>/dev/null |
    awk -F, '$1 == "primary" && $2 ~ /^node/ { printf "%s=%s ", $2, $18 }'
}
front_routes_to() { # node: only that node is UP behind the front
  local view
  view="$(front_view)"
  [[ "$view" == *"$1=UP"* ]] && [[ "$(grep -o '=UP' <<<"$view" | wc -l)" == 1 ]]
}

leader() {
  local n
  for n in "${NODES[@]}"; do
    if is_primary "$n"; then
      echo "$n"
      return 0
    fi
  done
  return 1
}
other() { [ "$1" = node1 ] && echo node2 || echo node1; }

write_etcd() {
  mkdir -p "$DIR/etcd"
  chown -R postgres:postgres "$DIR/etcd" 2>/dev/null || true
}

write_patroni() { # node
  local n="$1" bin
  bin="$(pg_bin)"
  mkdir -p "$DIR/$n"
  chmod 700 "$DIR/$n"
  cat >"$DIR/$n.yml" <<EOF
scope: $SCOPE
name: $n
log:
  level: INFO
restapi:
  listen: 127.0.0.1:$(rest_port "$n")
  connect_address: 127.0.0.1:$(rest_port "$n")
etcd3:
  hosts: 127.0.0.1:$ETCD_PORT
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 2
    retry_timeout: 4
    maximum_lag_on_failover: 1048576
    primary_start_timeout: 0
    synchronous_mode: $([ "$SYNC" = on ] && echo true || echo false)
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        wal_level: replica
        hot_standby: "on"
        wal_log_hints: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        max_connections: 200
        wal_retrieve_retry_interval: 500ms
  initdb:
    - encoding: UTF8
    - locale: C.UTF-8
  pg_hba:
    - local all all trust
    - local replication all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$(pg_port "$n")
  connect_address: 127.0.0.1:$(pg_port "$n")
  data_dir: $DIR/$n/data
  bin_dir: $bin
  pgpass: $DIR/$n/pgpass
  authentication:
    superuser:
      username: postgres
      password: postgres
    replication:
      username: replicator
      password: replicator
  parameters:
    unix_socket_directories: $DIR/$n
tags:
  nofailover: false
  noloadbalance: false
  clonefrom: false
  nosync: false
EOF
  chown -R postgres:postgres "$DIR/$n" "$DIR/$n.yml" 2>/dev/null || true
}

write_haproxy() {
  local n servers=""
  for n in "${NODES[@]}"; do
    servers+="  server $n 127.0.0.1:$(pg_port "$n") maxconn 200 check port $(rest_port "$n")"$'\n'
  done
  cat >"$DIR/haproxy.cfg" <<EOF
global
  maxconn 400
defaults
  mode tcp
  retries 2
  timeout connect 300ms
  timeout client 30m
  timeout server 30m
  timeout check 1s
  option redispatch 1
listen stats
  mode http
  bind 127.0.0.1:$STATS_PORT
  stats enable
  stats uri /stats
listen primary
  bind 127.0.0.1:$FRONT_PORT
  option httpchk OPTIONS /primary
  http-check expect status 200
  default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions observe layer4 error-limit 1 on-error mark-down
$servers
EOF
}

start_patroni() { # node
  spawn "$1" tini -s -- patroni "$DIR/$1.yml"
}

cmd_up() {
  ensure_installed
  if [ -f "$DIR/haproxy.pid" ] && alive "$(pid_of haproxy)" && leader >/dev/null; then
    log "already up"
    front_url
    return 0
  fi
  cmd_down >/dev/null 2>&1
  id postgres >/dev/null 2>&1 || [ "$(id -u)" != 0 ] || useradd --system --user-group --no-create-home postgres
  mkdir -p "$DIR"
  chmod 755 "$DIR"
  [ "$(id -u)" != 0 ] || chown postgres:postgres "$DIR"
  local started=$SECONDS p
  for p in "$FRONT_PORT" "$STATS_PORT" "$(pg_port node1)" "$(pg_port node2)" "$(rest_port node1)" \
    "$(rest_port node2)" "$ETCD_PORT" "$ETCD_PEER_PORT"; do
    if port_in_use "$p"; then
      log "port $p is in use (IDEMPO_FAILOVER_PORT moves the cluster's ports)"
      exit 1
    fi
  done

  write_etcd
  spawn etcd etcd --name etcd0 --data-dir "$DIR/etcd/data" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "etcd0=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new --enable-v2=false
  WATCH=etcd wait_until 30 "etcd up" etcd_healthy || fail_up "etcd did not come up" etcd

  write_patroni node1
  start_patroni node1
  # Generous: node1 bootstraps (initdb) first, which took over a minute while every suite ran at once.
  WATCH=node1 wait_until 240 "node1 is the leader" is_primary node1 || fail_up "node1 did not become the leader" node1
  write_patroni node2
  start_patroni node2
  WATCH=node2 wait_until 240 "node2 is the standby (synchronous replication $SYNC)" is_standby node2 ||
    fail_up "node2 did not become the standby" node2

  write_haproxy
  spawn haproxy haproxy -f "$DIR/haproxy.cfg" -db
  # HAProxy starts with every server up: the workload waits until only the leader is.
  WATCH=haproxy wait_until 30 "HAProxy routes to node1 only" front_routes_to node1 || fail_up "HAProxy did not settle" haproxy
  log "up in $((SECONDS - started)) s; state in $DIR"
  front_url
}

# SIGKILL a process and wait until it is gone (a zombie counts as gone).
kill_hard() {
  local pid="$1" i
  [ -n "$pid" ] || return 0
  kill -9 "$pid" 2>/dev/null || return 0
  for i in $(seq 1 50); do
    alive "$pid" || return 0
    sleep 0.1
  done
}

# SIGKILL every process of the session a spawned process leads (tini puts Patroni
# in a process group of its own, and Patroni's postmaster is its child), then it.
kill_session() { # name
  local sid pid
  sid="$(pid_of "$1")" || return 0
  [ -n "$sid" ] || return 0
  for pid in $(ps -eo pid=,sid= | awk -v s="$sid" '$2 == s && $1 != s { print $1 }'); do
    kill_hard "$pid"
  done
  kill_hard "$sid"
}

postmaster_pid() { # node
  [ -f "$DIR/$1/data/postmaster.pid" ] && head -n 1 "$DIR/$1/data/postmaster.pid"
}

cmd_down() {
  [ -d "$DIR" ] || return 0
  local n pid
  kill_session haproxy
  # The data is thrown away: no need for Patroni's slow synchronous-mode stop.
  for n in "${NODES[@]}"; do
    kill_session "$n"
    pid="$(postmaster_pid "$n")"
    # Only a process that is this node's postmaster (its data folder on its command line).
    if [ -n "$pid" ] && alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$DIR/$n/data"; then
      kill -QUIT "$pid" 2>/dev/null || true # immediate shutdown: the postmaster takes its backends down
      for _ in $(seq 1 50); do
        alive "$pid" || break
        sleep 0.1
      done
      kill_hard "$pid"
    fi
  done
  kill_session etcd
  rm -rf "$DIR"
  log "down"
}

cmd_status() {
  if [ ! -d "$DIR" ]; then
    echo "down"
    return 1
  fi
  local n role
  for n in "${NODES[@]}"; do
    if is_primary "$n"; then
      role=leader
    elif is_sync_standby "$n"; then
      role=sync-standby
    elif [ "$(rest "$n" /replica)" = 200 ]; then
      role=replica
    elif [ -n "$(rest "$n" /health)" ] && [ "$(rest "$n" /health)" != 000 ]; then
      role=not-running
    else
      role=patroni-down
    fi
    echo "$n $role $(node_url "$n")"
  done
  echo "front $(front_view)$(front_url)"
  local l
  l="$(leader)" && front_routes_to "$l"
}

cmd_primary_pid() {
  local l pid
  l="$(leader)" || die "no leader"
  pid="$(postmaster_pid "$l")"
  [ -n "$pid" ] && alive "$pid" || die "no postmaster running for $l"
  echo "$l $pid"
}

# The cluster as `up` left it: a leader, the other node its standby, the front on the leader only.
settled() {
  local l
  l="$(leader)" && is_standby "$(other "$l")" && front_routes_to "$l"
}

cmd_settle() {
  [ -d "$DIR" ] || die "the cluster is not up"
  wait_until 90 "settled: $(leader 2>/dev/null) leads, $(other "$(leader 2>/dev/null || echo node2)") is its standby" settled ||
    die "the cluster did not settle within 90 s: $(cmd_status 2>&1 | tr '\n' ';')"
}

cmd_kill_primary() {
  local line
  line="$(cmd_primary_pid)" || exit 1
  kill -9 "${line#* }"
  echo "$line"
}

cmd_switchover() {
  local l to
  l="$(leader)" || die "no leader to switch over from"
  to="$(other "$l")"
  is_standby "$to" || die "$to is not a standby in sync: a switchover now could lose commits"
  local out
  out="$(curl -s -m 30 -X POST -H 'Content-Type: application/json' \
    -d "{\"leader\": \"$l\", \"candidate\": \"$to\"}" "http://127.0.0.1:$(rest_port "$l")/switchover")" ||
    die "switchover request failed"
  log "$out"
  wait_until 60 "HAProxy routes to $to" front_routes_to "$to" || die "the front did not move to $to"
  echo "$to"
}

case "${1:-}" in
up) cmd_up ;;
down) cmd_down ;;
status) cmd_status ;;
url) front_url ;;
leader) leader || true ;;
settle) cmd_settle ;;
install) ensure_installed ;;
node-url)
  [ -n "$(pg_port "${2:-}")" ] || { log "usage: cluster.sh node-url node1|node2"; exit 2; }
  node_url "$2"
  ;;
kill-primary) cmd_kill_primary ;;
primary-pid) cmd_primary_pid ;;
switchover) cmd_switchover ;;
*)
  log "usage: cluster.sh up|down|status|url|leader|node-url NAME|primary-pid|kill-primary|switchover|settle|install"
  exit 2
  ;;
esac
