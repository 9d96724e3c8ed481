// Streamed answers (HttpResponse::stream, body_stream.h) through a real Unix socket: pieces
// reach the client as they are written, in chunked transfer encoding, and the connection
// serves its next request after the end; a client that goes away, or stops reading, ends
// the stream and its producer's writes fail; a slow reader holds the producer back rather
// than have the server buffer the body; a quiet stream sends its heartbeat.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/temp_dir.h"
#include "vmm/http/client.h"
#include "vmm/http/server.h"
#include "vmm/io/unix_socket.h"

namespace dsec::http {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A streamed answer's bytes as the client reads them: the head, then the chunks decoded.
struct Received {
  std::string head;
  std::string body;
  bool ended = false;  // the last chunk came
};

// Decodes what arrived so far (an incomplete chunk waits for the rest).
Received decode(const std::string& raw) {
  Received r;
  const size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) {
    return r;
  }
  r.head = raw.substr(0, head_end + 4);
  size_t at = head_end + 4;
  while (true) {
    const size_t line_end = raw.find("\r\n", at);
    if (line_end == std::string::npos) {
      return r;
    }
    const size_t size = std::stoul(raw.substr(at, line_end - at), nullptr, 16);
    if (size == 0) {
      r.ended = raw.size() >= line_end + 4;
      return r;
    }
    if (raw.size() < line_end + 2 + size + 2) {
      return r;
    }
    r.body += raw.substr(line_end + 2, size);
    at = line_end + 2 + size + 2;
  }
}

class HttpServerStream : public ::testing::Test {
 protected:
  void start(BodyStream::Options options, std::function<void(BodyStream&)> produce,
             HttpLimits limits = {}) {
    auto server = HttpServer::start(
        socket_,
        [this, options, produce](const HttpRequest& r) {
          if (r.path != "/stream") {
            return HttpResponse::json(nlohmann::json{{"path", r.path}});
          }
          auto stream = BodyStream::create(options);
          EXPECT_TRUE(stream);
          producers_.emplace_back([s = *stream, produce] {
            produce(*s);
            s->finish();
          });
          return HttpResponse{.status = 200,
                              .body = "first;",
                              .content_type = "text/plain",
                              .headers = {},
                              .stream = *stream};
        },
        limits);
    ASSERT_TRUE(server) << server.error().message();
    server_ = std::move(*server);
  }

  void TearDown() override {
    if (server_) {
      server_->stop();  // a producer still writing is told its client is gone
    }
    for (auto& t : producers_) {
      t.join();
    }
  }

  UniqueFd request(const std::string& what = "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n") {
    auto fd = io::connect_unix(socket_);
    EXPECT_TRUE(fd) << fd.error().message();
    EXPECT_EQ(::send(fd->get(), what.data(), what.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(what.size()));
    return std::move(*fd);
  }

  // Reads into `raw` until `done` holds of what was decoded, the server hangs up, or 30 s.
  static void read_until(const UniqueFd& fd, std::string& raw,
                         const std::function<bool(const Received&)>& done) {
    read_until_raw(fd, raw, [&](const std::string& bytes) { return done(decode(bytes)); });
  }
  // The same, `done` asked of the bytes as they came (cheaper for a large body).
  static void read_until_raw(const UniqueFd& fd, std::string& raw,
                             const std::function<bool(const std::string&)>& done) {
    char buffer[65536];
    const auto give_up = Clock::now() + std::chrono::seconds(30);
    while (!done(raw) && Clock::now() < give_up) {
      pollfd p{.fd = fd.get(), .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, 100) <= 0) {
        continue;
      }
      const ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
      if (n <= 0) {
        return;
      }
      raw.append(buffer, static_cast<size_t>(n));
    }
  }

  test::TempDir dir_;
  std::string socket_ = dir_.file("api.sock");
  std::unique_ptr<HttpServer> server_;
  std::vector<std::thread> producers_;
};

