#!/bin/bash
# sluice copy --progress=json|xapi and --stats: machine-readable output that a
# toolstack can parse, counting completed bytes only.
. "$(dirname "$0")/functions.sh"

M=$((1024 * 1024))

# A copy slow enough (depth 1, 4k requests) to report progress more than once.
random_file "$scratch/big" 64M

log "--progress=json"
expect_ok "$SLUICE" copy --progress=json --depth 1 --request-size 4k "$scratch/big" "$scratch/big.copy"
same_content "$scratch/big" "$scratch/big.copy"
[[ -z $out ]] || fail "--progress=json wrote to stdout: $out"
"$PYTHON" - "$err" $((64 * M)) <<'EOF' || fail "--progress=json output is wrong (above); it was:"$'\n'"$err"
import json, sys
text, total = sys.argv[1], int(sys.argv[2])
lines = text.splitlines()
assert len(lines) >= 2, f"only {len(lines)} progress lines"
records = [json.loads(line) for line in lines]  # every line is one JSON object
last_done = last_seconds = -1
for i, r in enumerate(records):
    final = i == len(records) - 1
    assert r["total"] == total, r
    assert 0 <= r["done"] <= total, r
    assert r["done"] >= last_done, f"done went down: {last_done} -> {r['done']}"
    assert r["seconds"] >= last_seconds, f"seconds went down: {r}"
    assert r["final"] is final, f"final={r['final']} on line {i + 1} of {len(records)}"
    assert 0 <= r["percent"] <= 100 and (r["percent"] == 100) == (r["done"] == total), r
    assert r["percent"] < 100 or final, f"100% before the final line: {r}"
    last_done, last_seconds = r["done"], r["seconds"]
assert records[-1]["done"] == total, f"last line: {records[-1]}"
EOF

