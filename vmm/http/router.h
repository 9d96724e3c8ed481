// Method and path to handler. A path no route has is 404, a known path with a method it
// does not take is 405 (with Allow), each with a fault_message; or, as Firecracker's API
// answers both, 400 "Invalid request method and/or path: METHOD PATH.". Paths are patterns of
// segments, where "{name}" matches any one non-empty segment and hands it to the handler, so that
// Firecracker's pre-boot resources
// (/drives/{drive_id}, /network-interfaces/{iface_id}) fit as routes of their own.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "vmm/http/message.h"

namespace dsec::http {

class Router {
 public:
  // How a request no route takes is answered.
  enum class Unmatched {
    kNotFoundOrNotAllowed,  // 404, or 405 with Allow
    kFirecracker,           // 400, Firecracker's fault_message
  };
  explicit Router(Unmatched unmatched = Unmatched::kNotFoundOrNotAllowed) : unmatched_(unmatched) {}

  // The request, and the segments the pattern's "{...}" matched, in order.
  using Handler =
      std::function<HttpResponse(const HttpRequest& request, const std::vector<std::string>& args)>;

  // One that answers through its Responder, now or later (HttpServer::serve_deferred).
  using DeferredHandler = std::function<void(
      const HttpRequest& request, const std::vector<std::string>& args, Responder respond)>;

  // Adds a route; a second handler for the same method and pattern replaces the first.
  void add(Method method, std::string_view pattern, Handler handler);
  void add_deferred(Method method, std::string_view pattern, DeferredHandler handler);
  // Answers through `respond`: at once, unless the route is a deferred one.
  void route(const HttpRequest& request, Responder respond) const;
  // For a router without deferred routes: the answer (500 from a deferred route that did
  // not answer at once).
  HttpResponse route(const HttpRequest& request) const;

  // A route as it was added: its method and its pattern ("/drives/{drive_id}").
  struct RouteName {
    Method method;
    std::string pattern;
    bool operator==(const RouteName&) const = default;
  };
  // Every route, in the order added (the API's description is checked against it).
  std::vector<RouteName> routes() const;

 private:
  struct Route {
    Method method;
    std::vector<std::string> segments;  // "{...}" is a wildcard
    DeferredHandler handler;
  };
  static std::vector<std::string> split(std::string_view path);
  static bool matches(const Route& route, const std::vector<std::string>& segments,
                      std::vector<std::string>& args);

  // The answer to a request no route takes; `allowed` lists the methods its path takes.
  HttpResponse refusal(const HttpRequest& request, const std::string& allowed) const;

  Unmatched unmatched_;
  std::vector<Route> routes_;
};

}  // namespace dsec::http
