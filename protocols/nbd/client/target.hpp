// Where an NBD export is and how to reach it, from the URIs libnbd users write:
//
//   nbd://HOST[:PORT]/EXPORT           nbds://...   (TLS required)
//   nbd+unix:///EXPORT?socket=PATH     nbds+unix://...
//   tcp://HOST:PORT/EXPORT, unix:///PATH, tls://HOST:PORT/EXPORT  (with --protocol nbd)
//
// The export name is the path without its one leading '/', percent-decoded
// ("nbd://h//disk" names "/disk"). Query parameters, as libnbd reads them:
// socket=PATH, tls-certificates=DIR (ca-cert.pem, client-cert.pem, client-key.pem),
// tls-psk-file=FILE (identity:hexkey lines; the URI's user picks the identity),
// tls-hostname=NAME, tls-verify-peer=false.
#pragma once

#include <string>
#include <string_view>

#include "engine/error.hpp"
#include "engine/net/address.hpp"
#include "engine/net/tls_options.hpp"
#include "engine/uri.hpp"

namespace sluice::nbd {

struct Target {
  NetAddress address;
  std::string export_name;
  // STARTTLS is required: a server that does not offer it is refused, never used in
  // plain text.
  bool tls = false;
  TlsOptions tls_options;
  // The hostname to verify the certificate against (and send as SNI): the URI's host,
  // or tls-hostname. Empty for Unix sockets unless given: only the chain is checked.
  std::string tls_hostname;
  // The URI without its query, for messages ("nbd://localhost:10809/disk").
  std::string display;
};

// True for nbd, nbds, nbd+unix, nbds+unix.
bool is_nbd_scheme(std::string_view scheme);

// `uri` is an NBD URI, or tcp://, tls:// or unix:// that the caller decided means NBD.
// `base` holds TLS settings given outside the URI (command line), which the URI's
// parameters override.
Result<Target> parse_target(const Uri& uri, const TlsOptions& base = {});

}  // namespace sluice::nbd
