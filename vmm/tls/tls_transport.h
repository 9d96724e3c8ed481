// TLS for an API server's TCP listener (OpenSSL 3), linked only into the pool daemon
// (dsec-vmm-pool): the server's certificate and key, loaded once (TlsServerContext, the
// listener's TransportFactory), and one TLS session per accepted connection, driven
// without blocking by the server's event loop. The handshake happens inside the first
// receive() calls; until it is done the connection is not established() and carries no
// request.
//
// TLS 1.2 and newer, no renegotiation, no session tickets or cache (a daemon's clients hold
// their connections), and the socket written with MSG_NOSIGNAL (a custom BIO), so that a
// client that goes away is an error, never a SIGPIPE.
#pragma once

#include <openssl/bio.h>
#include <openssl/types.h>

#include <memory>
#include <string>

#include "vmm/common/error.h"
#include "vmm/http/transport.h"

namespace dsec::tls {

struct OpenSslDeleter {
  void operator()(SSL_CTX* ctx) const;
  void operator()(SSL* ssl) const;
  void operator()(BIO_METHOD* method) const;
};

// This thread's OpenSSL error queue as text ("error:0A00010B:SSL routines::wrong version
// number"; several joined by "; "), emptied; `none` when it holds nothing.
std::string openssl_errors(const char* none = "no reason given");

class TlsServerContext final : public http::TransportFactory {
 public:
  // Reads the certificate chain (PEM, the server's certificate first) and its private key
  // (PEM). The key file is refused when others may read or write it: the key must stay the
  // operator's (0600, or 0640 with a group such as Debian's ssl-cert).
  static Result<std::unique_ptr<TlsServerContext>> load(const std::string& cert_path,
                                                        const std::string& key_path);
  // A session over the accepted, non-blocking socket `fd`, which stays the caller's and must
  // outlive the session.
  Result<std::unique_ptr<http::Transport>> session(int fd) const override;

 private:
  TlsServerContext(std::unique_ptr<SSL_CTX, OpenSslDeleter> ctx,
                   std::unique_ptr<BIO_METHOD, OpenSslDeleter> socket_bio)
      : ctx_(std::move(ctx)), socket_bio_(std::move(socket_bio)) {}

  std::unique_ptr<SSL_CTX, OpenSslDeleter> ctx_;
  std::unique_ptr<BIO_METHOD, OpenSslDeleter> socket_bio_;
};

}  // namespace dsec::tls
