#include "vmm/tls/tls_transport.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "vmm/common/unique_fd.h"

namespace dsec::tls {

using http::Transport;
using http::TransportIo;

void OpenSslDeleter::operator()(SSL_CTX* ctx) const {
  SSL_CTX_free(ctx);
}
void OpenSslDeleter::operator()(SSL* ssl) const {
  SSL_free(ssl);  // frees its BIO too
}
void OpenSslDeleter::operator()(BIO_METHOD* method) const {
  BIO_meth_free(method);
}

std::string openssl_errors(const char* none) {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    std::array<char, 256> line{};
    ERR_error_string_n(code, line.data(), line.size());
    text += text.empty() ? "" : "; ";
    text += line.data();
  }
  return text.empty() ? none : text;
}

namespace {

struct KeyDeleter {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
  void operator()(BIO* bio) const { BIO_free(bio); }
};

// The socket BIO: the connection's descriptor (not owned) read with recv and written with
// send(MSG_NOSIGNAL). OpenSSL's own socket BIO writes with write(2), which raises SIGPIPE
// when the client has gone.
int socket_of(BIO* bio) {
  return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
}

int socket_write(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t n = ::send(socket_of(bio), data, static_cast<size_t>(size), MSG_NOSIGNAL);
    if (n >= 0) {
      return static_cast<int>(n);
    }
    if (errno != EINTR) {
      if (errno == EAGAIN) {
        BIO_set_retry_write(bio);
      }
      return -1;
    }
  }
}

int socket_read(BIO* bio, char* data, int size) {
  BIO_clear_retry_flags(bio);
  while (true) {
    const ssize_t n = ::recv(socket_of(bio), data, static_cast<size_t>(size), 0);
    if (n > 0) {
      return static_cast<int>(n);
    }
    if (n == 0) {
      // BIO_eof() says so, which tells OpenSSL the peer closed (not an error of ours).
      BIO_set_flags(bio, BIO_FLAGS_IN_EOF);
      return 0;
    }
    if (errno != EINTR) {
      if (errno == EAGAIN) {
        BIO_set_retry_read(bio);
      }
      return -1;
    }
  }
}

long socket_ctrl(BIO* bio, int command, long /*arg*/, void* /*ptr*/) {
  switch (command) {
    case BIO_CTRL_FLUSH:
      return 1;  // nothing is buffered here
    case BIO_CTRL_EOF:
      return BIO_test_flags(bio, BIO_FLAGS_IN_EOF) != 0 ? 1 : 0;
    default:
      return 0;
  }
}

Result<std::unique_ptr<BIO_METHOD, OpenSslDeleter>> socket_bio_method() {
  std::unique_ptr<BIO_METHOD, OpenSslDeleter> method(BIO_meth_new(
      BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "dsec socket"));
  if (!method || BIO_meth_set_write(method.get(), socket_write) != 1 ||
      BIO_meth_set_read(method.get(), socket_read) != 1 ||
      BIO_meth_set_ctrl(method.get(), socket_ctrl) != 1) {
    return fail("TLS: cannot make the socket BIO: " + openssl_errors());
  }
  return method;
}

// The key file's text, refused when others may read or write it.
Result<std::string> read_private_key_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) {
    return fail_errno("--tls-key " + path + ": cannot open it", errno);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return fail_errno("--tls-key " + path + ": fstat", errno);
  }
  if (!S_ISREG(st.st_mode)) {
    return fail("--tls-key " + path + " is not a regular file", "give the PEM file of the key");
  }
  if ((st.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    return fail(fmt::format("--tls-key {} can be read or written by others (mode {:04o}): the "
                            "server's key would be every local user's",
                            path, st.st_mode & 07777),
                "chmod o-rwx it (0600, or 0640 with a group of the daemon's), and replace the "
                "key if others may have read it");
  }
  constexpr off_t kMaxKeyBytes = off_t{1} << 20;
  if (st.st_size > kMaxKeyBytes) {
    return fail("--tls-key " + path + " is larger than 1 MiB", "give the PEM file of the key");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      OPENSSL_cleanse(text.data(), text.size());
      return fail_errno("--tls-key " + path + ": read", n < 0 ? errno : EIO);
    }
    done += static_cast<size_t>(n);
  }
  return text;
}

Result<std::unique_ptr<EVP_PKEY, KeyDeleter>> load_private_key(const std::string& path) {
  std::string text = DSEC_TRY(read_private_key_file(path));
  std::unique_ptr<BIO, KeyDeleter> bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
  std::unique_ptr<EVP_PKEY, KeyDeleter> key;
  if (bio) {
    key.reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
  }
  bio.reset();
  OPENSSL_cleanse(text.data(), text.size());
  if (!key) {
    return fail(
        "--tls-key " + path + ": not a PEM private key without a passphrase: " + openssl_errors(),
        "give the server's key as PEM, unencrypted (the daemon asks no passphrase)");
  }
  return key;
}

class TlsTransport final : public Transport {
 public:
  explicit TlsTransport(std::unique_ptr<SSL, OpenSslDeleter> ssl) : ssl_(std::move(ssl)) {}
  TlsTransport(const TlsTransport&) = delete;
  TlsTransport& operator=(const TlsTransport&) = delete;
  ~TlsTransport() override {
    if (!failed_ && SSL_is_init_finished(ssl_.get()) == 1) {
      // close_notify, once and without waiting for the client's: the socket closes next.
      ERR_clear_error();
      static_cast<void>(SSL_shutdown(ssl_.get()));
      ERR_clear_error();
    }
  }

