// Router: method and path to handler; 404 for a path no route has, 405 (with Allow) for a
// known path with another method, each with a fault_message, as Firecracker answers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "vmm/http/router.h"

namespace dsec::http {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

HttpRequest request(Method method, std::string path) {
  HttpRequest r;
  r.method = method;
  r.method_text = std::string(method_name(method));
  r.path = std::move(path);
  return r;
}

std::string fault_of(const HttpResponse& r) {
  return nlohmann::json::parse(r.body).at("fault_message").get<std::string>();
}

class HttpRouter : public ::testing::Test {
 protected:
  HttpRouter() {
    router_.add(Method::kGet, "/", [this](const HttpRequest&, const std::vector<std::string>&) {
      calls_.push_back("GET /");
      return HttpResponse::no_content();
    });
    router_.add(Method::kPatch, "/vm", [this](const HttpRequest&, const std::vector<std::string>&) {
      calls_.push_back("PATCH /vm");
      return HttpResponse::no_content();
    });
    router_.add(Method::kPut, "/drives/{drive_id}",
                [this](const HttpRequest&, const std::vector<std::string>& args) {
                  calls_.push_back("PUT /drives/" + args.at(0));
                  return HttpResponse::no_content();
                });
    router_.add(Method::kPatch, "/drives/{drive_id}",
                [this](const HttpRequest&, const std::vector<std::string>& args) {
                  calls_.push_back("PATCH /drives/" + args.at(0));
                  return HttpResponse::no_content();
                });
  }
  Router router_;
  std::vector<std::string> calls_;
};

TEST_F(HttpRouter, RoutesByMethodAndPath) {
  EXPECT_EQ(router_.route(request(Method::kGet, "/")).status, 204);
  EXPECT_EQ(router_.route(request(Method::kPatch, "/vm")).status, 204);
  EXPECT_THAT(calls_, ElementsAre("GET /", "PATCH /vm"));
}

TEST_F(HttpRouter, AWildcardSegmentReachesTheHandler) {
  EXPECT_EQ(router_.route(request(Method::kPut, "/drives/rootfs")).status, 204);
  EXPECT_EQ(router_.route(request(Method::kPatch, "/drives/scratch")).status, 204);
  EXPECT_THAT(calls_, ElementsAre("PUT /drives/rootfs", "PATCH /drives/scratch"));
}

TEST_F(HttpRouter, AnUnknownPathIs404WithAFaultMessage) {
  for (const char* path :
       {"/nope", "/vm/nope", "/drives", "/drives/a/b", "//vm", "/vm/", "vm", ""}) {
    const auto r = router_.route(request(Method::kGet, path));
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_THAT(fault_of(r), HasSubstr("no such resource")) << path;
  }
  EXPECT_TRUE(calls_.empty());
}

TEST_F(HttpRouter, AKnownPathWithAnotherMethodIs405WithAllow) {
  const auto r = router_.route(request(Method::kGet, "/drives/x"));
  EXPECT_EQ(r.status, 405);
  EXPECT_THAT(fault_of(r), HasSubstr("GET /drives/x: method not allowed (allowed: PUT, PATCH)"));
  ASSERT_EQ(r.headers.size(), 1u);
  EXPECT_EQ(r.headers[0].first, "Allow");
  EXPECT_EQ(r.headers[0].second, "PUT, PATCH");
  EXPECT_EQ(router_.route(request(Method::kPut, "/vm")).status, 405);
  EXPECT_EQ(router_.route(request(Method::kOther, "/")).status, 405);
  EXPECT_TRUE(calls_.empty());
}

TEST_F(HttpRouter, ALaterRouteForTheSameMethodAndPathReplacesTheFirst) {
  router_.add(Method::kGet, "/", [](const HttpRequest&, const std::vector<std::string>&) {
    return HttpResponse::json({{"new", true}});
  });
  EXPECT_EQ(router_.route(request(Method::kGet, "/")).status, 200);
  EXPECT_TRUE(calls_.empty());
}

TEST_F(HttpRouter, ListsItsRoutesWithTheirPatternsInTheOrderAdded) {
  using Route = Router::RouteName;
  EXPECT_THAT(router_.routes(), ElementsAre(Route{Method::kGet, "/"}, Route{Method::kPatch, "/vm"},
                                            Route{Method::kPut, "/drives/{drive_id}"},
                                            Route{Method::kPatch, "/drives/{drive_id}"}));
}

}  // namespace
}  // namespace dsec::http
