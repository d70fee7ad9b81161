#!/bin/bash
# TLS: x509 certificates and pre-shared keys, from nbdcopy nbds:// and nbdinfo; with
# TLS required, plaintext options are refused with TLS_REQD and EXPORT_NAME before
# STARTTLS closes the connection.
source "$(dirname "$0")/nbd_server_lib.sh"
requires openssl nbdcopy nbdinfo nbdkit python3

# A CA and a server certificate for localhost (generated here, valid for a day).
PKI="$WORK/pki"
mkdir -p "$PKI"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=sluice test CA" \
  -keyout "$PKI/ca-key.pem" -out "$PKI/ca-cert.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
  -keyout "$PKI/server-key.pem" -out "$PKI/server.csr" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$PKI/ext.cnf"
openssl x509 -req -in "$PKI/server.csr" -CA "$PKI/ca-cert.pem" -CAkey "$PKI/ca-key.pem" -CAcreateserial \
  -days 1 -extfile "$PKI/ext.cnf" -out "$PKI/server-cert.pem" 2>/dev/null
# libnbd looks for ca-cert.pem in the directory it is given.
CLIENT_DIR="$WORK/client-pki"
mkdir -p "$CLIENT_DIR"
cp "$PKI/ca-cert.pem" "$CLIENT_DIR/"

SIZE=64M
truncate -s "$SIZE" "$WORK/disk.img"
PORT=$(free_port)
start_server "tcp://127.0.0.1:$PORT" --export disk="$WORK/disk.img" \
  --tls-cert "$PKI/server-cert.pem" --tls-key "$PKI/server-key.pem"
T="nbds://localhost:$PORT/disk?tls-certificates=$CLIENT_DIR"

grep -q 'with TLS' <<<"$(nbdinfo "$T")" || die "nbdinfo did not negotiate TLS"
nbdkit -U - sparse-random "$SIZE" seed=99 --run "nbdcopy \"\$uri\" '$T'" || die "nbdcopy into nbds://"
nbdkit -U - sparse-random "$SIZE" seed=99 --run "nbdcopy '$T' \"\$uri\"" || die "nbdcopy out of nbds://"
pass "x509: nbdinfo and nbdcopy both ways over nbds://, verified by sparse-random"

# Plaintext clients: refused before TLS.
if nbdinfo "nbd://localhost:$PORT/disk" >/dev/null 2>&1; then die "a plaintext client got in"; fi
python3 - 127.0.0.1 "$PORT" <<'PY' || die "TLS_REQD"
import sys, struct, rawnbd
TLS_REQD = 0x80000005
s = rawnbd.connect((sys.argv[1], int(sys.argv[2])))
rawnbd.greet(s)
for opt, data in ((3, b""), (8, b""), (7, struct.pack(">I", 4) + b"disk" + struct.pack(">H", 0)), (42, b"")):
    rawnbd.option(s, opt, data)
    _, rtype, _ = rawnbd.option_reply(s)
    assert rtype == TLS_REQD, "option %d before STARTTLS: reply 0x%x, expected TLS_REQD" % (opt, rtype)
rawnbd.option(s, 2)          # ABORT is still allowed
_, rtype, _ = rawnbd.option_reply(s)
assert rtype == 1, "ABORT not acknowledged"
s = rawnbd.connect((sys.argv[1], int(sys.argv[2])))
rawnbd.greet(s)
rawnbd.option(s, 1, b"disk")  # EXPORT_NAME cannot be refused: the server must hang up
assert rawnbd.closed(s), "EXPORT_NAME before STARTTLS did not close the connection"
print("ok: LIST, STRUCTURED_REPLY, GO and unknown options get TLS_REQD; EXPORT_NAME closes")
PY
# A client that does not trust the server's CA fails.
mkdir -p "$WORK/other-ca"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=someone else" \
  -keyout "$WORK/other-ca/key.pem" -out "$WORK/other-ca/ca-cert.pem" 2>/dev/null
if nbdinfo "nbds://localhost:$PORT/disk?tls-certificates=$WORK/other-ca" >/dev/null 2>&1; then
  die "a client with the wrong CA connected"
fi
pass "plaintext refused with TLS_REQD, wrong CA refused"
stop_server

# Pre-shared keys (nbdkit's identity:hexkey file), over a Unix socket too.
printf 'alice:%s\n' "$(openssl rand -hex 32)" >"$WORK/keys.psk"
SOCK="$WORK/nbd.sock"
start_server "unix://$SOCK" --export disk="$WORK/disk.img" --tls-psk-file "$WORK/keys.psk"
P="nbds+unix://alice@/disk?socket=$SOCK&tls-psk-file=$WORK/keys.psk"
grep -q 'with TLS' <<<"$(nbdinfo "$P")" || die "nbdinfo with PSK"
nbdkit -U - sparse-random "$SIZE" seed=7 --run "nbdcopy \"\$uri\" '$P'" || die "nbdcopy into PSK"
nbdkit -U - sparse-random "$SIZE" seed=7 --run "nbdcopy '$P' \"\$uri\"" || die "nbdcopy out of PSK"
printf 'alice:%s\n' "$(openssl rand -hex 32)" >"$WORK/wrong.psk"
if nbdinfo "nbds+unix://alice@/disk?socket=$SOCK&tls-psk-file=$WORK/wrong.psk" >/dev/null 2>&1; then
  die "a wrong key was accepted"
fi
pass "PSK: nbdinfo and nbdcopy both ways over nbds+unix://, wrong key refused"
stop_server
echo "all passed"