  TransportIo receive(std::span<char> buffer) override {
    ERR_clear_error();
    size_t n = 0;
    const int done = SSL_read_ex(ssl_.get(), buffer.data(), buffer.size(), &n);
    if (done == 1) {
      read_wants_write_ = false;
      return {.kind = TransportIo::Kind::kDone, .bytes = n};
    }
    return unfinished(done, /*reading=*/true);
  }

  TransportIo send(std::string_view bytes) override {
    ERR_clear_error();
    size_t n = 0;
    const int done = SSL_write_ex(ssl_.get(), bytes.data(), bytes.size(), &n);
    if (done == 1) {
      write_wants_read_ = false;
      return {.kind = TransportIo::Kind::kDone, .bytes = n};
    }
    return unfinished(done, /*reading=*/false);
  }

  uint32_t wanted_events() const override {
    return (read_wants_write_ ? POLLOUT : 0U) | (write_wants_read_ ? POLLIN : 0U);
  }
  bool established() const override { return SSL_is_init_finished(ssl_.get()) == 1; }
  bool has_buffered_input() const override { return SSL_pending(ssl_.get()) > 0; }
  std::string failure() const override { return failure_; }

 private:
  // A read or write that did not move bytes: what it waits for, or why it failed.
  TransportIo unfinished(int done, bool reading) {
    const int error = SSL_get_error(ssl_.get(), done);
    switch (error) {
      case SSL_ERROR_WANT_READ:
      case SSL_ERROR_WANT_WRITE:
        // A read waits for POLLIN and a write for POLLOUT anyway: only the other way is the
        // transport's own wish (a handshake's answer to write while reading).
        (reading ? read_wants_write_ : write_wants_read_) =
            error == (reading ? SSL_ERROR_WANT_WRITE : SSL_ERROR_WANT_READ);
        return {.kind = TransportIo::Kind::kWouldBlock};
      case SSL_ERROR_ZERO_RETURN:
        return {.kind = TransportIo::Kind::kEof};
      case SSL_ERROR_SYSCALL: {
        const int err = errno;
        failed_ = true;
        const std::string queued = openssl_errors("");
        failure_ = !queued.empty() ? queued
                   : err != 0      ? std::string(std::strerror(err))
                                   : std::string();
        return {.kind = TransportIo::Kind::kFailed};
      }
      default:
        failed_ = true;
        failure_ = openssl_errors();
        return {.kind = TransportIo::Kind::kFailed};
    }
  }

  std::unique_ptr<SSL, OpenSslDeleter> ssl_;
  bool read_wants_write_ = false;  // the last read stopped to write (a handshake's answer)
  bool write_wants_read_ = false;  // the last write stopped to read
  bool failed_ = false;            // a fatal error: no close_notify then
  std::string failure_;
};

}  // namespace

Result<std::unique_ptr<TlsServerContext>> TlsServerContext::load(const std::string& cert_path,
                                                                 const std::string& key_path) {
  ERR_clear_error();
  auto key = DSEC_TRY(load_private_key(key_path));
  std::unique_ptr<SSL_CTX, OpenSslDeleter> ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) {
    return fail("TLS: cannot make a context: " + openssl_errors());
  }
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // No renegotiation (a client could make the server redo handshakes at will), no session
  // tickets or cache (resumption buys little to a daemon whose clients keep connections).
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                     SSL_OP_NO_TICKET | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  // Writes of part of the output, from a buffer that grows between retries; buffers given
  // back while a connection is idle (up to 256 of them).
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                                  SSL_MODE_RELEASE_BUFFERS);
  if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert_path.c_str()) != 1) {
    return fail(
        "--tls-cert " + cert_path + ": cannot read a PEM certificate from it: " + openssl_errors(),
        "give the server's certificate as PEM, followed by its chain's certificates");
  }
  if (SSL_CTX_use_PrivateKey(ctx.get(), key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1) {
    return fail("--tls-key " + key_path + " is not the key of the certificate in --tls-cert " +
                    cert_path + ": " + openssl_errors(),
                "give the key that goes with that certificate");
  }
  auto method = DSEC_TRY(socket_bio_method());
  return std::unique_ptr<TlsServerContext>(new TlsServerContext(std::move(ctx), std::move(method)));
}

Result<std::unique_ptr<Transport>> TlsServerContext::session(int fd) const {
  ERR_clear_error();
  std::unique_ptr<SSL, OpenSslDeleter> ssl(SSL_new(ctx_.get()));
  if (!ssl) {
    return fail("TLS: cannot make a session: " + openssl_errors());
  }
  BIO* bio = BIO_new(socket_bio_.get());
  if (bio == nullptr) {
    return fail("TLS: cannot make a socket BIO: " + openssl_errors());
  }
  // The descriptor itself is the BIO's data (socket_of reads it back): nothing to own.
  void* data = reinterpret_cast<void*>(static_cast<intptr_t>(fd));  // NOLINT(*-int-to-ptr)
  BIO_set_data(bio, data);
  BIO_set_init(bio, 1);
  SSL_set_bio(ssl.get(), bio, bio);  // one reference, for both directions
  SSL_set_accept_state(ssl.get());
  return std::unique_ptr<Transport>(new TlsTransport(std::move(ssl)));
}

}  // namespace dsec::tls
