#!/usr/bin/env bash
# demo.sh — the main demonstration (`make demo`): the jacobi stream-function
# solver (seed 003) with in-place versioning (seed 004) committed at every
# iteration, killed with SIGKILL at a random iteration, resumed from the pool.
# It shows, and checks:
#   (a) the resumed result is bit-identical to an uninterrupted run (it fails
#       loudly otherwise),
#   (b) the cost of persisting every iteration against the same run without
#       persistence,
#   (c) the restart time from the in-place pool against the restart time from
#       a `file` checkpoint of a state of the same size.
# Usage: scripts/demo.sh [BUILD_DIR]   (default build/release)
# Environment: DEMO_SIZE (grid points per side, default 4096: 128 MiB of
# state), DEMO_ITERATIONS (default 500), DEMO_THREADS (default: all), DEMO_SEED (crash iteration),
# CAIRN_POOL_DIR (where the pool goes; default /dev/shm/cairn).
set -uo pipefail

build=${1:-build/release}
app="$build/apps/jacobi/jacobi"
size=${DEMO_SIZE:-4096}
iterations=${DEMO_ITERATIONS:-500}
threads=${DEMO_THREADS:-$(nproc)}
name=jacobi-demo
scratch=$(mktemp -d "${TMPDIR:-/tmp}/cairn-demo-XXXXXX") || exit 2
trap 'rm -rf "$scratch"' EXIT

if [ ! -x "$app" ]; then
  echo "demo: $app not found; build first (make release)" >&2
  exit 2
fi

# A crash somewhere in the middle half of the run.
RANDOM=${DEMO_SEED:-$$}
crash=$((iterations / 4 + RANDOM % (iterations / 2)))

field() { sed -n "s/^  \"$2\": \"\{0,1\}\([^\",]*\)\"\{0,1\},\{0,1\}$/\1/p" "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "inf" }'; }
ms() { awk -v s="$1" 'BEGIN { printf "%.2f ms", s * 1000 }'; }
fail() {
  echo
  echo "!!! DEMO FAILED: $*" >&2
  exit 1
}

# run TITLE JSON ARGS...: runs the app, its output indented; returns its exit status.
run() {
  local title=$1 json=$2
  shift 2
  echo
  echo "== $title"
  echo "   \$ jacobi $*"
  local status
  # The group's stderr is silenced only for bash's own "Killed" notice; the
  # app's stderr goes through the pipe.
  {
    "$app" --size "$size" --iterations "$iterations" --threads "$threads" --name "$name" --json "$json" "$@" 2>&1 |
      sed 's/^/   | /'
    status=${PIPESTATUS[0]}
  } 2>/dev/null
  return "$status"
}

echo "cairn demo: ${size}x${size} Jacobi stream-function solver, $iterations iterations, $threads threads"
echo "pool directory: ${CAIRN_POOL_DIR:-/dev/shm/cairn (default)}"

run "1/5 reference: uninterrupted, no persistence (native, DRAM)" "$scratch/native.json" ||
  fail "the native run did not verify"
run "2/5 the same with in-place versioning, committed at every iteration" "$scratch/whole.json" \
  --strategy in-place || fail "the uninterrupted in-place run did not verify"

run "3/5 in-place again, killed with SIGKILL at iteration $crash" "$scratch/crashed.json" \
  --strategy in-place --crash-at "$crash"
status=$?
[ "$status" -eq 137 ] || fail "the run was meant to die by SIGKILL (status 137), got status $status"
echo "   (killed: exit status $status)"

run "4/5 resume from the pool and finish" "$scratch/resumed.json" --strategy in-place --resume ||
  fail "the resumed run did not verify"

# The file baseline: a checkpoint of a state of the same size (a short run),
# then a restart from it that has nothing left to compute.
echo
echo "== 5/5 restart from a 'file' checkpoint of a state of the same size"
echo "   \$ jacobi --strategy file --iterations 4 --persist-every 4      (writes one checkpoint)"
"$app" --size "$size" --iterations 4 --persist-every 4 --threads "$threads" --name "$name-file" \
  --strategy file --quiet --json "$scratch/file-write.json" >"$scratch/file.log" 2>&1 ||
  fail "the file checkpoint run failed: $(cat "$scratch/file.log")"
echo "   \$ jacobi --strategy file --iterations 4 --resume               (restarts from it)"
"$app" --size "$size" --iterations 4 --threads "$threads" --name "$name-file" --strategy file --resume --quiet \
  --json "$scratch/file-restart.json" >"$scratch/file.log" 2>&1 ||
  fail "the restart from the file checkpoint failed: $(cat "$scratch/file.log")"

ref=$(field "$scratch/native.json" checksum)
whole=$(field "$scratch/whole.json" checksum)
resumed=$(field "$scratch/resumed.json" checksum)
start=$(field "$scratch/resumed.json" start_iteration)

native_loop=$(field "$scratch/native.json" compute_seconds)
ip_compute=$(field "$scratch/whole.json" compute_seconds)
ip_commit=$(field "$scratch/whole.json" commit_seconds)
ip_loop=$(awk -v a="$ip_compute" -v b="$ip_commit" 'BEGIN { print a + b }')
ip_restart=$(awk -v a="$(field "$scratch/resumed.json" open_seconds)" -v b="$(field "$scratch/resumed.json" restore_seconds)" \
  'BEGIN { print a + b }')
file_restart=$(awk -v a="$(field "$scratch/file-restart.json" open_seconds)" \
  -v b="$(field "$scratch/file-restart.json" restore_seconds)" 'BEGIN { print a + b }')
state_mib=$(awk -v b="$(field "$scratch/native.json" state_bytes)" 'BEGIN { printf "%.0f", b / 1048576 }')

echo
echo "================================================================================"
echo " cairn demo — results (${size}x${size} grid, ${state_mib} MiB of state, $iterations iterations)"
echo "--------------------------------------------------------------------------------"
if [ "$resumed" = "$ref" ] && [ "$whole" = "$ref" ]; then
  echo " (a) killed at iteration $crash, resumed after iteration $start: the final state is"
  echo "     BIT-IDENTICAL to the uninterrupted run (checksum $ref) and verified"
else
  fail "checksums differ: native $ref, uninterrupted in-place $whole, crashed+resumed $resumed"
fi
echo " (b) persisting every iteration: the run takes x$(ratio "$ip_loop" "$native_loop") the time of the same run without"
echo "     persistence"
echo "     (iteration loop: $(awk -v s="$native_loop" 'BEGIN{printf "%.2f", s}') s native vs" \
  "$(awk -v s="$ip_loop" 'BEGIN{printf "%.2f", s}') s in-place, of which $(awk -v s="$ip_commit" 'BEGIN{printf "%.2f", s}') s commits)"
echo " (c) restart from in-place: $(ms "$ip_restart"); from a file checkpoint: $(ms "$file_restart")"
echo "     -> in-place restarts x$(ratio "$file_restart" "$ip_restart") faster (open + restore, same state size)"
echo "================================================================================"
# Success: free the memory the pool and the checkpoint take (tmpfs). On
# failure they stay for inspection (`cairn pool info`).
pool_dir=${CAIRN_POOL_DIR:-/dev/shm/cairn}
rm -f "$pool_dir/$name.pool" "$pool_dir/$name-file".*.ckpt
