// The pool's API over TLS, end to end without KVM: the real server (vmm/http/server.h) with a TLS
// listener on 127.0.0.1, a certificate made at test time by a test CA, the pool's router over
// a real Pool (sh "VMMs", none started here), and OpenSSL clients that trust that CA, or not,
// or speak plain HTTP, or stall in their handshake.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>

#include "tests/support/dsec_vmm.h"
#include "tests/support/eventually.h"
#include "tests/support/file_text.h"
#include "tests/support/pool_daemon.h"
#include "tests/support/stand_in_image.h"
#include "tests/support/temp_dir.h"
#include "tests/support/test_tls.h"
#include "tests/unit/pool_test_fixture.h"
#include "vmm/http/server.h"
#include "vmm/pool/image_store.h"
#include "vmm/pool/pool_api.h"
#include "vmm/pool/tenant_access.h"
#include "vmm/tls/tls_transport.h"

namespace dsec::pool {
namespace {

using namespace std::chrono_literals;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* kToken = "token-of-tenant-a-0123456789";
constexpr auto kHeaderTimeout = 1500ms;

std::string request(const std::string& method, const std::string& path, const std::string& token,
                    const std::string& body = "") {
  return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + token +
         "\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
         body;
}

// How long until the server closes `fd` (read returns 0 or fails), reading what it sends;
// 30 s at most.
std::chrono::milliseconds time_until_closed(int fd, std::string* received) {
  const auto start = std::chrono::steady_clock::now();
  std::array<char, 4096> buffer{};
  while (std::chrono::steady_clock::now() - start < 30s) {
    pollfd watch{.fd = fd, .events = POLLIN, .revents = 0};
    if (::poll(&watch, 1, 1000) <= 0) {
      continue;
    }
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EINTR) {
      continue;  // the pool's signals reach this thread too
    }
    if (n <= 0) {
      break;
    }
    received->append(buffer.data(), static_cast<size_t>(n));
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                               start);
}

class PoolTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.ca.cert && pki_.server.cert) << test::openssl_error_text();
    ASSERT_TRUE(pki_.server.write_cert(dir_.file("server.pem")));
    ASSERT_TRUE(pki_.server.write_key(dir_.file("server.key")));
    auto tls = tls::TlsServerContext::load(dir_.file("server.pem"), dir_.file("server.key"));
    ASSERT_TRUE(tls) << tls.error().message();

    auto server = http::HttpServer::bind(
        dir_.file("api.sock"),
        http::HttpLimits{.idle_timeout = 60s, .header_timeout = header_timeout_});
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
    auto port = server_->listen_on_tcp("127.0.0.1", 0, std::move(*tls));
    ASSERT_TRUE(port) << port.error().message();
    port_ = *port;

    ASSERT_FALSE(test::write_store_image(dir_.file("images"), "base", 6).empty());
    auto state = StateDir::open(dir_.file("state"));
    ASSERT_TRUE(state) << state.error().message();
    auto store = ImageStore::open(dir_.file("images"), {});
    ASSERT_TRUE(store) << store.error().message();
    pool_ =
        std::make_unique<Pool>(server_->loop(), std::move(*state), std::move(*store),
                               std::make_unique<test_fixture::ShellLauncher>(test_fixture::kServes),
                               PoolOptions{.health_interval = 0ms});
    ASSERT_TRUE(pool_->register_image({.name = "base", .ready = 0, .max = 2}));
    router_ = std::make_shared<http::Router>(pool_router(*pool_, access_));
    ASSERT_TRUE(server_->serve_deferred(
        [router = router_](const http::HttpRequest& r, http::Responder respond) {
          router->route(r, std::move(respond));
        }));
  }

  void TearDown() override {
    // The API thread first: the pool is this thread's again after it.
    if (server_) {
      server_->stop();
    }
    if (pool_) {
      pool_->shutdown();
    }
  }

  std::chrono::milliseconds header_timeout_ = kHeaderTimeout;
  test::TempDir dir_;
  test::TestPki pki_;
  TenantAccess access_{AccessPolicy{
      .daemon_uid = 0,
      .allow_uids = {},
      .allow_gids = {},
      .tokens = {{.tenant = {.name = "a", .is_operator = false, .quota = {}}, .token = kToken}},
      .hosts = default_hosts("127.0.0.1", {})}};
  std::unique_ptr<http::HttpServer> server_;
  std::unique_ptr<Pool> pool_;
  std::shared_ptr<http::Router> router_;
  uint16_t port_ = 0;
};

TEST_F(PoolTlsTest, AClientTrustingTheCaWithATenantsTokenIsServed) {
  const auto exchange =
      test::tls_exchange(port_, pki_.ca.cert.get(), request("GET", "/images", kToken));
  ASSERT_TRUE(exchange.handshake) << exchange.error;
  EXPECT_THAT(exchange.answer, StartsWith("HTTP/1.1 200")) << exchange.error;
  EXPECT_THAT(exchange.answer, HasSubstr("\"base\""));
}

