#!/usr/bin/env bash
# Builds the fuzz targets with clang (ASan + UBSan + libFuzzer) into build-fuzz and runs them on
# their seed corpora for SECONDS in all (default 60), split evenly over the targets: every target
# in tests/fuzz, or those named. Exits non-zero when a fuzzer finds a crash.
#
#   tools/fuzz.sh [SECONDS] [TARGET...]      e.g. tools/fuzz.sh 600 fuzz_safetensors
#
# Targets: fuzz_graph_loader (graph files; seeds: examples/graphs, tests/bad_graphs,
# tests/fuzz/corpus/graph_loader) and fuzz_safetensors (safetensors headers; seeds:
# tests/fuzz/corpus/safetensors), libFuzzer targets each with a dictionary
# (tests/fuzz/<name>.dict) and a max_len large enough for deep and big inputs; their corpora grow
# in build-fuzz/corpus/<target>. fuzz_onnx_importer (tests/fuzz/fuzz_onnx_importer.py) is a
# hypothesis target: structure-aware ONNX models through the importer, in-process, with the
# built kiln (build/kiln) checking its graphs when there is one; it needs python3 with
# tools/requirements.txt, not clang. Crash inputs land in build-fuzz/crashes/<target>;
# docs/FUZZING.md has the details.
set -euo pipefail
SECONDS_TO_RUN=${1:-60}
shift || true
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build-fuzz
JOBS=$(nproc 2>/dev/null || echo 2)
ALL_TARGETS=(fuzz_graph_loader fuzz_safetensors fuzz_onnx_importer)
TARGETS=("$@")
[ ${#TARGETS[@]} -eq 0 ] && TARGETS=("${ALL_TARGETS[@]}")
NATIVE=()
for T in "${TARGETS[@]}"; do [ "$T" != fuzz_onnx_importer ] && NATIVE+=("$T"); done

if [ ${#NATIVE[@]} -gt 0 ]; then
  for tool in clang clang++; do
    command -v $tool >/dev/null || { echo "fuzz.sh: $tool not found (apt-get install clang libclang-rt-dev)" >&2; exit 2; }
  done
  CC=clang CXX=clang++ cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DKILN_BUILD_FUZZERS=ON -DKILN_BUILD_TESTS=OFF >/dev/null
  ninja -C "$BUILD" -j "$JOBS" "${NATIVE[@]}"
fi

# The hypothesis target: one python3 process (single core); it prints its execution count.
run_onnx_target() {
  local LOG=$BUILD/fuzz_onnx_importer.log RC
  echo "fuzz.sh: running fuzz_onnx_importer for ${1}s (log: $LOG)"
  set +e
  python3 "$ROOT/tests/fuzz/fuzz_onnx_importer.py" --seconds "$1" \
    --crashes "$BUILD/crashes/fuzz_onnx_importer" >"$LOG" 2>&1
  RC=$?
  set -e
  # A failure's own lines (what broke, the case's path) come first, then the summary.
  grep -A 12 "fuzz_onnx_importer: BUG" "$LOG" | head -n 40 || true
  tail -n 1 "$LOG"
  EXECS=$(grep -oE "executions: [0-9]+" "$LOG" | awk '{print $2}' | tail -1 || true)
  echo "fuzz.sh: fuzz_onnx_importer: executions: ${EXECS:-unknown}, exit status: $RC"
  if [ $RC -ne 0 ]; then
    echo "fuzz.sh: fuzz_onnx_importer: CRASH found; inputs in $BUILD/crashes/fuzz_onnx_importer" >&2
    return 1
  fi
}

PER_TARGET=$(( SECONDS_TO_RUN / ${#TARGETS[@]} ))
[ "$PER_TARGET" -lt 1 ] && PER_TARGET=1
FAILED=0
for T in "${TARGETS[@]}"; do
  case "$T" in
    fuzz_graph_loader)
      SEED_DIRS=("$ROOT/examples/graphs" "$ROOT/tests/bad_graphs" "$ROOT/tests/fuzz/corpus/graph_loader")
      DICT=$ROOT/tests/fuzz/graph_loader.dict ;;
    fuzz_safetensors)
      SEED_DIRS=("$ROOT/tests/fuzz/corpus/safetensors")
      DICT=$ROOT/tests/fuzz/safetensors.dict ;;
    fuzz_onnx_importer)
      mkdir -p "$BUILD"
      run_onnx_target "$PER_TARGET" || FAILED=1
      continue ;;
    *) echo "fuzz.sh: unknown target '$T' (targets: ${ALL_TARGETS[*]})" >&2; exit 2 ;;
  esac
  CORPUS=$BUILD/corpus/$T
  CRASHES=$BUILD/crashes/$T
  mkdir -p "$CORPUS" "$CRASHES"
  SEEDS=()
  for d in "${SEED_DIRS[@]}"; do [ -d "$d" ] && SEEDS+=("$d"); done
  LOG=$BUILD/$T.log
  echo "fuzz.sh: running $T for ${PER_TARGET}s (log: $LOG)"
  set +e
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    "$BUILD/$T" "$CORPUS" "${SEEDS[@]}" -dict="$DICT" \
    -max_total_time="$PER_TARGET" -rss_limit_mb=2048 -max_len=262144 -timeout=10 \
    -artifact_prefix="$CRASHES/" -print_final_stats=1 >"$LOG" 2>&1
  RC=$?
  set -e
  EXECS=$(grep -E "^stat::number_of_executed_units" "$LOG" | awk "{print \$2}" | tail -1 || true)
  tail -n 3 "$LOG"
  echo "fuzz.sh: $T: executions: ${EXECS:-unknown}, exit status: $RC, corpus: $(ls "$CORPUS" | wc -l) files"
  if [ $RC -ne 0 ]; then
    echo "fuzz.sh: $T: CRASH found; inputs in $CRASHES:" >&2
    ls -1 "$CRASHES" >&2
    FAILED=1
  fi
done
[ $FAILED -ne 0 ] && exit 1
echo "fuzz.sh: no crash"
