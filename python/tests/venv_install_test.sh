#!/bin/sh
# venv_install_test.sh — `pip install ./python` into a fresh venv, then a numpy loop made resilient
# in four lines, run twice (the second run resumes the first's last commit).
#
#   sh python/tests/venv_install_test.sh PYTHON SOURCE_DIR
#
# The venv sees the system's packages (--system-site-packages: numpy, and the
# build backend if the system has it). With scikit-build-core and pybind11
# importable there, pip builds offline (--no-build-isolation --no-index);
# otherwise the install needs the package registry, and the test is skipped
# (exit 77) unless CAIRN_TEST_NETWORK=1 allows it (ctest label `network`).
set -eu
py=$1
src=$2
# The venv sees what the system python has: decide before making it.
if "$py" -c "import scikit_build_core, pybind11, numpy" 2>/dev/null; then
  set -- --no-build-isolation --no-index
elif [ "${CAIRN_TEST_NETWORK:-0}" = 1 ]; then
  set --
else
  echo "skipped: scikit-build-core or pybind11 is not installed and CAIRN_TEST_NETWORK=1 is not set (the install would need the package registry)"
  exit 77
fi
base=${CAIRN_TEST_DIR:-/dev/shm}
[ -d "$base" ] || base=${TMPDIR:-/tmp}
work=$(mktemp -d "$base/cairn-venv-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$py" -m venv --system-site-packages "$work/venv"
vpy=$work/venv/bin/python
# A copy of the sources, so that the build leaves nothing in the checkout.
mkdir "$work/src"
(cd "$src" && tar --exclude=./build --exclude=./.git -cf - .) | (cd "$work/src" && tar -xf -)
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} "$vpy" -m pip install -q "$@" "$work/src/python"
cd "$work"  # not the checkout: the installed package is imported
cat >loop.py <<'PY'
import sys, numpy as np, cairn
with cairn.Context("loop", dir=sys.argv[1]) as ctx:
    x = ctx.region("x", 1000); ctx.open()                        # 1: the array that must survive
    if ctx.committed_version is not None: ctx.restore()          # 2: resume where the last run committed
    for step in range(ctx.version, int(sys.argv[2])):            # 3: the loop, counted by the versions
        x.array[:] += 1.0; ctx.commit()                          # 4: durable every iteration
    print(ctx.version, x.array.sum(), cairn.__file__)
PY
first=$("$vpy" loop.py "$work/pools" 7)
second=$("$vpy" loop.py "$work/pools" 12)
echo "$first"
echo "$second"
case $first in "7 7000.0 $work/venv/"*) ;; *) echo "first run: $first" >&2; exit 1 ;; esac
case $second in "12 12000.0 $work/venv/"*) ;; *) echo "second run: $second" >&2; exit 1 ;; esac