TEST_F(HttpServerStream, PiecesArriveAsWrittenAndTheConnectionServesItsNextRequest) {
  std::atomic<bool> may_go_on{false};
  start({}, [&](BodyStream& s) {
    s.write("one;");
    while (!may_go_on) {
      std::this_thread::sleep_for(milliseconds(5));
    }
    s.write("two;");
  });
  const UniqueFd fd = request();
  std::string raw;
  // "one;" arrives while the producer still waits: sent as it came, not at the end.
  read_until(fd, raw, [](const Received& r) { return r.body == "first;one;"; });
  Received got = decode(raw);
  EXPECT_EQ(got.body, "first;one;");
  EXPECT_FALSE(got.ended);
  EXPECT_NE(got.head.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << got.head;
  EXPECT_EQ(got.head.find("Content-Length"), std::string::npos) << got.head;
  may_go_on = true;
  read_until(fd, raw, [](const Received& r) { return r.ended; });
  got = decode(raw);
  EXPECT_EQ(got.body, "first;one;two;");
  EXPECT_TRUE(got.ended);
  // Keep-alive: the same connection answers another request after the stream's end.
  const std::string next = "GET /after HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd.get(), next.data(), next.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(next.size()));
  std::string rest;
  read_until(fd, rest, [](const Received& r) { return !r.head.empty(); });
  EXPECT_NE(rest.find("\"/after\""), std::string::npos) << rest;
}

TEST_F(HttpServerStream, AClientThatDisconnectsEndsTheStreamAndItsWritesFail) {
  std::atomic<bool> write_failed{false};
  start({}, [&](BodyStream& s) {
    const auto give_up = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < give_up) {
      if (!s.write("tick;")) {
        write_failed = true;
        return;
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
  });
  {
    const UniqueFd fd = request();
    std::string raw;
    read_until(fd, raw,
               [](const Received& r) { return r.body.find("tick;") != std::string::npos; });
    ASSERT_NE(decode(raw).body.find("tick;"), std::string::npos);
  }  // closed mid-stream
  const auto give_up = Clock::now() + std::chrono::seconds(5);
  while (!write_failed && Clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_TRUE(write_failed) << "the producer kept writing to a client that went away";
  // The server goes on serving.
  HttpClient client(socket_, std::chrono::seconds(5));
  auto answer = client.get("/other");
  ASSERT_TRUE(answer) << answer.error().message();
  EXPECT_EQ(answer->at("path"), "/other");
}

TEST_F(HttpServerStream, ASlowReaderHoldsTheProducerBackAndGetsEveryByte) {
  constexpr size_t kPiece = size_t{64} * 1024;
  constexpr size_t kPieces = 128;  // 8 MiB
  std::atomic<size_t> written{0};
  start(
      BodyStream::Options{
          .max_buffered = size_t{256} * 1024, .heartbeat_interval = {}, .heartbeat = {}},
      [&](BodyStream& s) {
        for (size_t i = 0; i < kPieces; ++i) {
          if (!s.write(std::string(kPiece, static_cast<char>('a' + i % 26)))) {
            return;
          }
          written += kPiece;
        }
      });
  const UniqueFd fd = request();
  // The client reads nothing for a while: the producer stops well short of the whole body
  // (the stream's buffer, the server's output and the socket's buffers hold the rest).
  std::this_thread::sleep_for(milliseconds(500));
  const size_t while_stalled = written;
  EXPECT_LT(while_stalled, size_t{3} << 20) << "the server buffered the body for a stalled reader";
  std::string raw;
  read_until_raw(fd, raw,
                 [](const std::string& bytes) { return bytes.ends_with("\r\n0\r\n\r\n"); });
  const Received got = decode(raw);
  ASSERT_TRUE(got.ended) << raw.size() << " bytes came; the producer wrote " << written
                         << "; the last: "
                         << raw.substr(raw.size() - std::min<size_t>(raw.size(), 12));
  ASSERT_EQ(got.body.size(), 6 + kPieces * kPiece);
  for (size_t i = 0; i < kPieces; ++i) {
    ASSERT_EQ(got.body[6 + i * kPiece], static_cast<char>('a' + i % 26)) << "piece " << i;
  }
}

TEST_F(HttpServerStream, AReaderThatStallsIsClosedAtTheSendTimeoutAndItsProducerStops) {
  std::atomic<bool> write_failed{false};
  HttpLimits limits;
  limits.send_timeout = milliseconds(800);
  start({},
        [&](BodyStream& s) {
          const auto give_up = Clock::now() + std::chrono::seconds(10);
          while (Clock::now() < give_up) {
            if (!s.write(std::string(size_t{64} * 1024, 'x'))) {
              write_failed = true;
              return;
            }
          }
        },
        limits);
  const UniqueFd fd = request();
  const auto give_up = Clock::now() + std::chrono::seconds(6);
  while (!write_failed && Clock::now() < give_up) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(write_failed) << "a producer waited for ever on a client that reads nothing";
}

TEST_F(HttpServerStream, AQuietStreamSendsItsHeartbeatAndAHeadGetsNoBody) {
  std::atomic<bool> done{false};
  start(BodyStream::Options{.max_buffered = 1024,
                            .heartbeat_interval = milliseconds(100),
                            .heartbeat = "beat;"},
        [&](BodyStream& s) {
          while (!done && !s.gone()) {
            std::this_thread::sleep_for(milliseconds(10));
          }
        });
  const UniqueFd fd = request();
  std::string raw;
  read_until(fd, raw, [](const Received& r) { return r.body == "first;beat;beat;"; });
  EXPECT_EQ(decode(raw).body, "first;beat;beat;");
  done = true;
  const UniqueFd head = request("HEAD /stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  std::string head_raw;
  read_until(head, head_raw, [](const Received&) { return false; });  // until it closes
  EXPECT_TRUE(head_raw.starts_with("HTTP/1.1 200")) << head_raw;
  EXPECT_TRUE(head_raw.ends_with("\r\n\r\n")) << head_raw;
}

}  // namespace
}  // namespace dsec::http
