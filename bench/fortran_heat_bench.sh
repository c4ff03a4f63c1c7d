#!/bin/sh
# fortran_heat_bench.sh RELEASE_BUILD [n steps runs] — builds bench/fortran_heat_bench.f90 with gfortran -O2
# against a release build's libcairn.a and cairn.f90, and runs it with its pools in a fresh directory on
# /dev/shm: the Fortran heat loop persisted every iteration (in-place) vs unpersisted, ratio in one run.
set -eu
build=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/cairn-fbench-XXXXXX")
trap 'rm -rf "$work" "$pools"' EXIT
pools=$(mktemp -d /dev/shm/cairn-fbench-XXXXXX)
gfortran -O2 -J"$work" -c "$here/../fortran/cairn.f90" -o "$work/cairn.o"
gfortran -O2 -I"$work" "$here/fortran_heat_bench.f90" "$work/cairn.o" -o "$work/bench" \
  "$build/src/libcairn.a" $(pkg-config --libs libpmem libpmemobj hdf5) -lstdc++ -lpthread
CAIRN_POOL_DIR=$pools "$work/bench" "$@"
