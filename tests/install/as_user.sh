#!/bin/sh
# as_user.sh WORK BUILD_DIR COMMAND...: runs COMMAND (the install test) as an
# unprivileged user, the way a newcomer installs into a prefix of their own.
# Run by root (as CI runs the suite), it makes WORK a directory owned by
# `nobody` and runs COMMAND as nobody:nogroup with HOME=WORK. `cmake --install`
# writes its manifest into the build tree, which that user cannot write: that
# one file is handed to it. Run by anyone else, COMMAND runs as that user.
set -eu
work=$1
build=$2
shift 2
if [ "$(id -u)" != 0 ]; then
  exec env CAIRN_INSTALL_TEST_USER="$(id -un)" "$@"
fi
rm -rf "$work"
mkdir -p "$work"
chown nobody:nogroup "$work"
touch "$build/install_manifest.txt"
chown nobody:nogroup "$build/install_manifest.txt"
unprivileged() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
if ! unprivileged test -r "$build/CMakeCache.txt" -a -x "$build"; then
  echo "as_user.sh: user nobody cannot read the build tree $build (a umask of 077?):" \
    "make it readable by others, or run the suite as a user other than root" >&2
  exit 1
fi
exec setpriv --reuid=nobody --regid=nogroup --clear-groups \
  env HOME="$work" USER=nobody LOGNAME=nobody CAIRN_INSTALL_TEST_USER=nobody "$@"
