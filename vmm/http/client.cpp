#include "vmm/http/client.h"

#include <fmt/format.h>
#include <http_parser.h>
#include <poll.h>
#include <sys/socket.h>

#include <array>
#include <cerrno>

#include "vmm/io/unix_socket.h"

namespace dsec::http {
namespace {

using Clock = std::chrono::steady_clock;

struct ReplyParser {
  HttpReply reply;
  bool complete = false;
  bool too_large = false;
};

int on_body(http_parser* parser, const char* at, size_t length) {
  auto& p = *static_cast<ReplyParser*>(parser->data);
  if (p.reply.body.size() + length > HttpClient::kMaxReplyBytes) {
    p.too_large = true;
    return 1;
  }
  p.reply.body.append(at, length);
  return 0;
}

int on_message_complete(http_parser* parser) {
  auto& p = *static_cast<ReplyParser*>(parser->data);
  // A 100 Continue is not the answer: the real one follows.
  if (parser->status_code == 100) {
    return 0;
  }
  p.reply.status = static_cast<int>(parser->status_code);
  p.complete = true;
  return 0;
}

// Waits until `fd` is ready for `events`, at most until `deadline`; `server` names who
// should answer.
Status wait_for(int fd, short events, Clock::time_point deadline, const std::string& what,
                const std::string& server) {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      return fail(what + ": no answer in time", "is the " + server + " stuck? its log may tell");
    }
    pollfd p{.fd = fd, .events = events, .revents = 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n > 0) {
      return ok();
    }
    if (n < 0 && errno != EINTR) {
      return fail_errno(what + ": poll", errno);
    }
  }
}

}  // namespace

std::string fault_message_of(const HttpReply& reply) {
  const auto j = nlohmann::json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("fault_message") && j["fault_message"].is_string()) {
    return j["fault_message"].get<std::string>();
  }
  return reply.body.empty() ? "no fault_message" : reply.body;
}

Result<HttpReply> HttpClient::request(std::string_view method, std::string_view path,
                                      const std::string& body) const {
  const std::string what = fmt::format("{} {} on {}", method, path, socket_path_);
  const auto deadline = Clock::now() + timeout_;
  auto fd = io::connect_unix(socket_path_);
  if (!fd) {
    const int err = fd.error().os_errno();
    if (err == ENOENT) {
      return fail("no " + server_.socket + " at " + socket_path_, server_.start_hint);
    }
    if (err == ECONNREFUSED) {
      return fail("nothing serves the " + server_.socket + " " + socket_path_,
                  "the " + server_.name + " that made it is gone; " + server_.start_hint);
    }
    return std::unexpected(fd.error().with_context(server_.socket));
  }
  std::string out =
      fmt::format("{} {} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n", method, path);
  if (!body.empty()) {
    out += fmt::format("Content-Type: application/json\r\nContent-Length: {}\r\n", body.size());
  }
  out += "\r\n" + body;
  for (size_t sent = 0; sent < out.size();) {
    const ssize_t n = ::send(fd->get(), out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      DSEC_TRY(wait_for(fd->get(), POLLOUT, deadline, what, server_.name));
    } else if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      // The server may have answered and closed before it took the whole request (a body
      // over its limit): its answer, already sent, is still there to read.
      break;
    } else if (n < 0 && errno != EINTR) {
      return fail_errno(what + ": sending the request", errno);
    }
  }

  ReplyParser state;
  http_parser parser{};
  http_parser_init(&parser, HTTP_RESPONSE);
  parser.data = &state;
  http_parser_settings settings{};
  http_parser_settings_init(&settings);
  settings.on_body = on_body;
  settings.on_message_complete = on_message_complete;
  std::array<char, 4096> buffer{};
  while (!state.complete) {
    const ssize_t n = ::recv(fd->get(), buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EAGAIN) {
      DSEC_TRY(wait_for(fd->get(), POLLIN, deadline, what, server_.name));
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return fail_errno(what + ": reading the answer", errno);
    }
    const size_t len = static_cast<size_t>(n);
    // n == 0 tells the parser the stream ended (an answer without a length ends there).
    const size_t parsed = http_parser_execute(&parser, &settings, buffer.data(), len);
    if (state.too_large) {
      return fail(fmt::format("{}: the answer is larger than {} bytes", what, kMaxReplyBytes));
    }
    if (HTTP_PARSER_ERRNO(&parser) != HPE_OK || parsed != len) {
      return fail(fmt::format("{}: the answer is not HTTP ({})", what,
                              http_errno_description(HTTP_PARSER_ERRNO(&parser))));
    }
    if (n == 0 && !state.complete) {
      return fail(what + ": the " + server_.name + " closed the connection without an answer",
                  "its log says why");
    }
  }
  return state.reply;
}

Result<nlohmann::json> HttpClient::get(std::string_view path) const {
  const auto reply = DSEC_TRY(request("GET", path, ""));
  if (reply.status != 200) {
    return fail(fmt::format("the {} refused GET {} ({}): {}", server_.name, path, reply.status,
                            fault_message_of(reply)));
  }
  auto j = nlohmann::json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return fail(fmt::format("GET {}: the {}'s answer is not JSON", path, server_.name));
  }
  return j;
}

Status HttpClient::send(std::string_view method, std::string_view path,
                        const nlohmann::json& body) const {
  const auto reply = DSEC_TRY(request(method, path, body.dump()));
  if (reply.status < 200 || reply.status > 299) {
    return fail(fmt::format("the {} refused {} {} ({}): {}", server_.name, method, path,
                            reply.status, fault_message_of(reply)));
  }
  return ok();
}

}  // namespace dsec::http
