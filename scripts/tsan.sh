#!/usr/bin/env bash
# Runs the recycler::sync stress test, the multi-threaded differential test
# of its generations, the collector-thread tests, the test of collect()'s
# waiting (and the sync unit tests) under ThreadSanitizer.
#
# Needs the nightly toolchain with rust-src (TSan requires rebuilding std
# with the sanitizer: -Zbuild-std). Usage:
#
#   scripts/tsan.sh            # the five tests + sync unit tests
#   scripts/tsan.sh --quick    # the five tests only
#
# The target directory is separate (target/tsan) so that the instrumented
# build does not invalidate the normal one. Exits non-zero if TSan reports a
# data race (TSAN_OPTIONS=halt_on_error=1).
set -euo pipefail
cd "$(dirname "$0")/.."

target="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTFLAGS="-Zsanitizer=thread"
export RUSTDOCFLAGS="-Zsanitizer=thread"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"

run() {
    cargo +nightly test -Zbuild-std --target "$target" --target-dir target/tsan \
        -p recycler -j 2 "$@"
}

run --test sync_stress --test sync_differential --test sync_collector_thread \
    --test sync_collector_stop --test sync_collect_wait
if [[ "${1:-}" != "--quick" ]]; then
    run --lib sync::
fi
echo "tsan: no data race reported"