TEST_F(PoolTlsTest, AWrongTokenOverTlsIsRefusedWithNothingDone) {
  const std::string wrong = "not-a-token-of-anyone-0123";
  const auto acquire = test::tls_exchange(
      port_, pki_.ca.cert.get(), request("POST", "/sandboxes", wrong, R"({"image":"base"})"));
  ASSERT_TRUE(acquire.handshake) << acquire.error;
  EXPECT_THAT(acquire.answer, StartsWith("HTTP/1.1 401")) << acquire.error;
  EXPECT_THAT(acquire.answer, HasSubstr("WWW-Authenticate: Bearer"));
  const auto list = test::tls_exchange(port_, pki_.ca.cert.get(), request("GET", "/sandboxes", ""));
  EXPECT_THAT(list.answer, StartsWith("HTTP/1.1 401"));
  server_->stop();
  EXPECT_EQ(
      pool_->count("base", SandboxState::kStarting) + pool_->count("base", SandboxState::kInUse),
      0U)
      << "no clone was started for it";
}

TEST_F(PoolTlsTest, AClientThatDoesNotTrustTheCaFailsItsHandshakeAndOthersAreStillServed) {
  const auto untrusting = test::tls_exchange(port_, nullptr, request("GET", "/images", kToken));
  EXPECT_FALSE(untrusting.handshake);
  EXPECT_THAT(untrusting.error, HasSubstr("certificate verify failed"));
  EXPECT_TRUE(untrusting.answer.empty());

  const test::TestPki other;  // a CA that signed another certificate for the same address
  const auto other_ca =
      test::tls_exchange(port_, other.ca.cert.get(), request("GET", "/images", kToken));
  EXPECT_FALSE(other_ca.handshake);

  const auto trusting =
      test::tls_exchange(port_, pki_.ca.cert.get(), request("GET", "/images", kToken));
  ASSERT_TRUE(trusting.handshake) << trusting.error;
  EXPECT_THAT(trusting.answer, StartsWith("HTTP/1.1 200"));
}

// The same with a header timeout far longer than a failed handshake takes even on a loaded
// machine, so that a close at the deadline cannot pass for one at the handshake.
class PoolTlsLongDeadlineTest : public PoolTlsTest {
 protected:
  PoolTlsLongDeadlineTest() { header_timeout_ = 60s; }
};

TEST_F(PoolTlsLongDeadlineTest, PlainHttpOnTheTlsPortIsServedNothingAndClosedAtOnce) {
  const UniqueFd fd = test::connect_loopback(port_);
  ASSERT_TRUE(fd);
  const std::string plain = request("GET", "/images", kToken);
  ASSERT_EQ(::send(fd.get(), plain.data(), plain.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(plain.size()));
  std::string received;
  const auto took = time_until_closed(fd.get(), &received);
  EXPECT_LT(took, 20s) << "closed for the bytes, not at the 60 s deadline";
  EXPECT_THAT(received, Not(HasSubstr("HTTP/1."))) << "nothing served in the clear";
  EXPECT_THAT(received, Not(HasSubstr("base")));
}

TEST_F(PoolTlsTest, AStalledHandshakeIsClosedAtTheHeaderTimeoutNotTheIdleOne) {
  // Nothing at all, and a ClientHello's first bytes and no more.
  for (const std::string& sent : {std::string(), std::string("\x16\x03\x01\x02\x00\x01", 6)}) {
    const UniqueFd fd = test::connect_loopback(port_);
    ASSERT_TRUE(fd);
    if (!sent.empty()) {
      ASSERT_EQ(::send(fd.get(), sent.data(), sent.size(), MSG_NOSIGNAL),
                static_cast<ssize_t>(sent.size()));
    }
    std::string received;
    const auto took = time_until_closed(fd.get(), &received);
    EXPECT_GE(took, kHeaderTimeout - 200ms);
    EXPECT_LT(took, 15s) << "held past the header timeout (the idle timeout is 60 s)";
    EXPECT_TRUE(received.empty());
  }
  // The server still serves.
  const auto exchange =
      test::tls_exchange(port_, pki_.ca.cert.get(), request("GET", "/images", kToken));
  EXPECT_THAT(exchange.answer, StartsWith("HTTP/1.1 200")) << exchange.error;
}

TEST_F(PoolTlsTest, AKeyOthersMayReadIsRefusedAndSoIsAKeyOfAnotherCertificate) {
  ASSERT_TRUE(pki_.server.write_key(dir_.file("open.key"), 0644));
  const auto open = tls::TlsServerContext::load(dir_.file("server.pem"), dir_.file("open.key"));
  ASSERT_FALSE(open);
  EXPECT_THAT(open.error().message(), HasSubstr("can be read or written by others (mode 0644)"));
  EXPECT_THAT(open.error().message(), HasSubstr("chmod o-rwx"));

  ASSERT_TRUE(pki_.ca.write_key(dir_.file("ca.key")));
  const auto mismatch = tls::TlsServerContext::load(dir_.file("server.pem"), dir_.file("ca.key"));
  ASSERT_FALSE(mismatch);
  EXPECT_THAT(mismatch.error().message(), HasSubstr("is not the key of the certificate"));

  const auto missing = tls::TlsServerContext::load(dir_.file("none.pem"), dir_.file("server.key"));
  ASSERT_FALSE(missing);
  EXPECT_THAT(missing.error().message(), HasSubstr("--tls-cert"));
}

// The daemon itself (dsec-vmm pool, unjailed: no clone is started): its TLS options, checked
// before anything is made, and a request over TLS to the port it logs.
class PoolTlsDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(pki_.server.write_cert(dir_.file("server.pem")));
    ASSERT_TRUE(pki_.server.write_key(dir_.file("server.key")));
    std::ofstream(dir_.file("tokens")) << "a " << kToken << "\n";
    ASSERT_EQ(::chmod(dir_.file("tokens").c_str(), 0600), 0);
  }

  // `dsec-vmm pool` with TCP, unjailed, and `extra`; refused at start: what it said.
  std::string refused(const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"pool",     "--state-dir",          dir_.file("state"),
                                     "--socket", dir_.file("pool.sock"), "--no-jail"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto ran = test::run_vmm(args, 30s);
    EXPECT_EQ(ran.exit_status, 1) << ran.describe();
    EXPECT_FALSE(std::filesystem::exists(dir_.file("state"))) << "refused before anything is made";
    return ran.err;
  }

  // The TCP port a daemon logged, once it serves (0: none in time).
  static uint16_t port_of(const test::PoolDaemon& daemon) {
    uint16_t port = 0;
    // Parsed by hand: std::regex under GCC 12 with ASan trips -Wmaybe-uninitialized.
    const std::string serving = "serving on 127.0.0.1:";
    test::eventually(
        [&] {
          const std::string log = daemon.log();
          const size_t at = log.find(serving);
          if (at != std::string::npos) {
            const size_t digits = at + serving.size();
            const size_t end = log.find(" too", digits);
            if (end != std::string::npos && end > digits) {
              port = static_cast<uint16_t>(std::stoi(log.substr(digits, end - digits)));
            }
          }
          return port != 0 && daemon.serving(1s);
        },
        30s);
    return port;
  }

  test::TempDir dir_;
  test::TestPki pki_;
};

