# starconv-report on a hand-made trace: the overlap it prints, the SVG it
# writes, and bad input (exit status 2, one line on stderr).
# No data set is needed: point common.sh at a directory that exists so that
# it does not skip.
SC_TEST_DATA=$TOP_SRCDIR
. "$TOP_SRCDIR/tests/common.sh"
REPORT="$TOP_BUILDDIR/starconv-report"

# rank 0 computes [0,10] and [20,30] ms while a transfer runs [5,25]: half of
# it is exposed (overlap 0.5); rank 1's transfers lie inside its computation
# (overlap 1), so the mean overlap is 0.75.
cat >"$WORK/trace.json" <<'JSON'
{"traceEvents":[
{"name":"process_name","ph":"M","pid":0,"tid":0,"args":{"name":"rank 0"}},
{"name":"conv1.fwd","cat":"fwd","ph":"X","pid":0,"tid":0,"ts":0,"dur":10000,"args":{"iteration":0}},
{"name":"conv1.bwd_data","cat":"bwd_data","ph":"X","pid":0,"tid":0,"ts":20000,"dur":10000,"args":{"iteration":0}},
{"name":"conv1.grad_allreduce","cat":"grad_allreduce","ph":"X","pid":0,"tid":1000,"ts":5000,"dur":20000,"args":{"iteration":0,"transfers":1}},
{"name":"fc.fwd","cat":"fwd","ph":"X","pid":1,"tid":0,"ts":0,"dur":30000,"args":{"iteration":0}},
{"name":"fc.grad_allreduce","cat":"grad_allreduce","ph":"X","pid":1,"tid":1000,"ts":10000,"dur":10000,"args":{"iteration":0,"transfers":1}}
],
"displayTimeUnit":"ms",
"otherData":{"ranks":2,"workers":1,"first_iteration":0,"last_iteration":0,"global_batch":64,"model":"hand-made"}}
JSON

"$REPORT" "$WORK/trace.json" --svg "$WORK/trace.svg" >"$WORK/out" 2>"$WORK/err"
rc=$?
cat "$WORK/out"
if [ $rc -eq 0 ] && [ ! -s "$WORK/err" ]; then ok "report runs"; else fail "report: status $rc"; cat "$WORK/err"; fi
field() { awk -v row="$1" -v col="$2" '$1 == row { print $col }' "$WORK/out"; }
[ "$(field 0 6)" = 0.500 ] && ok "rank 0 overlap 0.500" || fail "rank 0 overlap '$(field 0 6)' (want 0.500)"
[ "$(field 1 6)" = 1.000 ] && ok "rank 1 overlap 1.000" || fail "rank 1 overlap '$(field 1 6)' (want 1.000)"
[ "$(field mean 6)" = 0.750 ] && ok "mean overlap 0.750" || fail "mean overlap '$(field mean 6)' (want 0.750)"
[ "$(field 0 5)" = 10.000 ] && ok "rank 0 exposed 10.000 ms" || fail "rank 0 exposed '$(field 0 5)' (want 10.000)"
# 3 tasks (2 fwd, 1 bwd_data) and 2 transfers in the one iteration
grep -qx 'tasks per iteration: 3.0 (fwd 2.0, bwd_data 1.0); transfers 2.0' "$WORK/out" &&
  ok "tasks by kind" || fail "tasks by kind: $(grep '^tasks' "$WORK/out")"
head -n 1 "$WORK/out" | grep -q '^overlap report: hand-made, 2 ranks x 1 workers, iterations 0\.\.0, times in ms per iteration$' &&
  ok "title line" || fail "title line: $(head -n 1 "$WORK/out")"
if [ -s "$WORK/trace.svg" ] && head -c 5 "$WORK/trace.svg" | grep -q '^<?xml\|^<svg' &&
  grep -q 'conv1.grad_allreduce' "$WORK/trace.svg" && tail -n 1 "$WORK/trace.svg" | grep -q '</svg>'; then
  ok "--svg writes the chart"
else
  fail "--svg: no chart in $WORK/trace.svg"
fi

