#!/bin/bash
# TLS: x509 certificates and pre-shared keys, from nbdcopy nbds:// and nbdinfo; with
# TLS required, plaintext options are refused with TLS_REQD and EXPORT_NAME before
# STARTTLS closes the connection. --tls=require and --tls=off given explicitly, and
# --tls=require without credentials refused as a usage error.
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
# STARTTLS, then something that is not TLS: the log names that, as NBD's STARTTLS (it
# used to advise sending to tls:// or https://, which are not NBD).
python3 - 127.0.0.1 "$PORT" <<'PY' || die "STARTTLS then plaintext"
import sys, rawnbd
s = rawnbd.connect_greeted((sys.argv[1], int(sys.argv[2])))
rawnbd.option(s, 5)  # STARTTLS
opt, rtype, _ = rawnbd.option_reply(s)
assert (opt, rtype) == (5, 1), "STARTTLS not acknowledged"
s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
assert rawnbd.closed(s), "plaintext after STARTTLS did not close the connection"
PY
for i in $(seq 50); do grep -q 'after STARTTLS' "$WORK/server.log" && break; sleep 0.1; done
grep -q "after STARTTLS: TLS handshake with .* failed: .*(the client does not speak TLS)$" "$WORK/server.log" ||
  die "plaintext after STARTTLS: the log does not say so: $(tail -3 "$WORK/server.log")"
if grep -q "tls:// or https://" "$WORK/server.log"; then die "an NBD client was told to send to tls:// or https://"; fi
pass "plaintext after STARTTLS: logged as the client not speaking TLS after STARTTLS"

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
# A wrong key, and an identity the server does not know, from Sluice's client: both
# ends name the pre-shared key, neither blames a certificate (none was used).
printf 'mallory:%s\n' "$(openssl rand -hex 32)" >"$WORK/stranger.psk"
chmod 600 "$WORK/wrong.psk" "$WORK/stranger.psk"
for who in alice:wrong mallory:stranger; do
  # A fresh server each time: the server logs a repeated kind of failed handshake (the
  # nbdinfo above, the case before) once per 10 s, as a count.
  stop_server
  : >"$WORK/server.log"
  start_server "unix://$SOCK" --export disk="$WORK/disk.img" --tls-psk-file "$WORK/keys.psk"
  if "$SLUICE" info "nbds+unix://${who%%:*}@/disk?socket=$SOCK&tls-psk-file=$WORK/${who#*:}.psk" \
    >/dev/null 2>"$WORK/psk-client.err"; then
    die "PSK ${who#*:}: the client was served"
  fi
  for i in $(seq 50); do grep -q 'TLS handshake' "$WORK/server.log" && break; sleep 0.1; done
  for side in "$WORK/psk-client.err" "$WORK/server.log"; do
    grep -q "pre-shared key" "$side" || die "PSK ${who#*:}: $(basename "$side") does not name the key: $(cat "$side")"
    if grep -q "certificate" "$side"; then die "PSK ${who#*:}: $(basename "$side") blames a certificate: $(cat "$side")"; fi
  done
done
pass "PSK: a wrong key and an unknown identity named as such by client and server"
stop_server

# --tls=require said explicitly: what the credentials alone imply (FORCEDTLS), not
# something laxer. A TLS client writes and reads; a plaintext one gets TLS_REQD for GO
# and is hung up on for EXPORT_NAME, and STARTTLS is accepted.
PORT=$(free_port)
start_server "tcp://127.0.0.1:$PORT" --export disk="$WORK/disk.img" --tls=require \
  --tls-cert "$PKI/server-cert.pem" --tls-key "$PKI/server-key.pem"
/usr/bin/python3 - "nbds://localhost:$PORT/disk?tls-certificates=$CLIENT_DIR" <<'PY' || die "TLS client against --tls=require"
import sys, nbd
h = nbd.NBD()
h.set_uri_allow_local_file(True)  # the URI names the CA's directory
h.connect_uri(sys.argv[1])
assert h.get_tls_negotiated(), "connected without TLS"
h.pwrite(b"r" * 65536, 1 << 20)
assert h.pread(65536, 1 << 20) == b"r" * 65536, "data read back over TLS differs"
h.shutdown()
PY
if nbdinfo "nbd://localhost:$PORT/disk" >/dev/null 2>&1; then die "--tls=require: a plaintext client got in"; fi
python3 - 127.0.0.1 "$PORT" <<'PY' || die "--tls=require: plaintext options"
import sys, struct, rawnbd
TLS_REQD, ACK = 0x80000005, 1
address = (sys.argv[1], int(sys.argv[2]))
s = rawnbd.connect_greeted(address)
rawnbd.option(s, 7, struct.pack(">I", 4) + b"disk" + struct.pack(">H", 0))  # GO
_, rtype, _ = rawnbd.option_reply(s)
assert rtype == TLS_REQD, "GO in plaintext: reply 0x%x, expected TLS_REQD" % rtype
rawnbd.option(s, 5)  # STARTTLS
opt, rtype, _ = rawnbd.option_reply(s)
assert (opt, rtype) == (5, ACK), "STARTTLS: reply 0x%x, expected ACK" % rtype
s = rawnbd.connect_greeted(address)
rawnbd.option(s, 1, b"disk")  # EXPORT_NAME
assert rawnbd.closed(s), "EXPORT_NAME in plaintext did not close the connection"
PY
stop_server
pass "--tls=require: TLS client served; plaintext GO -> TLS_REQD, STARTTLS -> ACK, EXPORT_NAME closes"

