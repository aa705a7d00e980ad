#!/usr/bin/env bash
# Issue 29's proof that the timing-sensitive tests hold under any interleaving: ROUNDS rounds of
# the tests listed in perf/timing_tests.txt, with both cores busy (two bounded busy loops) and
# every durable write slowed (CAFE_TEST_SLOW_WRITES, tests/slow_writes.py); prints each test's
# pass count out of ROUNDS.
#
#   bash perf/timing_rounds.sh [ROUNDS=20] [SLOW_WRITE_S=0.05]
set -u
cd "$(dirname "$0")/.."
ROUNDS=${1:-20}
SLOW=${2:-0.05}
PY=${PY:-.venv/bin/python}
OUT=$(mktemp -d)
export HF_HUB_OFFLINE=1 CAFE_TEST_SLOW_WRITES=$SLOW PYTHONPATH=$PWD
mapfile -t TESTS < perf/timing_tests.txt
for r in $(seq 1 "$ROUNDS"); do
  timeout 900 python3 -c 'while True: pass' & b1=$!
  timeout 900 python3 -c 'while True: pass' & b2=$!
  timeout 1200 "$PY" -m pytest "${TESTS[@]}" -q -rA -p no:cacheprovider > "$OUT/round$r.log" 2>&1
  echo "round $r: exit $?"
  kill "$b1" "$b2" 2>/dev/null; wait "$b1" "$b2" 2>/dev/null
done
# one line per test: passes out of rounds (-rA lists every outcome)
cat "$OUT"/round*.log | awk '/^PASSED /{p[$2]++} /^(FAILED|ERROR) /{p[$2]+=0}
  END {for (t in p) printf "%3d/%d  %s\n", p[t], n, t}' n="$ROUNDS" | sort -k2
echo "logs: $OUT"