# the input's load on one rank, iterations 1..3: iteration 2's [8,9] ms
# lies under iteration 1 (its tasks end at 10), iteration 3's [20,22] ms
# begins with iteration 2's tasks' end (20) but a transfer of iteration 2
# runs until 21: 1 ms of it is exposed.  Iteration 1's load, after the
# trace's drain, counts in the time only.
cat >"$WORK/load.json" <<'JSON'
{"traceEvents":[
{"name":"input.load","cat":"load","ph":"X","pid":0,"tid":0,"ts":0,"dur":1000,"args":{"iteration":1}},
{"name":"conv1.fwd","cat":"fwd","ph":"X","pid":0,"tid":0,"ts":1000,"dur":7000,"args":{"iteration":1}},
{"name":"input.load","cat":"load","ph":"X","pid":0,"tid":0,"ts":8000,"dur":1000,"args":{"iteration":2}},
{"name":"conv1.bwd_filter","cat":"bwd_filter","ph":"X","pid":0,"tid":0,"ts":9000,"dur":1000,"args":{"iteration":1}},
{"name":"conv1.fwd","cat":"fwd","ph":"X","pid":0,"tid":0,"ts":10000,"dur":10000,"args":{"iteration":2}},
{"name":"conv1.grad_allreduce","cat":"grad_allreduce","ph":"X","pid":0,"tid":1000,"ts":15000,"dur":6000,"args":{"iteration":2,"transfers":1}},
{"name":"input.load","cat":"load","ph":"X","pid":0,"tid":0,"ts":20000,"dur":2000,"args":{"iteration":3}},
{"name":"conv1.fwd","cat":"fwd","ph":"X","pid":0,"tid":0,"ts":22000,"dur":8000,"args":{"iteration":3}}
],
"displayTimeUnit":"ms",
"otherData":{"ranks":1,"workers":1,"first_iteration":1,"last_iteration":3,"global_batch":64,"model":"hand-made"}}
JSON
want='input load: 1.333 ms per iteration, 0.500 ms exposed (after the rank'"'"'s previous iteration ended; iterations 2..3, mean of the ranks)'
"$REPORT" "$WORK/load.json" >"$WORK/out" 2>"$WORK/err" && grep -qxF "$want" "$WORK/out" &&
  ok "input load and its exposure" || fail "input load: $(grep '^input load' "$WORK/out") $(cat "$WORK/err") (want: $want)"
"$REPORT" "$WORK/trace.json" >"$WORK/out" 2>"$WORK/err" && grep -qx 'input load: none in the trace' "$WORK/out" &&
  ok "no load in the trace" || fail "no load: $(grep '^input load' "$WORK/out")"

"$REPORT" --help >"$WORK/out" 2>&1 && grep -q '^usage: starconv-report' "$WORK/out" &&
  ok "--help" || fail "--help: $(cat "$WORK/out")"

# expect NAME PATTERN ARGS...: status 2, one line "starconv-report: ..."
# matching the pattern on stderr, nothing on stdout.
expect() {
  name=$1 pattern=$2
  shift 2
  "$REPORT" "$@" >"$WORK/out" 2>"$WORK/err"
  rc=$?
  nlines=$(grep -c . "$WORK/err")
  if [ $rc -eq 2 ] && [ "$nlines" -eq 1 ] && grep -q "^starconv-report: .*$pattern" "$WORK/err" &&
    [ ! -s "$WORK/out" ]; then
    ok "$name: $(cat "$WORK/err")"
  else
    fail "$name: status $rc (want 2), $nlines error lines (want 1), want /$pattern/"
    cat "$WORK/err"
  fi
}

printf '{"traceEvents":[{"name":"a","ph":"X","pid":0,' >"$WORK/truncated.json"
printf 'not json at all\n' >"$WORK/garbage.json"
: >"$WORK/empty.json"
expect "missing file" "nope.json" "$WORK/nope.json"
expect "truncated JSON" "truncated.json: byte [0-9]*:" "$WORK/truncated.json"
expect "garbage" "garbage.json: byte 0:" "$WORK/garbage.json"
expect "empty file" "empty.json: byte 0: empty file" "$WORK/empty.json"
expect "unknown option" "unknown option '--bogus'" "$WORK/trace.json" --bogus
expect "--svg without a file" "--svg needs a file name" "$WORK/trace.json" --svg
expect "no trace file" "missing the trace file"
expect "two trace files" "one trace file at a time" "$WORK/trace.json" "$WORK/trace.json"
expect "unwritable svg" "/nonexistent/dir/x.svg" "$WORK/trace.json" --svg /nonexistent/dir/x.svg
finish
