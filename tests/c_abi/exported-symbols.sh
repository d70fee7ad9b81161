#!/bin/bash
# libsluice.so.1 exports exactly the C ABI's functions (the committed list, kept in
# step with sluice.h), under its soname, and nothing of the C++ inside.
set -u
lib=$1 expected=$2
status=0
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" = libsluice.so.1 ]; then echo "ok: soname $soname"; else echo "FAIL: soname '$soname'"; status=1; fi
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDRBVWi]$/ { print $3 }' | sed 's/@.*//' | sort -u)
if diff -u "$expected" <(printf '%s\n' "$exported"); then
  echo "ok: $(wc -l <"$expected") symbols exported, exactly the committed list"
else
  echo "FAIL: the exported symbols differ from $expected (above)"
  status=1
fi
# Each exported function is declared in the header.
header=$(dirname "$expected")/sluice.h
while read -r symbol; do
  grep -q "\b$symbol(" "$header" || { echo "FAIL: $symbol is not declared in sluice.h"; status=1; }
done <"$expected"
exit $status
