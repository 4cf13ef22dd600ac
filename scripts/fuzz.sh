#!/usr/bin/env bash
# Runs one cargo-fuzz target of fuzz/ for a bounded time, starting from its
# committed seed corpus (fuzz/corpus/TARGET; new inputs go to
# fuzz/target/corpus/TARGET, so the seeds stay as committed). Exits non-zero
# on a crash, a failed check or a leak; the input is saved under
# fuzz/artifacts/TARGET/ (replay it on stable as fuzz/README.md says).
#
#   scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#
# Needs the nightly toolchain; installs cargo-fuzz when missing. One job:
# add -fork=N to use more cores.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    echo "usage: scripts/fuzz.sh TARGET SECONDS [libFuzzer flags...]" >&2
    echo "targets: $(cd fuzz/fuzz_targets && ls -- *.rs | sed 's/\.rs$//' | tr '\n' ' ')" >&2
    exit 2
}
[[ $# -ge 2 ]] || usage
target="$1"
seconds="$2"
shift 2
[[ -f "fuzz/fuzz_targets/$target.rs" ]] || { echo "unknown target: $target" >&2; usage; }
[[ "$seconds" =~ ^[1-9][0-9]*$ ]] || { echo "SECONDS must be a positive integer: $seconds" >&2; usage; }

if ! rustup run nightly rustc --version >/dev/null 2>&1; then
    echo "scripts/fuzz.sh: needs the nightly toolchain (rustup toolchain install nightly)" >&2
    exit 2
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

features=()
if [[ -n "${FUZZ_FEATURES:-}" ]]; then
    features=(--features "$FUZZ_FEATURES")
fi
flags=(-max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1)
# A value whose Drop panicked keeps its allocation (as with std::rc):
# LeakSanitizer would report every injected panic.
if [[ "$target" == gc_panics || "$target" == sync_graph ]]; then
    flags+=(-detect_leaks=0)
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
fi

cd fuzz
mkdir -p "target/corpus/$target"
# -O: optimized; -a: with debug assertions (and overflow checks).
exec cargo +nightly fuzz run -O -a "${features[@]}" "$target" \
    "target/corpus/$target" "corpus/$target" -- "${flags[@]}" "$@"
