#!/usr/bin/env bash
# Builds the graph-loader fuzzer with clang (ASan + UBSan + libFuzzer) into build-fuzz and runs it
# for SECONDS (default 60) on a seed corpus. Exits non-zero when the fuzzer finds a crash.
#
#   tools/fuzz.sh [SECONDS]
#
# The corpus grows in build-fuzz/corpus (seeded from examples/graphs, tests/bad_graphs and
# tests/fuzz/corpus); crash inputs land in build-fuzz/crashes.
set -euo pipefail
SECONDS_TO_RUN=${1:-60}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build-fuzz
JOBS=$(nproc 2>/dev/null || echo 2)

for tool in clang clang++; do
  command -v $tool >/dev/null || { echo "fuzz.sh: $tool not found (apt-get install clang libclang-rt-dev)" >&2; exit 2; }
done

CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DKILN_BUILD_FUZZERS=ON -DKILN_BUILD_TESTS=OFF >/dev/null
ninja -C "$BUILD" -j "$JOBS" fuzz_graph_loader

CORPUS=$BUILD/corpus
CRASHES=$BUILD/crashes
mkdir -p "$CORPUS" "$CRASHES"
SEEDS=()
for d in "$ROOT/examples/graphs" "$ROOT/tests/bad_graphs" "$ROOT/tests/fuzz/corpus"; do
  [ -d "$d" ] && SEEDS+=("$d")
done

LOG=$BUILD/fuzz.log
echo "fuzz.sh: running fuzz_graph_loader for ${SECONDS_TO_RUN}s (log: $LOG)"
set +e
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
  "$BUILD/fuzz_graph_loader" "$CORPUS" "${SEEDS[@]}" \
  -max_total_time="$SECONDS_TO_RUN" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
  -artifact_prefix="$CRASHES/" -print_final_stats=1 >"$LOG" 2>&1
RC=$?
set -e
EXECS=$(grep -E "^stat::number_of_executed_units" "$LOG" | awk "{print \$2}" | tail -1 || true)
tail -n 5 "$LOG"
echo "fuzz.sh: executions: ${EXECS:-unknown}, exit status: $RC, corpus: $(ls "$CORPUS" | wc -l) files"
if [ $RC -ne 0 ]; then
  echo "fuzz.sh: CRASH found; inputs in $CRASHES:" >&2
  ls -1 "$CRASHES" >&2
  exit 1
fi
echo "fuzz.sh: no crash"
