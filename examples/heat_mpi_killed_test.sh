#!/bin/sh
# heat_mpi_killed_test.sh CAIRN_TOOL HEAT_MPI HEAT_SERIAL — an MPI heat example under `cairn launch -n 2`:
# in the first launch rank 1 announces its commit of step 17 and SIGKILLs itself (the kill lands there by
# construction), the relaunched job resumes at step 17 and must end with the serial example's checksum.
set -u
tool=$1 prog=$2 serial=$3 steps=50 kill_at=17
base=${CAIRN_TEST_DIR:-/dev/shm}
[ -d "$base" ] || base=${TMPDIR:-/tmp}
scratch=$(mktemp -d "$base/cairn-heat-mpi-XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
expected=$(CAIRN_POOL_DIR="$scratch/serial" "$serial" $steps | sed -n 's/.*checksum *//p' | tr E e)
out=$(CAIRN_POOL_DIR="$scratch/mpi" "$tool" launch -n 2 -- "$prog" $steps --crash-after $kill_at 2>&1)
printf '%s\n' "$out"
fail() {
  echo "heat_mpi_killed_test: $*"
  exit 1
}
printf '%s\n' "$out" | grep -q "rank 1 committed step $kill_at and kills itself" || fail "rank 1 did not announce its kill"
printf '%s\n' "$out" | grep -q "relaunching" || fail "cairn launch did not relaunch the job"
got=$(printf '%s\n' "$out" | sed -n "s/.*iterations $kill_at\.\.$steps, checksum *//p" | tr E e)
[ -n "$got" ] || fail "the relaunched job did not resume at step $kill_at"
[ "$got" = "$expected" ] || fail "checksum $got after the resume, $expected from $serial"
echo "heat_mpi_killed_test: resumed at step $kill_at, checksum $got equals the serial run's"
