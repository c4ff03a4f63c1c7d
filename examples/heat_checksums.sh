#!/bin/sh
# heat_checksums.sh STEPS COMMAND... — runs each heat example (COMMAND: a command line, STEPS appended),
# each in a fresh CAIRN_POOL_DIR, and checks that all of them print the same checksum, digit for digit.
# A COMMAND written "~ COMMAND" need only agree to 12 significant digits: numpy computes the same cells
# with the neighbours added in another order and sums the field pairwise, so its last digit may differ
# (the compiled loops add in one order, serial and MPI alike, and must agree exactly).
set -u
steps=$1
shift
base=${CAIRN_TEST_DIR:-/dev/shm}
[ -d "$base" ] || base=${TMPDIR:-/tmp}
scratch=$(mktemp -d "$base/cairn-heat-XXXXXX") || exit 1
trap 'rm -rf "$scratch"' EXIT
first="" i=0 status=0
for cmd in "$@"; do
  i=$((i + 1))
  near=0
  case "$cmd" in "~ "*)
    near=1
    cmd=${cmd#"~ "}
    ;;
  esac
  line=$(CAIRN_POOL_DIR="$scratch/$i" sh -c "$cmd $steps" | grep checksum) || {
    echo "heat_checksums: no checksum line from: $cmd $steps"
    exit 1
  }
  sum=$(printf '%s\n' "$line" | sed 's/.*checksum *//' | tr E e) # Fortran writes 1.5E+02, C 1.5e+02
  echo "$sum  <- $line"
  [ -n "$first" ] || first=$sum
  if [ $near = 1 ]; then
    awk -v a="$sum" -v b="$first" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(d <= 1e-12 * m) }' ||
      status=1
  elif [ "$sum" != "$first" ]; then
    status=1
  fi
done
if [ $status -eq 0 ]; then echo "heat_checksums: all $i agree"; else echo "heat_checksums: checksums DIFFER"; fi
exit $status
