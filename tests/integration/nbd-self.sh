#!/bin/bash
# Sluice's NBD client against Sluice's NBD server, for every copy pair: file -> nbd,
# nbd -> file, nbd -> null:, nbd -> nbd; TCP and Unix sockets; multi-conn; TLS with
# x509 and PSK; a read-only export and one that is too small refused. Every copy is
# compared byte for byte.
source "$(dirname "$0")/nbd_server_lib.sh"
requires openssl python3 cmp

mib=$((1 << 20))
# A sparse image with data at the start, the middle (unaligned) and the end.
python3 - "$WORK/src.img" <<'PY'
import os, sys
size = 40 << 20
with open(sys.argv[1], "wb") as f:
    f.truncate(size)
    for offset, length in ((0, 1 << 20), (7 << 20, 3 << 20), ((20 << 20) + 4096, 123456), (size - 8192, 8192)):
        f.seek(offset)
        f.write(os.urandom(length))
PY
size=$(stat -c %s "$WORK/src.img")
truncate -s "$size" "$WORK/a.img" "$WORK/b.img"
truncate -s $((size / 2)) "$WORK/small.img"
cp --sparse=always "$WORK/src.img" "$WORK/ro.img"

stats() { "$SLUICE" copy --stats "$@" 2>>"$WORK/client.log" || die "copy $* failed: $(tail -3 "$WORK/client.log")"; }
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])['$2'])" "$1"; }
same() { cmp -s "$1" "$2" || die "$3: $1 and $2 differ"; }

port=$(free_port)
start_server "tcp://127.0.0.1:$port" --export a="$WORK/a.img" --export ro="$WORK/ro.img" \
  --export small="$WORK/small.img" --read-only
# --read-only applies to every export; a second server takes writes.
a_server=$SERVER_PID
port_rw=$(free_port)
start_server "tcp://127.0.0.1:$port_rw" --export a="$WORK/a.img" --export small="$WORK/small.img"
sock="$WORK/nbd.sock"
start_server "unix://$sock" --export b="$WORK/b.img"

# file -> nbd (TCP), then nbd -> file
stats "$WORK/src.img" "nbd://127.0.0.1:$port_rw/a" >/dev/null
same "$WORK/src.img" "$WORK/a.img" "file -> nbd over TCP"
pass "file -> nbd over TCP"
stats "nbd://127.0.0.1:$port_rw/a" "$WORK/back.img" >/dev/null
same "$WORK/src.img" "$WORK/back.img" "nbd -> file"
# Holes stay holes: the copy allocates what the source does, give or take a few
# blocks (ext4 sometimes keeps one more block at an extent's unaligned end, with or
# without zero-copy; seen as 8464 vs 8456 sectors), and nowhere near the 40 MiB size.
[ "$(stat -c %b "$WORK/back.img")" -le $(($(stat -c %b "$WORK/src.img") + 32)) ] ||
  die "nbd -> file: the copy is less sparse than the source"
pass "nbd -> file, holes kept"

# nbd -> null: reads only the data the server's block status reports
out=$(stats "nbd://127.0.0.1:$port_rw/a" null:)
data=$(python3 -c "
import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY); size = os.fstat(fd).st_size; pos = 0; total = 0
while pos < size:
    try: start = os.lseek(fd, pos, os.SEEK_DATA)
    except OSError: break
    end = os.lseek(fd, start, os.SEEK_HOLE); total += end - start; pos = end
print(total)" "$WORK/a.img")
[ "$(field "$out" bytes_read)" -le "$data" ] || die "nbd -> null: read $(field "$out" bytes_read) bytes, the data is $data"
[ "$(field "$out" bytes_read)" -gt 0 ] || die "nbd -> null: read nothing"
pass "nbd -> null: reads only the allocated data ($(field "$out" bytes_read) of $size bytes)"

# nbd -> nbd, TCP to Unix
stats "nbd://127.0.0.1:$port_rw/a" "nbd+unix:///b?socket=$sock" >/dev/null
same "$WORK/src.img" "$WORK/b.img" "nbd (tcp) -> nbd (unix)"
pass "nbd -> nbd, TCP to a Unix socket"

# nbd -> Chunked and raw streams, received by sluice serve --once. The outputs start as
# 0xFF, so a hole the server's block status reports must still arrive as zeros; with
# --prezeroed into a fresh output Chunked may skip the holes instead.
stream_case() {  # stream_case NAME PROTOCOL garbage|fresh COPY-OPTIONS...
  local name=$1 protocol=$2 output=$3 out="$WORK/stream-$2.img" listen pid status=0 size_opts=()
  shift 3
  rm -f "$out"
  if [ "$output" = garbage ]; then
    head -c "$size" /dev/zero | tr '\0' '\377' >"$out"
  else
    size_opts=(--size "$size")
  fi
  listen="tcp://127.0.0.1:$(free_port)"
  "$SLUICE" serve --protocol "$protocol" --listen "$listen" --output "$out" "${size_opts[@]}" --once \
    >"$WORK/stream-serve.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait_listening "$listen" "$pid" || die "$name: serve is not listening: $(cat "$WORK/stream-serve.log")"
  # The read-only server's export: the source is never written, so it stays src.img.
  stats --protocol "$protocol" "$@" "nbd://127.0.0.1:$port/ro" "$listen" >/dev/null
  wait "$pid" || status=$?
  [ "$status" -eq 0 ] || die "$name: serve exited $status: $(cat "$WORK/stream-serve.log")"
  same "$WORK/src.img" "$out" "$name"
  if [ "$output" = fresh ]; then
    # Skipped holes stay holes in the fresh output (same slack as nbd -> file above).
    [ "$(stat -c %b "$out")" -le $(($(stat -c %b "$WORK/src.img") + 32)) ] ||
      die "$name: the output is less sparse than the source: holes were sent"
  fi
  pass "$name"
}
stream_case "nbd -> Chunked stream, holes sent as zeros" chunked garbage
stream_case "nbd -> Chunked stream, --prezeroed" chunked fresh --prezeroed
stream_case "nbd -> raw stream" raw garbage

