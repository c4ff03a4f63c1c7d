#!/usr/bin/env bash
# Fails when a tracked C/C++ file is not clang-format clean (format pinned in .clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
files=$(git ls-files '*.cpp' '*.hpp' '*.h' '*.c' 2>/dev/null || true)
[ -z "$files" ] && exit 0
bad=$(for f in $files; do [ -f "$f" ] && ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1 && echo "$f"; done || true)
if [ -n "$bad" ]; then
  echo "clang-format: these files need 'make format':"; echo "$bad"; exit 1
fi
