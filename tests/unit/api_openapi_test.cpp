// docs/api-openapi.json describes the API: every route the VM's router serves has its path
// and method there, and every path and method there is a route. A route added without its
// description (or a description left behind by a route removed) fails here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/fake_vm_backend.h"
#include "tests/support/file_text.h"
#include "vmm/api/vm_api.h"

namespace dsec::api {
namespace {

// "PUT /drives/{drive_id}": OpenAPI's operation keys are lower-case method names.
std::string operation(std::string_view method, std::string_view path) {
  std::string name(method);
  std::ranges::transform(name, name.begin(),
                         [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return name + " " + std::string(path);
}

nlohmann::json description() {
  return nlohmann::json::parse(test::file_text(dsec::test::source_path("/docs/api-openapi.json")));
}

std::set<std::string> described_operations(const nlohmann::json& document) {
  // OpenAPI 3.0's operations; a path item's other keys (parameters, summary) are not.
  static constexpr std::array kOperations{"get",     "put",  "post",  "delete",
                                          "options", "head", "patch", "trace"};
  std::set<std::string> operations;
  for (const auto& [path, item] : document.at("paths").items()) {
    for (const auto& [key, value] : item.items()) {
      if (std::ranges::find(kOperations, key) != kOperations.end()) {
        operations.insert(operation(key, path));
      }
    }
  }
  return operations;
}

std::set<std::string> served_operations() {
  test::FakeVmBackend backend;
  const VmApi api(backend, "openapi");
  std::set<std::string> operations;
  for (const auto& route : api.routes()) {
    operations.insert(operation(http::method_name(route.method), route.pattern));
  }
  return operations;
}

TEST(ApiOpenApi, DescribesEveryRouteTheRouterServesAndNoOther) {
  const auto document = description();
  EXPECT_EQ(document.at("openapi").get<std::string>().substr(0, 4), "3.0.");
  const auto described = described_operations(document);
  const auto served = served_operations();
  ASSERT_FALSE(served.empty());

  std::vector<std::string> undescribed;
  std::ranges::set_difference(served, described, std::back_inserter(undescribed));
  EXPECT_THAT(undescribed, ::testing::IsEmpty())
      << "routes the router serves that docs/api-openapi.json does not describe";

  std::vector<std::string> unserved;
  std::ranges::set_difference(described, served, std::back_inserter(unserved));
  EXPECT_THAT(unserved, ::testing::IsEmpty())
      << "operations docs/api-openapi.json describes that no route serves";
}

// Each operation's path parameters are declared (on the operation or its path item), and
// every "$ref" points at something in the document.
TEST(ApiOpenApi, PathParametersAreDeclaredAndReferencesResolve) {
  const auto document = description();
  for (const auto& [path, item] : document.at("paths").items()) {
    std::set<std::string> declared;
    for (const auto& parameter : item.value("parameters", nlohmann::json::array())) {
      const auto& resolved = parameter.contains("$ref")
                                 ? document.at(nlohmann::json::json_pointer(
                                       parameter.at("$ref").get<std::string>().substr(1)))
                                 : parameter;
      declared.insert(resolved.at("name").get<std::string>());
    }
    for (size_t open = path.find('{'); open != std::string::npos; open = path.find('{', open)) {
      const size_t close = path.find('}', open);
      EXPECT_TRUE(declared.contains(path.substr(open + 1, close - open - 1))) << path;
      open = close;
    }
  }
  std::vector<const nlohmann::json*> pending{&document};
  while (!pending.empty()) {
    const nlohmann::json& node = *pending.back();
    pending.pop_back();
    if (node.is_object() && node.contains("$ref")) {
      const auto ref = node.at("$ref").get<std::string>();
      ASSERT_TRUE(ref.starts_with("#/")) << ref;
      EXPECT_TRUE(document.contains(nlohmann::json::json_pointer(ref.substr(1)))) << ref;
    }
    if (node.is_structured()) {
      for (const auto& child : node) {
        pending.push_back(&child);
      }
    }
  }
}

}  // namespace
}  // namespace dsec::api
