// For tests of TLS: a certificate authority and a server certificate made at test time with
// OpenSSL (P-256 keys, valid for an hour, the server's for 127.0.0.1 and localhost), written
// as PEM files, and a blocking TLS client that sends one request and reads its whole answer.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vmm/tls/tls_transport.h"
#include "vmm/common/unique_fd.h"

namespace dsec::test {

struct OpenSslFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
  void operator()(SSL_CTX* p) const { SSL_CTX_free(p); }
  void operator()(SSL* p) const { SSL_free(p); }
  void operator()(FILE* p) const { static_cast<void>(std::fclose(p)); }
};
template <typename T>
using OpenSslPtr = std::unique_ptr<T, OpenSslFree>;

inline std::string openssl_error_text() {
  return tls::openssl_errors("");
}

// A key and its certificate, signed by `issuer` (itself when null); nullptrs on failure.
struct TestCertificate {
  OpenSslPtr<EVP_PKEY> key;
  OpenSslPtr<X509> cert;

  static TestCertificate make(const std::string& common_name, long serial,
                              const TestCertificate* issuer,
                              const std::vector<std::pair<int, std::string>>& extensions) {
    TestCertificate made;
    made.key.reset(EVP_EC_gen("P-256"));
    made.cert.reset(X509_new());
    if (!made.key || !made.cert) {
      return {};
    }
    X509* cert = made.cert.get();
    static_cast<void>(X509_set_version(cert, 2));
    ASN1_INTEGER_set(X509_get_serialNumber(cert), serial);
    X509_gmtime_adj(X509_getm_notBefore(cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_set_pubkey(cert, made.key.get());
    X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN", MBSTRING_ASC,
                               reinterpret_cast<const unsigned char*>(common_name.c_str()), -1, -1,
                               0);
    X509* issuer_cert = issuer != nullptr ? issuer->cert.get() : cert;
    EVP_PKEY* issuer_key = issuer != nullptr ? issuer->key.get() : made.key.get();
    X509_set_issuer_name(cert, X509_get_subject_name(issuer_cert));
    X509V3_CTX context{};
    X509V3_set_ctx_nodb(&context);
    X509V3_set_ctx(&context, issuer_cert, cert, nullptr, nullptr, 0);
    for (const auto& [nid, value] : extensions) {
      OpenSslPtr<X509_EXTENSION> extension(
          X509V3_EXT_conf_nid(nullptr, &context, nid, value.c_str()));
      if (!extension || X509_add_ext(cert, extension.get(), -1) != 1) {
        return {};
      }
    }
    if (X509_sign(cert, issuer_key, EVP_sha256()) == 0) {
      return {};
    }
    return made;
  }

  bool write_cert(const std::string& path) const {
    OpenSslPtr<FILE> file(std::fopen(path.c_str(), "w"));
    return file && PEM_write_X509(file.get(), cert.get()) == 1;
  }
  bool write_key(const std::string& path, mode_t mode = 0600) const {
    OpenSslPtr<FILE> file(std::fopen(path.c_str(), "w"));
    return file && ::fchmod(fileno(file.get()), mode) == 0 &&
           PEM_write_PrivateKey(file.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) == 1;
  }
};

// A test CA and a server certificate it signed, for 127.0.0.1 and localhost.
struct TestPki {
  TestCertificate ca = TestCertificate::make("dsec test CA", 1, nullptr,
                                             {{NID_basic_constraints, "critical,CA:TRUE"},
                                              {NID_key_usage, "critical,keyCertSign,cRLSign"},
                                              {NID_subject_key_identifier, "hash"}});
  TestCertificate server =
      TestCertificate::make("127.0.0.1", 2, &ca,
                            {{NID_basic_constraints, "critical,CA:FALSE"},
                             {NID_key_usage, "critical,digitalSignature"},
                             {NID_ext_key_usage, "serverAuth"},
                             {NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost"},
                             {NID_authority_key_identifier, "keyid:always"}});
};

// What a TLS client saw: whether its handshake passed (why not, if not), and every byte the
// server sent until it closed.
struct TlsExchange {
  bool handshake = false;
  std::string error;
  std::string answer;
};

// A TCP connection to 127.0.0.1:`port`, blocking, with 10 s limits on each read and write.
inline UniqueFd connect_loopback(uint16_t port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  timeval limit{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    return UniqueFd();
  }
  return fd;
}

// Calls `io` (an SSL_* call on a blocking socket) again while a signal interrupted it; its
// SSL_get_error() code at the end (SSL_ERROR_NONE when it succeeded).
template <typename Io>
int tls_call(SSL* ssl, const Io& io) {
  while (true) {
    errno = 0;
    const int done = io();
    if (done == 1) {
      return SSL_ERROR_NONE;
    }
    const int error = SSL_get_error(ssl, done);
    if ((error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) || errno != EINTR) {
      return error;
    }
  }
}

// Connects over TLS, trusting `ca` only (or nothing when null) and checking that the server's
// certificate names 127.0.0.1, then sends `request` and reads until the server closes.
inline TlsExchange tls_exchange(uint16_t port, X509* ca, const std::string& request) {
  TlsExchange exchange;
  ERR_clear_error();
  OpenSslPtr<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (ca != nullptr) {
    X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx.get()), ca);
  }
  const UniqueFd fd = connect_loopback(port);
  if (!fd) {
    exchange.error = "cannot connect";
    return exchange;
  }
  OpenSslPtr<SSL> ssl(SSL_new(ctx.get()));
  X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl.get()), "127.0.0.1");
  SSL_set_fd(ssl.get(), fd.get());
  if (const int error = tls_call(ssl.get(), [&] { return SSL_connect(ssl.get()); });
      error != SSL_ERROR_NONE) {
    exchange.error = "SSL_connect: error " + std::to_string(error) + " (errno " +
                     std::to_string(errno) + "): " + openssl_error_text();
    return exchange;
  }
  exchange.handshake = true;
  size_t written = 0;
  if (tls_call(ssl.get(), [&] {
        return SSL_write_ex(ssl.get(), request.data(), request.size(), &written);
      }) != SSL_ERROR_NONE) {
    exchange.error = "write: " + openssl_error_text();
    return exchange;
  }
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while (true) {
    const int error = tls_call(
        ssl.get(), [&] { return SSL_read_ex(ssl.get(), buffer.data(), buffer.size(), &n); });
    if (error != SSL_ERROR_NONE) {
      if (error != SSL_ERROR_ZERO_RETURN) {
        exchange.error = "SSL_read: error " + std::to_string(error) + " (errno " +
                         std::to_string(errno) + "): " + openssl_error_text();
      }
      break;
    }
    exchange.answer.append(buffer.data(), n);
  }
  return exchange;
}

}  // namespace dsec::test
