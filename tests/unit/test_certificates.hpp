// Test helper: a throwaway CA and a certificate it signed for "localhost" and
// 127.0.0.1, written as PEM files into a directory (libnbd's names: ca-cert.pem,
// server-cert.pem, server-key.pem, client-cert.pem, client-key.pem).
#pragma once

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <string>

namespace sluice::test {

class TestCertificates {
 public:
  explicit TestCertificates(const std::string& dir) : dir_(dir) {
    EVP_PKEY* ca_key = EVP_EC_gen("P-256");
    X509* ca = make_cert(ca_key, ca_key, nullptr, "Sluice Test CA", true);
    EVP_PKEY* server_key = EVP_EC_gen("P-256");
    X509* server = make_cert(server_key, ca_key, ca, "localhost", false);
    EVP_PKEY* client_key = EVP_EC_gen("P-256");
    X509* client = make_cert(client_key, ca_key, ca, "sluice client", false);
    write_cert(ca, "ca-cert.pem");
    write_cert(server, "server-cert.pem");
    write_key(server_key, "server-key.pem");
    write_cert(client, "client-cert.pem");
    write_key(client_key, "client-key.pem");
    X509_free(ca);
    X509_free(server);
    X509_free(client);
    EVP_PKEY_free(ca_key);
    EVP_PKEY_free(server_key);
    EVP_PKEY_free(client_key);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

 private:
  static X509* make_cert(EVP_PKEY* key, EVP_PKEY* signer, X509* issuer, const char* cn, bool is_ca) {
    static long serial = 1;
    X509* cert = X509_new();
    X509_set_version(cert, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial++);
    X509_gmtime_adj(X509_getm_notBefore(cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(cert), 86400);
    X509_set_pubkey(cert, key);
    X509_NAME* name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn), -1, -1, 0);
    X509_set_issuer_name(cert, issuer ? X509_get_subject_name(issuer) : name);
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer ? issuer : cert, cert, nullptr, nullptr, 0);
    add_ext(cert, &ctx, NID_basic_constraints, is_ca ? "critical,CA:TRUE" : "CA:FALSE");
    if (is_ca) {
      add_ext(cert, &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
    } else {
      add_ext(cert, &ctx, NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1");
      add_ext(cert, &ctx, NID_ext_key_usage, "serverAuth,clientAuth");
    }
    X509_sign(cert, signer, EVP_sha256());
    return cert;
  }
  static void add_ext(X509* cert, X509V3_CTX* ctx, int nid, const char* value) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, ctx, nid, value);
    X509_add_ext(cert, ext, -1);
    X509_EXTENSION_free(ext);
  }
  void write_cert(X509* cert, const char* name) {
    FILE* f = std::fopen(path(name).c_str(), "w");
    PEM_write_X509(f, cert);
    std::fclose(f);
  }
  void write_key(EVP_PKEY* key, const char* name) {
    FILE* f = std::fopen(path(name).c_str(), "w");
    PEM_write_PrivateKey(f, key, nullptr, nullptr, 0, nullptr, nullptr);
    std::fclose(f);
  }
  std::string dir_;
};

}  // namespace sluice::test
