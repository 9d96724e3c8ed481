#include "vmm/http/router.h"

#include <fmt/format.h>

#include <memory>
#include <optional>

namespace dsec::http {
namespace {

bool is_wildcard(std::string_view segment) {
  return segment.size() >= 2 && segment.front() == '{' && segment.back() == '}';
}

}  // namespace

std::vector<std::string> Router::split(std::string_view path) {
  std::vector<std::string> segments;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t slash = std::min(path.find('/', start), path.size());
    if (slash > start) {
      segments.emplace_back(path.substr(start, slash - start));
    }
    start = slash + 1;
  }
  return segments;
}

bool Router::matches(const Route& route, const std::vector<std::string>& segments,
                     std::vector<std::string>& args) {
  if (route.segments.size() != segments.size()) {
    return false;
  }
  args.clear();
  for (size_t i = 0; i < segments.size(); ++i) {
    if (is_wildcard(route.segments[i])) {
      args.push_back(segments[i]);
    } else if (route.segments[i] != segments[i]) {
      return false;
    }
  }
  return true;
}

void Router::add(Method method, std::string_view pattern, Handler handler) {
  add_deferred(method, pattern,
               [handler = std::move(handler)](
                   const HttpRequest& request, const std::vector<std::string>& args,
                   Responder respond) { respond(handler(request, args)); });
}

HttpResponse Router::route(const HttpRequest& request) const {
  // Shared: a deferred route may keep its Responder and answer after this returned.
  auto answer = std::make_shared<std::optional<HttpResponse>>();
  route(request, [answer](HttpResponse response) { *answer = std::move(response); });
  return std::move(*answer).value_or(
      HttpResponse::fault("this route answers later: serve it deferred", 500));
}

void Router::add_deferred(Method method, std::string_view pattern, DeferredHandler handler) {
  auto segments = split(pattern);
  for (auto& r : routes_) {
    if (r.method == method && r.segments == segments) {
      r.handler = std::move(handler);
      return;
    }
  }
  routes_.push_back({method, std::move(segments), std::move(handler)});
}

std::vector<Router::RouteName> Router::routes() const {
  std::vector<RouteName> names;
  names.reserve(routes_.size());
  for (const auto& r : routes_) {
    std::string pattern;
    for (const auto& segment : r.segments) {
      pattern += "/" + segment;
    }
    names.push_back({r.method, pattern.empty() ? "/" : pattern});
  }
  return names;
}

HttpResponse Router::refusal(const HttpRequest& request, const std::string& allowed) const {
  if (unmatched_ == Unmatched::kFirecracker) {
    // Firecracker's RequestError::InvalidPathMethod, for an unknown path and for a method
    // its path does not take alike.
    return HttpResponse::fault(fmt::format("Invalid request method and/or path: {} {}.",
                                           request.method_text, request.path));
  }
  if (allowed.empty()) {
    return HttpResponse::fault(fmt::format("no such resource: {}", request.path), 404);
  }
  auto response = HttpResponse::fault(fmt::format("{} {}: method not allowed (allowed: {})",
                                                  request.method_text, request.path, allowed),
                                      405);
  response.headers.emplace_back("Allow", allowed);
  return response;
}

void Router::route(const HttpRequest& request, Responder respond) const {
  // A path is exact: "//vm" or "/vm/" is another path than "/vm", as in Firecracker.
  if (request.path.empty() || request.path.front() != '/' ||
      (request.path.size() > 1 && request.path.back() == '/') ||
      request.path.find("//") != std::string::npos) {
    respond(refusal(request, ""));
    return;
  }
  const auto segments = split(request.path);
  std::vector<std::string> args;
  std::string allowed;
  for (const auto& r : routes_) {
    if (!matches(r, segments, args)) {
      continue;
    }
    if (r.method == request.method) {
      r.handler(request, args, std::move(respond));
      return;
    }
    allowed += allowed.empty() ? "" : ", ";
    allowed += method_name(r.method);
  }
  respond(refusal(request, allowed));
}

}  // namespace dsec::http