# --tls=require without credentials cannot be honoured: a usage error (exit 2) that
# says what is missing, before anything listens.
status=0
timeout 10 "$SLUICE" serve --protocol nbd --listen "unix://$WORK/require.sock" --export disk="$WORK/disk.img" \
  --tls=require >"$WORK/require.out" 2>&1 || status=$?
[ "$status" -eq 2 ] || die "--tls=require without credentials: exit status $status, expected 2: $(cat "$WORK/require.out")"
grep -qF -- "--tls=require needs --tls-cert and --tls-key, or --tls-psk-file" "$WORK/require.out" ||
  die "--tls=require without credentials: unclear message: $(cat "$WORK/require.out")"
[ -e "$WORK/require.sock" ] && die "--tls=require without credentials created its socket"
status=0
timeout 10 "$SLUICE" serve --protocol nbd --listen "unix://$WORK/require.sock" --export disk="$WORK/disk.img" \
  --tls=maybe >"$WORK/maybe.out" 2>&1 || status=$?
[ "$status" -eq 2 ] && grep -qF -- "--tls must be require or off" "$WORK/maybe.out" ||
  die "--tls=maybe: exit status $status: $(cat "$WORK/maybe.out")"
pass "--tls=require without credentials and --tls=maybe: exit 2 with the reason, nothing listening"

# --tls=off ignores the credentials (here a PSK file; nbd-server-protocol.sh does a
# certificate): plaintext clients are served, STARTTLS is refused with ERR_POLICY,
# and a client holding the right key cannot get TLS.
start_server "unix://$SOCK" --export disk="$WORK/disk.img" --tls=off --tls-psk-file "$WORK/keys.psk"
nbdsh -u "nbd+unix:///disk?socket=$SOCK" -c '
assert not h.get_tls_negotiated()
h.pwrite(b"o" * 65536, 2 << 20)
assert h.pread(65536, 2 << 20) == b"o" * 65536, "plaintext data read back differs"
' || die "plaintext I/O against --tls=off"
python3 - "$SOCK" <<'PY' || die "STARTTLS against --tls=off"
import sys, rawnbd
ERR_POLICY = 0x80000002
s = rawnbd.connect_greeted(sys.argv[1])
rawnbd.option(s, 5)
opt, rtype, _ = rawnbd.option_reply(s)
assert (opt, rtype) == (5, ERR_POLICY), "STARTTLS: reply 0x%x, expected ERR_POLICY" % rtype
PY
if nbdinfo "$P" >/dev/null 2>&1; then die "--tls=off: a client requiring TLS with the right key got TLS"; fi
stop_server
pass "--tls=off with a PSK file: plaintext served, STARTTLS -> ERR_POLICY, nbds+unix:// with the key fails"

# --tls=off still loads the credentials it sets aside: a missing key file is an error
# at start, not a surprise on the day TLS is turned back on.
status=0
timeout 10 "$SLUICE" serve --protocol nbd --listen "unix://$WORK/off.sock" --export disk="$WORK/disk.img" \
  --tls=off --tls-psk-file "$WORK/no-such.psk" >"$WORK/off.out" 2>&1 || status=$?
[ "$status" -eq 1 ] || die "--tls=off with a missing PSK file: exit status $status, expected 1: $(cat "$WORK/off.out")"
grep -qF "no-such.psk" "$WORK/off.out" || die "--tls=off with a missing PSK file: the file is not named: $(cat "$WORK/off.out")"
[ -e "$WORK/off.sock" ] && die "--tls=off with a missing PSK file created its socket"
pass "--tls=off with a missing PSK file: exit 1 naming it, nothing listening"
echo "all passed"