TEST_F(PoolTlsDaemon, TheTlsOptionsAreCheckedBeforeAnythingIsMade) {
  const auto help = test::run_vmm({"pool", "--help"}, 30s);
  EXPECT_THAT(help.out, AllOf(HasSubstr("--tls-cert"), HasSubstr("--tls-key"),
                              HasSubstr("over TLS with --tls-cert and --tls-key, else in clear")));
  const std::string tokens = dir_.file("tokens");
  const std::string cert = dir_.file("server.pem");
  const std::string key = dir_.file("server.key");
  EXPECT_THAT(refused({"--tcp-port", "0", "--tokens", tokens, "--tls-cert", cert}),
              HasSubstr("--tls-cert and --tls-key go together"));
  EXPECT_THAT(refused({"--tls-cert", cert, "--tls-key", key}),
              HasSubstr("--tls-cert and --tls-key are for the TCP listener"));
  ASSERT_TRUE(pki_.server.write_key(dir_.file("open.key"), 0644));
  EXPECT_THAT(refused({"--tcp-port", "0", "--tokens", tokens, "--tls-cert", cert, "--tls-key",
                       dir_.file("open.key")}),
              HasSubstr("can be read or written by others"));
}

TEST_F(PoolTlsDaemon, TheDaemonServesItsTcpPortOverTlsAndWarnsWhenItIsInClear) {
  {
    const test::PoolDaemon daemon(
        dir_.path(), {"--no-jail", "--tcp-port", "0", "--tokens", dir_.file("tokens"), "--tls-cert",
                      dir_.file("server.pem"), "--tls-key", dir_.file("server.key")});
    const uint16_t port = port_of(daemon);
    ASSERT_NE(port, 0) << daemon.log();
    const auto exchange =
        test::tls_exchange(port, pki_.ca.cert.get(), request("GET", "/images", kToken));
    ASSERT_TRUE(exchange.handshake) << exchange.error;
    EXPECT_THAT(exchange.answer, StartsWith("HTTP/1.1 200"));
    EXPECT_THAT(daemon.log(), HasSubstr("too, over TLS"));
    EXPECT_THAT(daemon.log(), Not(HasSubstr("in clear")));
  }
  std::filesystem::remove(dir_.file("daemon.log"));
  const test::PoolDaemon daemon(dir_.path(),
                                {"--no-jail", "--tcp-port", "0", "--tokens", dir_.file("tokens")});
  ASSERT_NE(port_of(daemon), 0) << daemon.log();
  EXPECT_THAT(daemon.log(), HasSubstr("bearer tokens and every request travel in clear"));
}

}  // namespace
}  // namespace dsec::pool
