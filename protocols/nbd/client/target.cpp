#include "protocols/nbd/client/target.hpp"

#include <sys/stat.h>

#include "protocols/nbd/protocol.hpp"

namespace sluice::nbd {

namespace {

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

Result<bool> parse_bool(std::string_view name, std::string_view value) {
  if (value == "true" || value == "1" || value == "yes" || value == "on") return true;
  if (value == "false" || value == "0" || value == "no" || value == "off") return false;
  return fail(std::errc::invalid_argument,
              "NBD URI parameter " + std::string(name) + "=" + std::string(value) + ": expected true or false");
}

}  // namespace

bool is_nbd_scheme(std::string_view scheme) {
  return scheme == "nbd" || scheme == "nbds" || scheme == "nbd+unix" || scheme == "nbds+unix";
}

Result<Target> parse_target(const Uri& uri, const TlsOptions& base) {
  const std::string& scheme = uri.scheme;
  auto bad = [&](const std::string& why) {
    return fail(std::errc::invalid_argument, "NBD URI " + scheme + "://...: " + why);
  };
  Target target;
  target.tls_options = base;
  const bool unix_socket = scheme == "nbd+unix" || scheme == "nbds+unix" || scheme == "unix";
  target.tls = scheme == "nbds" || scheme == "nbds+unix" || scheme == "tls";
  if (!is_nbd_scheme(scheme) && scheme != "tcp" && scheme != "tls" && scheme != "unix")
    return bad("not an NBD URI");

  std::optional<std::string> socket_path;
  for (const auto& [key, value] : uri.params) {
    if (key == "socket") {
      socket_path = value;
    } else if (key == "tls-certificates") {
      if (!exists(value)) return bad("tls-certificates=" + value + ": no such directory");
      const std::string ca = value + "/ca-cert.pem";
      const std::string cert = value + "/client-cert.pem";
      const std::string key_file = value + "/client-key.pem";
      if (exists(ca)) target.tls_options.ca_file = ca;
      if (exists(cert) && exists(key_file)) {
        target.tls_options.certificate = cert;
        target.tls_options.private_key = key_file;
      }
    } else if (key == "tls-psk-file") {
      target.tls_options.psk_file = value;
    } else if (key == "tls-hostname") {
      target.tls_options.hostname = value;
    } else if (key == "tls-verify-peer") {
      auto on = parse_bool(key, value);
      if (!on) return tl::unexpected(on.error());
      target.tls_options.verify_peer = *on;
    } else if (key == "tls-type" || key.rfind("x-", 0) == 0) {
      // tls-type is implied by the credentials given; x- parameters are experiments.
    } else {
      return bad("unknown parameter '" + key + "'");
    }
  }
  if (!uri.user.empty()) target.tls_options.psk_identity = uri.user;

  std::string path = uri.path;
  if (unix_socket) {
    if (scheme == "unix") {
      // unix:///PATH names the socket itself; the export is the default one.
      if (path.empty()) return bad("no socket path");
      target.address = NetAddress{NetAddress::Kind::unix_socket, {}, 0, path};
      path.clear();
    } else {
      if (!socket_path || socket_path->empty()) return bad("needs ?socket=PATH");
      if (!uri.host.empty()) return bad("a Unix socket URI takes no host ('" + uri.host + "')");
      target.address = NetAddress{NetAddress::Kind::unix_socket, {}, 0, *socket_path};
    }
  } else {
    if (socket_path) return bad("socket= is only for nbd+unix:// and nbds+unix://");
    std::string host = uri.host.empty() ? "localhost" : uri.host;
    if ((scheme == "tcp" || scheme == "tls") && !uri.port) return bad("no port");
    target.address = NetAddress{NetAddress::Kind::tcp, host, uri.port.value_or(default_port), {}};
  }
  if (!path.empty() && path[0] == '/') path.erase(0, 1);
  target.export_name = path;
  if (target.export_name.size() > max_string_length)
    return bad("the export name is longer than 4096 bytes");

  if (!target.tls_options.hostname.empty())
    target.tls_hostname = target.tls_options.hostname;
  else if (target.address.kind == NetAddress::Kind::tcp)
    target.tls_hostname = target.address.host;

  target.display = scheme + "://";
  if (target.address.kind == NetAddress::Kind::tcp) {
    const std::string& h = target.address.host;
    target.display += h.find(':') != std::string::npos ? "[" + h + "]" : h;
    target.display += ":" + std::to_string(target.address.port);
    target.display += "/" + target.export_name;
  } else if (scheme == "unix") {
    target.display += target.address.path;
  } else {
    target.display += "/" + target.export_name + "?socket=" + target.address.path;
  }
  return target;
}

}  // namespace sluice::nbd
