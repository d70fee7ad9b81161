#!/bin/bash
# sluice info [--json]: size, format, allocated bytes and the data/hole extent map,
# exactly as the file was laid out.
. "$(dirname "$0")/functions.sh"

holes_supported "$scratch" || skip "the filesystem of $scratch does not report holes (SEEK_HOLE)"

K=1024
M=$((1024 * 1024))

# check_json FILE EXPECTED-PYTHON-DICT: `sluice info --json FILE` says exactly that.
check_json() {
  expect_ok "$SLUICE" info --json "$1"
  [[ $(wc -l <<<"$out") -eq 1 ]] || fail "info --json printed more than one line: $out"
  "$PYTHON" - "$out" "$2" <<'EOF' || fail "info --json $1 is wrong (above): $out"
import ast, json, sys
got, want = json.loads(sys.argv[1]), ast.literal_eval(sys.argv[2])
assert got == want, f"\n got: {got}\nwant: {want}"
EOF
}

# Hole, data, hole, data to an end that is not a multiple of 512.
f=$scratch/layout.img
size=$((4 * M + 100000))
sparse_file "$f" "$size"
write_random "$f" 1M 512K
write_random "$f" 4M 100000
check_json "$f" "{'source': '$f', 'format': 'raw', 'size': $size, 'allocated': $((512 * K + 100000)),
  'extents': [{'offset': 0, 'length': $M, 'type': 'hole'},
              {'offset': $M, 'length': $((512 * K)), 'type': 'data'},
              {'offset': $((M + 512 * K)), 'length': $((4 * M - M - 512 * K)), 'type': 'hole'},
              {'offset': $((4 * M)), 'length': 100000, 'type': 'data'}]}"
# The same through a file:// URI.
expect_ok "$SLUICE" info --json "file://$f"
assert_eq "info --json file://" "$(json_field "$out" extents)" \
  "$("$SLUICE" info --json "$f" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["extents"])')"

# The human form: the same figures.
expect_ok "$SLUICE" info "$f"
expected_text="source:    $f
format:    raw
size:      $size (4.1 MiB)
allocated: $((512 * K + 100000)) (609.7 KiB)
extents:   4
              offset               length  type
                   0              1048576  hole
             1048576               524288  data
             1572864              2621440  hole
             4194304               100000  data"
[[ $out == "$expected_text" ]] || fail "sluice info $f said:"$'\n'"$out"$'\n'"expected:"$'\n'"$expected_text"

# Data first, a trailing hole (SEEK_DATA's ENXIO is a hole, not an error).
f=$scratch/trailing-hole.img
sparse_file "$f" 10M
write_random "$f" 0 64K
check_json "$f" "{'source': '$f', 'format': 'raw', 'size': $((10 * M)), 'allocated': $((64 * K)),
  'extents': [{'offset': 0, 'length': $((64 * K)), 'type': 'data'},
              {'offset': $((64 * K)), 'length': $((10 * M - 64 * K)), 'type': 'hole'}]}"

# All hole.
f=$scratch/all-hole.img
sparse_file "$f" 3M
check_json "$f" "{'source': '$f', 'format': 'raw', 'size': $((3 * M)), 'allocated': 0,
  'extents': [{'offset': 0, 'length': $((3 * M)), 'type': 'hole'}]}"

# Fully allocated, zeros included: info reports the allocation map, not content.
f=$scratch/allocated.img
random_file "$f" $((2 * M + 3))
write_zeros "$f" 0 1M
check_json "$f" "{'source': '$f', 'format': 'raw', 'size': $((2 * M + 3)), 'allocated': $((2 * M + 3)),
  'extents': [{'offset': 0, 'length': $((2 * M + 3)), 'type': 'data'}]}"

# Empty.
f=$scratch/empty.img
: >"$f"
check_json "$f" "{'source': '$f', 'format': 'raw', 'size': 0, 'allocated': 0, 'extents': []}"
expect_ok "$SLUICE" info "$f"
[[ $out == *"extents:   0"* ]] || fail "sluice info of an empty file: $out"

# A name JSON must escape: quote, backslash, tab, newline.
f=$scratch/$'we"ird\\na\tme\nx.img'
sparse_file "$f" 1M
expect_ok "$SLUICE" info --json "$f"
"$PYTHON" -c 'import json, sys; assert json.loads(sys.argv[1])["source"] == sys.argv[2]' "$out" "$f" ||
  fail "info --json does not give back the name $f: $out"

# A name that is not UTF-8 (Latin-1 "café") and one that is: the JSON stays valid, a
# stray byte becomes U+FFFD, well-formed UTF-8 comes back as it was.
f=$scratch/$'caf\xe9-\xc3\xa9t\xc3\xa9.img'
sparse_file "$f" 1M
expect_ok "$SLUICE" info --json "$f"
"$PYTHON" -c '
import json, sys
got = json.loads(sys.argv[1].encode("utf-8", "surrogateescape").decode("utf-8"))["source"]
assert got.endswith("caf\ufffd-\u00e9t\u00e9.img"), repr(got)' "$out" ||
  fail "info --json of a non-UTF-8 name is not valid JSON: $out"

# A newline or an escape in a name: the text form keeps one line per field (\xNN),
# the JSON form gives the name back exactly, and an error names it the same way.
f=$scratch/$'two\nlines\e[1m.img'
sparse_file "$f" 1M
expect_ok "$SLUICE" info "$f"
assert_eq "the text form's source line" "$(grep '^source:' <<<"$out")" "source:    $scratch/two\x0alines\x1b[1m.img"
[[ $out != *$'\e'* ]] || fail "info printed an escape byte: $out"
expect_ok "$SLUICE" info --json "$f"
assert_eq "the JSON form's source" "$(json_field "$out" source)" "$f"
rm -f "$f"
expect_fail 1 "$scratch/two\x0alines\x1b[1m.img: No such file or directory" "$SLUICE" copy "$f" null:
[[ $(wc -l <<<"$err") -eq 1 ]] || fail "an error about a name with a newline took more than one line: $err"

# Errors.
expect_fail 1 "$scratch/missing.img: No such file or directory" "$SLUICE" info "$scratch/missing.img"
expect_fail 1 "not a regular file or block device" "$SLUICE" info "$scratch"
expect_fail 2 "info needs a SOURCE" "$SLUICE" info
expect_fail 2 "info needs a SOURCE" "$SLUICE" info --json
expect_fail 2 "unknown or incomplete option '--yaml'" "$SLUICE" info --yaml "$f"
expect_fail 2 "info takes one SOURCE" "$SLUICE" info "$f" "$f"

log "ok"
