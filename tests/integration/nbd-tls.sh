#!/bin/bash
# TLS via STARTTLS against nbdkit (--tls=require) and qemu-nbd: X.509 (certificates
# made with the openssl CLI into a directory with libnbd's names), client
# certificates, PSK (nbdkit's identity:hexkey file; the URI's user picks the
# identity), TLS over a Unix socket; and the refusals: a certificate from the wrong CA,
# the wrong host name, the wrong PSK, plain nbd:// to a server that requires TLS, and
# nbds:// to a server without TLS (no silent fallback).
. "$(dirname "$0")/nbd-functions.sh"
requires nbdkit nbdcopy openssl
requires_nbdkit_plugin memory

make_pki "$scratch/pki"
make_pki "$scratch/other"   # a different CA: its certificates prove nothing to us
pki=$scratch/pki
random_file "$scratch/random.img" 64M

log "X.509: nbds:// with tls-certificates"
nbdkit_tcp x509 --tls=require --tls-certificates="$pki" memory 64M
x509_uri="nbds://localhost:$port/?tls-certificates=$pki"
expect_copy "$scratch/random.img" "$x509_uri"
[[ -n $(stat_field tls_records) ]] || fail "no TLS record count in the stats"
# nbdkit (GnuTLS) takes its client's order, and Sluice offers AES-128-GCM first.
assert_eq "the suite nbdkit took" "$(stat_field tls_cipher)" TLS_AES_128_GCM_SHA256
expect_copy --tls-ciphersuites TLS_AES_256_GCM_SHA384 "$scratch/random.img" "$x509_uri"
assert_eq "the suite asked for" "$(stat_field tls_cipher)" TLS_AES_256_GCM_SHA384
expect_failure "invalid TLS 1.3 cipher suites 'TLS_NO_SUCH'" copy --tls-ciphersuites TLS_NO_SUCH \
  "$scratch/random.img" "$x509_uri"
read_export "$x509_uri" "$scratch/readback.img"
same_content "$scratch/random.img" "$scratch/readback.img"
# Sluice seals a TLS 1.3 client's records itself: GnuTLS must decrypt them in each
# suite. Each copy writes other data, read back by nbdcopy (libnbd, GnuTLS).
for suite in TLS_AES_128_GCM_SHA256 TLS_CHACHA20_POLY1305_SHA256; do
  random_file "$scratch/$suite.img" 64M
  expect_copy --tls-ciphersuites "$suite" "$scratch/$suite.img" "$x509_uri"
  assert_eq "the suite asked for" "$(stat_field tls_cipher)" "$suite"
  read_export "$x509_uri" "$scratch/readback.img"
  same_content "$scratch/$suite.img" "$scratch/readback.img"
done
expect_copy "$scratch/random.img" "$x509_uri"
expect_copy "$x509_uri" "$scratch/back.img"
same_content "$scratch/random.img" "$scratch/back.img"

log "X.509: sluice info takes copy's TLS options (--tls-ca instead of tls-certificates=)"
run_sluice info --json --tls-ca "$pki/ca-cert.pem" "nbds://localhost:$port/"
((status == 0)) || fail "sluice info --tls-ca exited $status: $err"
[[ $out == *'"size":67108864'* ]] || fail "sluice info --tls-ca: no size 67108864 in: $out"
expect_failure "certificate verification failed" info --tls-ca "$scratch/other/ca-cert.pem" "nbds://localhost:$port/"

log "X.509: the server's certificate from another CA is refused"
expect_failure "certificate verification failed" copy "$scratch/random.img" "nbds://localhost:$port/?tls-certificates=$scratch/other"
log "X.509: the wrong host name is refused"
expect_failure "certificate verification failed" copy "$scratch/random.img" \
  "nbds://localhost:$port/?tls-certificates=$pki&tls-hostname=not-this-host.example"
log "X.509: tls-verify-peer=false accepts what it cannot verify"
expect_copy "$scratch/random.img" "nbds://localhost:$port/?tls-certificates=$scratch/other&tls-verify-peer=false"

log "X.509: plain nbd:// to a server that requires TLS is told why"
expect_failure "the server requires TLS: use an nbds:// URI" copy "$scratch/random.img" "nbd://localhost:$port/"

log "X.509: the server verifies our client certificate"
nbdkit_tcp x509peer --tls=require --tls-certificates="$pki" --tls-verify-peer memory 64M
expect_copy "$scratch/random.img" "nbds://localhost:$port/?tls-certificates=$pki"
mkdir -p "$scratch/nocert" && cp "$pki/ca-cert.pem" "$scratch/nocert/"
expect_failure "client certificate" copy "$scratch/random.img" "nbds://localhost:$port/?tls-certificates=$scratch/nocert"

log "X.509 over a Unix socket (nbds+unix://)"
nbdkit_unix x509unix --tls=require --tls-certificates="$pki" memory 64M
expect_copy "$scratch/random.img" "nbds+unix:///?socket=$scratch/x509unix.sock&tls-certificates=$pki"
expect_copy "nbds+unix:///?socket=$scratch/x509unix.sock&tls-certificates=$pki" "$scratch/back.img"
same_content "$scratch/random.img" "$scratch/back.img"

log "PSK: identity from the URI's user"
printf 'alice:%s\nbob:%s\n' "$(openssl rand -hex 32)" "$(openssl rand -hex 32)" >"$scratch/keys.psk"
chmod 600 "$scratch/keys.psk"
nbdkit_tcp psk --tls=require --tls-psk="$scratch/keys.psk" memory 64M
psk_uri="nbds://bob@localhost:$port/?tls-psk-file=$scratch/keys.psk"
expect_copy "$scratch/random.img" "$psk_uri"
read_export "$psk_uri" "$scratch/readback.img"
same_content "$scratch/random.img" "$scratch/readback.img"
log "PSK: the wrong key is refused"
printf 'bob:%s\n' "$(openssl rand -hex 32)" >"$scratch/wrong.psk"
expect_failure "TLS handshake" copy "$scratch/random.img" "nbds://bob@localhost:$port/?tls-psk-file=$scratch/wrong.psk"
# The message names the pre-shared key, not a certificate nobody sent.
[[ $err == *"pre-shared key"* ]] || fail "a wrong PSK: the error does not name the key: $err"
[[ $err != *certificate* ]] || fail "a wrong PSK blamed a certificate: $err"

log "nbds:// to a server without TLS: refused, never used in plain text"
nbdkit_tcp plain --filter=log memory 64M logfile="$scratch/plain.log"
expect_failure "refused STARTTLS" copy "$scratch/random.img" "nbds://localhost:$port/?tls-certificates=$pki"
! grep -q ' Write ' "$scratch/plain.log" || fail "data went out in plain text"

if command -v qemu-nbd >/dev/null 2>&1; then
  log "qemu-nbd with tls-creds-x509"
  truncate -s 64M "$scratch/qemu.img"
  qemu_nbd_tcp qemutls -f raw -x disk --object "tls-creds-x509,id=tls0,endpoint=server,dir=$pki" --tls-creds tls0 "$scratch/qemu.img"
  expect_copy "$scratch/random.img" "nbds://localhost:$port/disk?tls-certificates=$pki"
  assert_eq "the suite qemu-nbd took" "$(stat_field tls_cipher)" TLS_AES_128_GCM_SHA256
  stop_pidfile "$pidfile_of_last"
  same_content "$scratch/random.img" "$scratch/qemu.img"
else
  log "qemu-nbd is not installed: its TLS case is not run"
fi
log "ok"
