#!/bin/sh
# run_in_temp_pool_dir.sh — runs an example (optionally -n TIMES) with CAIRN_POOL_DIR in a fresh scratch directory.
# The directory named by CAIRN_POOL_DIR does not exist yet: the examples must create it.
set -u
times=1
if [ "${1:-}" = "-n" ]; then
  times=$2
  shift 2
fi
base=${CAIRN_TEST_DIR:-/dev/shm}
[ -d "$base" ] || base=${TMPDIR:-/tmp}
scratch=$(mktemp -d "$base/cairn-example-XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
CAIRN_POOL_DIR="$scratch/pools"
export CAIRN_POOL_DIR
i=0
while [ "$i" -lt "$times" ]; do
  "$@" || exit $?
  i=$((i + 1))
done