log "--progress=xapi"
rm -f "$scratch/big.copy"
expect_ok "$SLUICE" copy --progress=xapi --depth 1 --request-size 4k "$scratch/big" "$scratch/big.copy"
same_content "$scratch/big" "$scratch/big.copy"
xapi_check() {
  "$PYTHON" - "$1" <<'EOF' || fail "--progress=xapi stdout is wrong (above); it was: '$1'"
import re, sys
text = sys.argv[1]
assert re.fullmatch(r"(\d{3})+", text), "not only three-digit records"
values = [int(text[i:i + 3]) for i in range(0, len(text), 3)]
assert all(0 <= v <= 100 for v in values), values
assert values == sorted(values), f"not non-decreasing: {values}"
assert values[-1] == 100, f"does not end in 100: {values}"
assert values.count(100) == 1, f"100 said more than once: {values}"
EOF
}
xapi_check "$out"
(( ${#out} >= 9 )) || fail "a 64M copy at depth 1 reported only '$out'"

log "a progress reader that goes away: the copy goes on, said once on stderr"
# `true` exits before the copy's first digits; the last ("100") comes after every write.
rm -f "$scratch/big.copy"
set +o pipefail
"$SLUICE" copy --progress=xapi --depth 1 --request-size 4k "$scratch/big" "$scratch/big.copy" \
  2>"$scratch/pipe.err" | true
status=${PIPESTATUS[0]}
"$SLUICE" copy --stats "$scratch/big" null: 2>"$scratch/stats-pipe.err" | true
stats_status=${PIPESTATUS[0]}
set -o pipefail
assert_eq "exit status of the copy whose progress reader went away" "$status" 0
same_content "$scratch/big" "$scratch/big.copy"
assert_eq "stderr of that copy" "$(cat "$scratch/pipe.err")" \
  "sluice: note: the progress output cannot be written; the copy goes on without it"
assert_eq "exit status of a copy whose --stats reader went away" "$stats_status" 0
assert_eq "stderr of that copy" "$(cat "$scratch/stats-pipe.err")" \
  "sluice: note: the copy succeeded; its --stats could not be written"

log "--progress=xapi --stats: stdout stays digits only, the summary goes to stderr"
expect_ok "$SLUICE" copy --progress=xapi --stats "$scratch/big" null:
xapi_check "$out"
assert_eq "bytes_read in the stderr summary" "$(json_field "$err" bytes_read)" $((64 * M))

log "--progress=xapi on a failed copy never says 100"
expect_status 1 "$SLUICE" copy --progress=xapi "$scratch/missing" null:
[[ $out != *100 ]] || fail "a failed copy printed '$out'"

log "--progress on an empty source"
: >"$scratch/empty"
expect_ok "$SLUICE" copy --progress=xapi "$scratch/empty" "$scratch/empty.copy"
assert_eq "xapi output of an empty copy" "$out" 100
expect_ok "$SLUICE" copy --progress=json "$scratch/empty" "$scratch/empty.copy"
assert_eq "json final line of an empty copy" "$(json_field "$(tail -n1 <<<"$err")" final)" True

expect_fail 2 "--progress" "$SLUICE" copy --progress=loud "$scratch/big" null:

log "--stats"
# Data at 0 and 4M, allocated zeros at 2M, holes between and to the end.
sparse_file "$scratch/stats" 8M
write_random "$scratch/stats" 0 1M
write_zeros "$scratch/stats" 2M 1M
write_random "$scratch/stats" 4M 1M
expect_ok "$SLUICE" copy --stats --depth 2 "$scratch/stats" "$scratch/stats.copy"
same_content "$scratch/stats" "$scratch/stats.copy"
[[ -z $err ]] || fail "--stats wrote to stderr: $err"
[[ $(wc -l <<<"$out") -eq 1 ]] || fail "--stats printed more than one line: $out"
"$PYTHON" - "$out" <<'EOF' || fail "--stats summary is wrong (above): $out"
import json, sys
s = json.loads(sys.argv[1])
M = 1 << 20
expected = {
    "size": 8 * M,
    "bytes_read": 3 * M,      # the three data extents, zeros included
    "bytes_written": 2 * M,   # the zero megabyte becomes a hole
    "bytes_zeroed": 0,        # a new file reads as zeros: nothing to zero
    "bytes_skipped": 6 * M,
    "data_extents": 3,
    "hole_extents": 3,
    "zero_extents": 0,
    "reads": 3,
}
for key, value in expected.items():
    assert s[key] == value, f"{key}: {s[key]} != {value}"
# File to file goes by reference (spliced): no pool buffer is ever taken then.
if s["zero_copy_writes"] > 0:
    assert s["peak_buffers"] == 0 and s["zero_copy_writes"] == s["writes"], s
else:
    assert 1 <= s["peak_buffers"] <= 2, s["peak_buffers"]
assert s["writes"] >= 2 and s["seconds"] >= 0 and s["mib_per_second"] >= 0, s
EOF

log "--stats: where zero detection gave way to buffered reads, the verdict comes with its measures"
rm -f "$scratch/big.copy"
expect_ok "$SLUICE" copy --stats "$scratch/big" "$scratch/big.copy"
same_content "$scratch/big" "$scratch/big.copy"
"$PYTHON" - "$out" <<'EOF' || fail "--stats mapped-scan keys are wrong (above): $out"
import json, sys
s = json.loads(sys.argv[1])
keys = ("mapped_scan_gave_way", "mapped_touch_ns_per_page", "mapped_copy_ns_per_page")
if "mapped_scan_gave_way" in s:
    # Given way only where touching a mapped page cost at least the copy (ratio 1),
    # and from then on the data was read into pool buffers.
    assert s["mapped_scan_gave_way"] is True, s
    assert s["mapped_touch_ns_per_page"] >= s["mapped_copy_ns_per_page"] > 0, s
    assert s["peak_buffers"] > 0 and s["zero_copy_writes"] < s["writes"], s
else:
    assert not any(k in s for k in keys), s
    assert s["zero_copy_writes"] in (0, s["writes"]), s
EOF

log "--progress with no style: a bar when stderr is a terminal, JSON lines otherwise"
rm -f "$scratch/big.copy"
# script(1) gives the copy a terminal; what the terminal showed comes back in its typescript.
expect_ok script -qec "'$SLUICE' copy --progress '$scratch/big' '$scratch/big.copy'" \
  "$scratch/typescript"
same_content "$scratch/big" "$scratch/big.copy"
screen=$(tr -d '\n' <"$scratch/typescript")
[[ $screen == *$'\r'"[##############################] 100%  64.0 MiB / 64.0 MiB"* ]] ||
  fail "no finished bar on the terminal: $(cat -v "$scratch/typescript")"
[[ $screen != *'"done"'* ]] || fail "JSON on a terminal: $(cat -v "$scratch/typescript")"
rm -f "$scratch/big.copy"
expect_ok "$SLUICE" copy --progress "$scratch/big" "$scratch/big.copy"
same_content "$scratch/big" "$scratch/big.copy"
[[ $(tail -n 1 <<<"$err") == '{"done":67108864,"total":67108864,"percent":100,'* ]] ||
  fail "--progress to a file is not JSON lines: $err"

log "--progress=bar asked for explicitly, to a file"
rm -f "$scratch/big.copy"
expect_ok "$SLUICE" copy --progress=bar "$scratch/big" "$scratch/big.copy"
same_content "$scratch/big" "$scratch/big.copy"
[[ $err == *$'\r'"[##############################] 100%  64.0 MiB / 64.0 MiB"* ]] || fail "no bar: $(cat -v <<<"$err")"
[[ -z $out ]] || fail "--progress=bar wrote to stdout: $out"

log "ok"
