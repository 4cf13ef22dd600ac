#!/usr/bin/env bash
# Hostile clients against `server-demo serve`, loopback only, a few seconds each.
#
#   scripts/hostile.sh [ATTACK...]
#
# ATTACK is any of: slowloris idle abort fdflood stderr sighup burst
# (default: all of them). Each starts its own server, attacks it with
# `server-demo load --attack` (or the shell), and prints what the attack
# achieved, what a well-behaved probe saw, the server's CPU time and the
# connection counters of /stats.
#
# Environment:
#   BIN=path        server-demo binary to attack (default: build and use the
#                   release one)
#   LOADER=path     server-demo binary that attacks (`load --attack`;
#                   default: the release one, built if needed)
#   RUNTIME=...     per-thread (default) or work-stealing
#   MM=...          arc, orc-nim16 or orc (default orc)
#   CONNS=N         attack connections (default 2000; fdflood uses NOFILE+100)
#   SECS=N          attack duration in seconds (default 15)
#   NOFILE=N        descriptor limit of the fdflood server (default 1024)
#   SERVER_ARGS=... extra `serve` arguments, e.g. "--header-timeout 5s
#                   --idle-timeout 5s" (leave empty for a binary without them)
set -euo pipefail

cd "$(dirname "$0")/.."
if [[ -z "${BIN:-}" || -z "${LOADER:-}" ]]; then
    cargo build --release -q -p server-demo
fi
BIN=${BIN:-target/release/server-demo}
LOADER=${LOADER:-target/release/server-demo}
RUNTIME=${RUNTIME:-per-thread}
MM=${MM:-orc}
CONNS=${CONNS:-2000}
SECS=${SECS:-15}
NOFILE=${NOFILE:-1024}
read -r -a EXTRA <<<"${SERVER_ARGS:-}"
ATTACKS=("$@")
[[ ${#ATTACKS[@]} -gt 0 ]] || ATTACKS=(slowloris idle abort fdflood stderr sighup burst)

# The attacker needs one descriptor per connection.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

PORT=""
PID=""
LOG=$(mktemp)
trap 'if [[ -n "$PID" ]]; then kill "$PID" 2>/dev/null || true; fi; rm -f "$LOG"' EXIT

# start [wrapper...]: starts the server (optionally under a wrapper such as
# `prlimit --nofile=N`) on a free port; sets PID and PORT.
start() {
    local out
    out=$(mktemp)
    "$@" "$BIN" serve --port 0 --threads 2 --mm "$MM" --runtime "$RUNTIME" "${EXTRA[@]}" \
        >"$out" 2>"$LOG" &
    PID=$!
    for _ in $(seq 100); do
        if grep -q listening "$out"; then break; fi
        sleep 0.05
    done
    PORT=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\).*|\1|p' "$out")
    rm -f "$out"
    [[ -n "$PORT" ]] || { echo "server did not start:"; cat "$LOG"; exit 1; }
}

stop() {
    kill -TERM "$PID" 2>/dev/null || true
    local rc=0
    wait "$PID" || rc=$?
    PID=""
    echo "  server exit status after SIGTERM: $rc"
}

cpu_s() { # user+system CPU seconds of $PID
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/.*\) /, ""); split($0, f, " "); printf "%.2f", (f[12] + f[13]) / hz }' "/proc/$PID/stat"
}

rss_mib() {
    awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$PID/status"
}

conn_stats() {
    curl -s -m 5 "http://127.0.0.1:$PORT/stats" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    sys.exit("  /stats: no answer")
c = d.get("connections")
print("  /stats connections:", json.dumps(c) if c else "(not reported by this binary)")' || true
}

attack() { # attack KIND CONNS
    local before
    before=$(cpu_s)
    "$LOADER" load --url "http://127.0.0.1:$PORT/" --attack "$1" -c "$2" -d "${SECS}s" 2>/dev/null | sed 's/^/  /'
    echo "  server CPU during the attack: $(awk -v a="$before" -v b="$(cpu_s)" 'BEGIN { printf "%.2f", b - a }') s of ${SECS} s;" \
        "RSS $(rss_mib) MiB; stderr $(wc -c <"$LOG") bytes"
    conn_stats
}

for a in "${ATTACKS[@]}"; do
    echo "== $a ($BIN, $RUNTIME, mm $MM)"
    case $a in
    slowloris | idle | abort)
        start
        n=$CONNS
        [[ $a == abort ]] && n=64
        attack "$a" "$n"
        stop
        ;;
    fdflood)
        start prlimit --nofile="$NOFILE"
        attack fdflood $((NOFILE + 100))
        echo "  accept-error lines logged: $(grep -c 'accept failed' "$LOG" || true)"
        stop
        ;;
    stderr)
        # stderr into a pipe whose reader has gone: every write fails (EPIPE).
        out=$(mktemp)
        "$BIN" serve --port 0 --threads 2 --mm "$MM" --runtime "$RUNTIME" "${EXTRA[@]}" \
            >"$out" 2> >(true) &
        PID=$!
        sleep 1
        PORT=$(sed -n 's|^listening on http://[^:]*:\([0-9]*\).*|\1|p' "$out")
        curl -s -o /dev/null -w "  GET / with stderr closed: %{http_code}\n" "http://127.0.0.1:$PORT/" || true
        rm -f "$out"
        stop
        echo "  (0: clean; 101: panicked writing the shutdown line)"
        ;;
    sighup)
        start
        kill -HUP "$PID"
        rc=0
        wait "$PID" || rc=$?
        PID=""
        echo "  exit status after SIGHUP: $rc (0: graceful; 129: killed by the signal)"
        ;;
    burst)
        # Rounds of 10,000 connections (each loaded briefly, then closed):
        # RSS after each round, with and without the server's malloc_trim.
        for variant in trim no-trim; do
            saved=("${EXTRA[@]}")
            [[ $variant == no-trim ]] && EXTRA+=(--no-malloc-trim)
            start
            line="  $variant: RSS MiB after rounds:"
            for _ in 1 2 3 4 5; do
                "$LOADER" load --url "http://127.0.0.1:$PORT/" -c 10000 -d 2s -t 2 >/dev/null 2>&1
                sleep 1.5
                line+=" $(rss_mib)"
            done
            echo "$line"
            stop
            EXTRA=("${saved[@]}")
        done
        ;;
    *)
        echo "unknown attack $a (slowloris idle abort fdflood stderr sighup burst)" >&2
        exit 2
        ;;
    esac
done
