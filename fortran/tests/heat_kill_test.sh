#!/bin/sh
# heat_kill_test.sh PROGRAM — the Fortran heat loop killed with SIGKILL in the middle of the iteration
# it announces ("half K"), resumed, and compared with an uninterrupted run: same checksums, bit for bit.
set -eu
prog=$1
steps=40
kill_at=23
base=${CAIRN_TEST_DIR:-/dev/shm}
[ -d "$base" ] || base=${TMPDIR:-/tmp}
scratch=$(mktemp -d "$base/cairn-fortran-XXXXXX")
trap 'exec 3>&- 4<&- 2>/dev/null; rm -rf "$scratch"' EXIT
mkfifo "$scratch/hold" "$scratch/out"
exec 3<>"$scratch/hold" # the child's standard input: open, never written

CAIRN_POOL_DIR="$scratch/killed" "$prog" $steps $kill_at <"$scratch/hold" >"$scratch/out" &
child=$!
exec 4<"$scratch/out"
announced=""
while read -r word k <&4; do
  if [ "$word" = half ]; then
    announced=$k
    break
  fi
done
kill -KILL $child
status=0
wait $child || status=$?
if [ "$announced" != $kill_at ] || [ $status -ne 137 ]; then
  echo "heat_kill_test: the child did not announce iteration $kill_at (got '$announced') or was not killed ($status)"
  exit 1
fi

resumed=$(CAIRN_POOL_DIR="$scratch/killed" "$prog" $steps 0 </dev/null)
whole=$(CAIRN_POOL_DIR="$scratch/whole" "$prog" $steps 0 </dev/null)
echo "resumed: $(echo $resumed)"
echo "uninterrupted: $(echo $whole)"
[ "$(echo "$resumed" | head -1)" = "start $((kill_at - 1))" ] || { echo "heat_kill_test: did not resume after iteration $((kill_at - 1))"; exit 1; }
[ "$(echo "$resumed" | tail -1)" = "$(echo "$whole" | tail -1)" ] || { echo "heat_kill_test: checksums differ"; exit 1; }
echo "heat_kill_test: killed in iteration $kill_at, resumed after $((kill_at - 1)), same checksums"
