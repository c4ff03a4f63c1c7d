#!/usr/bin/env bash
# fuzz/run.sh — runs every fuzz target of a fuzz build (fuzz/README.md).
#
#   fuzz/run.sh check BUILD SECONDS   each target: its regression inputs
#                                     (fuzz/regressions/<target>/), then
#                                     FUZZ_CHECK_RUNS inputs (default 3000)
#                                     from the seeds alone with a fixed seed,
#                                     at most SECONDS, into a scratch corpus
#                                     (what `make test` runs)
#   fuzz/run.sh grow BUILD SECONDS    each target: SECONDS of fuzzing that
#                                     grows BUILD/fuzz/corpus/<target>/ (what
#                                     `make fuzz` runs)
#
# A crash, a sanitizer report, an input that runs longer than 10 s or leaks
# fails the target; its input is kept in BUILD/fuzz/findings/<target>/. The
# script runs every target, then exits 1 if any failed. FUZZ_TARGETS narrows
# the list; FUZZ_ARGS adds libFuzzer flags (-jobs=2, -dict=...).
set -uo pipefail
mode=${1:?usage: fuzz/run.sh check|grow BUILD SECONDS}
build=${2:?build directory}
seconds=${3:?seconds per target}
here=$(cd "$(dirname "$0")" && pwd)
bin="$build/fuzz"
targets=${FUZZ_TARGETS:-pool_fuzz stream_fuzz octree_fuzz slot_store_fuzz file_checkpoint_fuzz dist_slot_fuzz dist_files_fuzz app_files_fuzz}

export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
for s in /usr/lib/llvm-16/bin/llvm-symbolizer /usr/bin/llvm-symbolizer; do
  if [ -x "$s" ]; then
    export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$s}
    break
  fi
done

# A target that dies of a finding leaves its scratch directory behind: remove
# those whose process is gone.
reap_scratch() {
  local d
  for d in /dev/shm/cairn-fuzz-*; do
    [ -d "$d" ] && ! kill -0 "${d##*-}" 2>/dev/null && rm -rf "$d"
  done
  return 0
}

failed=()
for t in $targets; do
  exe="$bin/$t"
  [ -x "$exe" ] || { echo "fuzz: $exe is not built (cmake --build --preset fuzz)"; exit 2; }
  findings="$bin/findings/$t"
  mkdir -p "$findings"
  log="$bin/findings/$t.log"
  : >"$log"
  flags=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$findings/")
  if [ "$mode" = check ]; then
    regressions=("$here/regressions/$t"/*)
    if [ -e "${regressions[0]}" ]; then
      "$exe" -timeout=10 -rss_limit_mb=2048 "${regressions[@]}" >>"$log" 2>&1
      rc=$?
      reap_scratch
      if [ $rc -ne 0 ]; then
        echo "fuzz: $t fails on a regression input (log: $log)"
        tail -n 40 "$log"
        failed+=("$t")
        continue
      fi
    fi
    work=$(mktemp -d)
    cp "$bin/corpus/$t"/seed-* "$work/"
    corpus=("$work")
    # The same inputs on every machine: a fixed seed and a fixed number of
    # runs (FUZZ_CHECK_RUNS), SECONDS only as a bound on a slow machine
    # (which then runs a prefix of the same sequence). A check must not fail
    # because it happened to draw an input no earlier run did.
    flags+=(-seed=1 -runs="${FUZZ_CHECK_RUNS:-3000}")
  else
    corpus=("$bin/corpus/$t")
  fi
  start=$(date +%s)
  # shellcheck disable=SC2086
  "$exe" "${flags[@]}" -max_total_time="$seconds" ${FUZZ_ARGS:-} "${corpus[@]}" >>"$log" 2>&1
  rc=$?
  reap_scratch
  [ "$mode" = check ] && rm -rf "$work"
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*$')
  echo "fuzz: $t: ${runs:-?} inputs in $(($(date +%s) - start)) s, exit $rc"
  if [ $rc -ne 0 ]; then
    grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -n 20
    echo "fuzz: $t failed (log: $log, input in $findings/)"
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}"
  exit 1
fi