# multi-conn: the server advertises it, so four connections carry the writes
: >"$WORK/b.img"
truncate -s "$size" "$WORK/b.img"
out=$(stats --connections 4 "$WORK/src.img" "nbd+unix:///b?socket=$sock")
[ "$(field "$out" connections)" = 4 ] || die "multi-conn: $(field "$out" connections) connections, expected 4"
same "$WORK/src.img" "$WORK/b.img" "multi-conn copy"
pass "multi-conn: 4 connections, same bytes"

# refusals before any data moves
if "$SLUICE" copy "$WORK/src.img" "nbd://127.0.0.1:$port/ro" 2>"$WORK/err.log"; then die "a read-only export took a copy"; fi
grep -qi "read-only" "$WORK/err.log" || die "read-only refusal unclear: $(cat "$WORK/err.log")"
same "$WORK/src.img" "$WORK/ro.img" "the read-only export"
pass "a read-only export is refused: $(cat "$WORK/err.log")"
if "$SLUICE" copy "$WORK/src.img" "nbd://127.0.0.1:$port_rw/small" 2>"$WORK/err.log"; then die "a too-small export took a copy"; fi
grep -qi "fewer than the source" "$WORK/err.log" || die "too-small refusal unclear: $(cat "$WORK/err.log")"
[ "$(stat -c %b "$WORK/small.img")" -eq 0 ] || die "the too-small export was written to"
pass "an export smaller than the source is refused: $(cat "$WORK/err.log")"

# TLS, x509: the server's certificate for localhost, the client trusting the CA
PKI="$WORK/pki"
mkdir -p "$PKI" "$WORK/client-pki"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=sluice test CA" \
  -keyout "$PKI/ca-key.pem" -out "$PKI/ca-cert.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout "$PKI/server-key.pem" -out "$PKI/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$PKI/ext.cnf"
openssl x509 -req -in "$PKI/server.csr" -CA "$PKI/ca-cert.pem" -CAkey "$PKI/ca-key.pem" -CAcreateserial \
  -days 1 -extfile "$PKI/ext.cnf" -out "$PKI/server-cert.pem" 2>/dev/null
cp "$PKI/ca-cert.pem" "$WORK/client-pki/"
truncate -s "$size" "$WORK/tls.img"
port_tls=$(free_port)
start_server "tcp://127.0.0.1:$port_tls" --export t="$WORK/tls.img" \
  --tls-cert "$PKI/server-cert.pem" --tls-key "$PKI/server-key.pem"
out=$(stats "$WORK/src.img" "nbds://localhost:$port_tls/t?tls-certificates=$WORK/client-pki")
[ "$(field "$out" tls_records)" -gt 0 ] || die "TLS copy reported no TLS records"
same "$WORK/src.img" "$WORK/tls.img" "TLS x509 write"
stats "nbds://localhost:$port_tls/t?tls-certificates=$WORK/client-pki" "$WORK/tls-back.img" >/dev/null
same "$WORK/src.img" "$WORK/tls-back.img" "TLS x509 read"
if "$SLUICE" copy "$WORK/src.img" "nbd://127.0.0.1:$port_tls/t" 2>"$WORK/err.log"; then
  die "a plaintext client got through to a TLS-only server"
fi
pass "TLS x509 both ways; plaintext refused: $(cat "$WORK/err.log")"

# TLS, PSK over a Unix socket
printf 'alice:%s\n' "$(openssl rand -hex 32)" >"$WORK/keys.psk"
truncate -s "$size" "$WORK/psk.img"
psk_sock="$WORK/psk.sock"
start_server "unix://$psk_sock" --export p="$WORK/psk.img" --tls-psk-file "$WORK/keys.psk"
stats "$WORK/src.img" "nbds+unix://alice@/p?socket=$psk_sock&tls-psk-file=$WORK/keys.psk" >/dev/null
same "$WORK/src.img" "$WORK/psk.img" "TLS PSK write"
printf 'alice:%s\n' "$(openssl rand -hex 32)" >"$WORK/wrong.psk"
if "$SLUICE" copy "$WORK/src.img" "nbds+unix://alice@/p?socket=$psk_sock&tls-psk-file=$WORK/wrong.psk" 2>"$WORK/err.log"; then
  die "a wrong PSK was accepted"
fi
pass "TLS PSK; a wrong key refused: $(cat "$WORK/err.log")"

kill -0 "$a_server" || die "the read-only server died"
echo "all nbd-self checks passed"
