#include "vmm/pool/host_route.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace dsec::pool {
namespace {

constexpr size_t kMaxIdLength = 64;

std::string lower(std::string_view text) {
  std::string out(text);
  std::ranges::transform(out, out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

bool is_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
}

}  // namespace

Result<HostRoute> parse_host_route(std::string_view host, std::string_view domain) {
  const std::string shape = fmt::format("give Host: <port>-<sandbox id>.{}", domain);
  // A ":port" suffix: the proxy's own port, whatever it is. (No IPv6 literal names a
  // sandbox.)
  if (const auto colon = host.rfind(':'); colon != std::string_view::npos) {
    host = host.substr(0, colon);
  }
  const std::string name = lower(host);
  const std::string suffix = "." + lower(domain);
  if (name.size() <= suffix.size() || !name.ends_with(suffix)) {
    return fail(fmt::format("the Host '{}' is not under this proxy's domain {}",
                            std::string(host.substr(0, 256)), domain),
                shape);
  }
  const std::string_view label = std::string_view(name).substr(0, name.size() - suffix.size());
  const auto dash = label.find('-');
  if (dash == std::string_view::npos || dash == 0 || label.find('.') != std::string_view::npos) {
    return fail(
        fmt::format("the Host '{}' names no port and sandbox", std::string(host.substr(0, 256))),
        shape);
  }
  const std::string_view port_text = label.substr(0, dash);
  const std::string_view id = label.substr(dash + 1);
  uint32_t port = 0;
  const bool digits = port_text.size() <= 5 && port_text.front() != '0' &&
                      std::ranges::all_of(port_text, [](char c) { return c >= '0' && c <= '9'; });
  if (digits) {
    for (const char c : port_text) {
      port = port * 10 + static_cast<uint32_t>(c - '0');
    }
  }
  if (!digits || port == 0 || port > 65535) {
    return fail(fmt::format("'{}' is no port", std::string(port_text.substr(0, 16))),
                "give a port of the guest's, 1 to 65535, before the first '-'");
  }
  if (id.empty() || id.size() > kMaxIdLength || !std::ranges::all_of(id, is_id_char)) {
    return fail("the Host names no sandbox id (letters, digits and '-', at most 64)", shape);
  }
  return HostRoute{.guest_port = static_cast<uint16_t>(port), .sandbox_id = std::string(id)};
}

}  // namespace dsec::pool
