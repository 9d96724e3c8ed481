// The API's answers against the schemas docs/api-openapi.json gives them, which follow
// Firecracker's published API (its swagger, v1.16.1): each GET's body, for a fresh VMM,
// one configured with every device (several interfaces among them) and a restored one, and
// a refusal's body. A field left out, one added, a null where the schema has none, or a
// value of another type fails here, naming its place in the body.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/support/api_calls.h"
#include "tests/support/build_paths.h"
#include "tests/support/fake_vm_backend.h"
#include "tests/support/file_text.h"
#include "tests/support/temp_dir.h"
#include "vmm/api/vm_api.h"

namespace dsec::api {
namespace {

using nlohmann::json;

// OpenAPI 3.0's schema keywords that the document uses (pattern aside: its checks are the
// parsers' unit tests'). Each departure goes to `errors`, at the JSON pointer `at`.
class SchemaCheck {
 public:
  explicit SchemaCheck(json document) : document_(std::move(document)) {}

  std::vector<std::string> errors_of(const json& schema, const json& value) {
    errors_.clear();
    check(schema, value, "");
    return errors_;
  }

  // The schema of the JSON answer `status` of `method` `path`.
  const json& response_schema(const std::string& method, const std::string& path, int status) {
    const json* response =
        &document_.at("paths").at(path).at(method).at("responses").at(std::to_string(status));
    if (response->contains("$ref")) {
      response = &resolve(*response);
    }
    return response->at("content").at("application/json").at("schema");
  }

 private:
  const json& resolve(const json& schema) const {
    return document_.at(json::json_pointer(schema.at("$ref").get<std::string>().substr(1)));
  }

  void fail(const std::string& at, const std::string& what) {
    errors_.push_back((at.empty() ? "/" : at) + ": " + what);
  }

  static bool has_type(const json& value, const std::string& type) {
    if (type == "object") return value.is_object();
    if (type == "array") return value.is_array();
    if (type == "string") return value.is_string();
    if (type == "integer") return value.is_number_integer();
    if (type == "number") return value.is_number();
    if (type == "boolean") return value.is_boolean();
    return false;
  }

  void check(const json& schema, const json& value, const std::string& at) {
    if (schema.contains("$ref")) {
      check(resolve(schema), value, at);
      return;
    }
    if (value.is_null()) {
      if (!schema.value("nullable", false)) {
        fail(at, "null, where the schema has no nullable");
      }
      return;
    }
    for (const auto& part : schema.value("allOf", json::array())) {
      check(part, value, at);
    }
    if (schema.contains("type") && !has_type(value, schema.at("type").get<std::string>())) {
      fail(at, value.dump() + " is not of type " + schema.at("type").get<std::string>());
      return;
    }
    if (schema.contains("enum") &&
        std::find(schema.at("enum").begin(), schema.at("enum").end(), value) ==
            schema.at("enum").end()) {
      fail(at, value.dump() + " is not one of " + schema.at("enum").dump());
    }
    if (value.is_number()) {
      if (schema.contains("minimum") && value < schema.at("minimum")) {
        fail(at, value.dump() + " is under the minimum");
      }
      if (schema.contains("maximum") && value > schema.at("maximum")) {
        fail(at, value.dump() + " is over the maximum");
      }
    }
    if (value.is_string() && schema.contains("maxLength") &&
        value.get<std::string>().size() > schema.at("maxLength").get<size_t>()) {
      fail(at, value.dump() + " is longer than maxLength");
    }
    if (value.is_array()) {
      if (schema.contains("maxItems") && value.size() > schema.at("maxItems").get<size_t>()) {
        fail(at, "more items than maxItems");
      }
      for (size_t i = 0; i < value.size() && schema.contains("items"); ++i) {
        check(schema.at("items"), value[i], at + "/" + std::to_string(i));
      }
    }
    if (value.is_object()) {
      const json properties = schema.value("properties", json::object());
      for (const auto& name : schema.value("required", json::array())) {
        if (!value.contains(name.get<std::string>())) {
          fail(at, "the required '" + name.get<std::string>() + "' is missing");
        }
      }
      for (const auto& [name, field] : value.items()) {
        if (properties.contains(name)) {
          check(properties.at(name), field, at + "/" + name);
        } else if (!schema.value("additionalProperties", true)) {
          fail(at, "'" + name + "' is not in the schema");
        }
      }
    }
  }

  json document_;
  std::vector<std::string> errors_;
};

class ApiResponseSchema : public ::testing::Test {
 protected:
  ApiResponseSchema() {
    std::ofstream(kernel_) << "kernel";
    std::ofstream(rootfs_) << "rootfs";
  }

  // The errors of the answer to GET `path` against its schema; the answer must be a 200.
  std::vector<std::string> get_errors(const std::string& path) {
    const auto r = test::call(api_, http::Method::kGet, path, "");
    EXPECT_EQ(r.status, 200) << path;
    return schemas_.errors_of(schemas_.response_schema("get", path, 200), json::parse(r.body));
  }
  http::HttpResponse put(const std::string& path, const json& body) {
    return test::call(api_, http::Method::kPut, path, body.dump());
  }
  void expect_every_get_conforms(const std::string& when) {
    for (const char* path : {"/", "/version", "/machine-config", "/vm/config"}) {
      EXPECT_THAT(get_errors(path), ::testing::IsEmpty()) << "GET " << path << " " << when;
    }
  }

  SchemaCheck schemas_{
      json::parse(test::file_text(dsec::test::source_path("/docs/api-openapi.json")))};
  test::TempDir dir_;
  const std::string kernel_ = dir_.file("vmlinux");
  const std::string rootfs_ = dir_.file("rootfs.ext4");
  test::FakeVmBackend backend_;
  VmApi api_{backend_, "schemas"};
};

TEST_F(ApiResponseSchema, AFreshVmmsAnswersHaveFirecrackersShape) {
  expect_every_get_conforms("on a fresh VMM");
  const auto config = json::parse(test::call(api_, http::Method::kGet, "/vm/config", "").body);
  for (const char* absent : {"balloon", "cpu-config", "logger", "metrics", "memory-hotplug",
                             "mmds-config", "boot-source", "vsock", "entropy"}) {
    ASSERT_TRUE(config.contains(absent)) << absent;
    EXPECT_TRUE(config.at(absent).is_null()) << absent;
  }
}

TEST_F(ApiResponseSchema, AVmWithEveryDeviceAnswersInFirecrackersShape) {
  const json limiter = {{"bandwidth", {{"size", 1000}, {"refill_time", 100}}},
                        {"ops", {{"size", 10}, {"one_time_burst", 5}, {"refill_time", 100}}}};
  ASSERT_EQ(put("/boot-source", {{"kernel_image_path", kernel_}, {"initrd_path", nullptr}}).status,
            204);
  ASSERT_EQ(put("/machine-config", {{"vcpu_count", 2}, {"mem_size_mib", 256}, {"smt", true}})
                .status,
            204);
  ASSERT_EQ(put("/drives/rootfs", {{"drive_id", "rootfs"},
                                   {"path_on_host", rootfs_},
                                   {"is_root_device", true},
                                   {"is_read_only", false},
                                   {"partuuid", nullptr},
                                   {"rate_limiter", limiter}})
                .status,
            204);
  ASSERT_EQ(put("/drives/scratch", {{"drive_id", "scratch"},
                                    {"path_on_host", rootfs_},
                                    {"is_root_device", false},
                                    {"is_read_only", true}})
                .status,
            204);
  for (const char* id : {"wan", "lan"}) {
    ASSERT_EQ(put(std::string("/network-interfaces/") + id,
                  {{"iface_id", id},
                   {"host_dev_name", std::string("tap-") + id},
                   {"guest_mac", nullptr},
                   {"tx_rate_limiter", limiter}})
                  .status,
              204);
  }
  ASSERT_EQ(put("/vsock", {{"guest_cid", 3}, {"uds_path", dir_.file("v.sock")}}).status, 204);
  ASSERT_EQ(put("/entropy", {{"rate_limiter", limiter}}).status, 204);
  ASSERT_EQ(put("/mmds/config", {{"version", "V2"}, {"network_interfaces", {"lan"}}}).status, 204);
  ASSERT_EQ(put("/mmds", {{"latest", {{"meta-data", {{"id", "vm-1"}}}}}}).status, 204);
  expect_every_get_conforms("configured, before the start");
  ASSERT_EQ(put("/actions", {{"action_type", "InstanceStart"}}).status, 204);
  expect_every_get_conforms("running");
  EXPECT_EQ(json::parse(test::call(api_, http::Method::kGet, "/machine-config", "").body)
                .at("huge_pages"),
            "Transparent")
      << "what guest memory is, whatever the PUT said";
  const auto config = json::parse(test::call(api_, http::Method::kGet, "/vm/config", "").body);
  EXPECT_EQ(config.at("network-interfaces").size(), 2u);
  EXPECT_EQ(config.at("drives").size(), 2u);
  EXPECT_EQ(config.at("mmds-config"), json({{"version", "V2"},
                                            {"network_interfaces", {"lan"}},
                                            {"ipv4_address", "169.254.169.254"},
                                            {"imds_compat", false}}));
}

TEST_F(ApiResponseSchema, MmdsAnswersAndRefusalsHaveFirecrackersShape) {
  EXPECT_EQ(test::call(api_, http::Method::kGet, "/mmds", "").body, "{}");
  const auto early = test::call(api_, http::Method::kPatch, "/mmds", R"({"a":1})");
  EXPECT_EQ(early.status, 400);
  EXPECT_EQ(json::parse(early.body).at("fault_message"), "The MMDS data store is not initialized.");
  EXPECT_EQ(put("/mmds", {{"a", {{"b", 1}}}}).status, 204);
  EXPECT_EQ(test::call(api_, http::Method::kPatch, "/mmds", R"({"a":{"b":null,"c":"d"}})").status,
            204);
  EXPECT_EQ(test::call(api_, http::Method::kGet, "/mmds", "").body, R"({"a":{"c":"d"}})");
  const auto big = put("/mmds", {{"k", std::string(60000, 'x')}});
  EXPECT_EQ(big.status, 413);
  EXPECT_THAT(schemas_.errors_of(schemas_.response_schema("put", "/mmds", 413), json::parse(big.body)),
              ::testing::IsEmpty());
  EXPECT_EQ(test::call(api_, http::Method::kPut, "/mmds", std::string(5000, '[')).status, 400);
  EXPECT_EQ(test::call(api_, http::Method::kPut, "/mmds", "{nope").status, 400);
  const auto unknown = put("/mmds/config", {{"network_interfaces", {"eth9"}}});
  EXPECT_EQ(unknown.status, 400);
  EXPECT_THAT(json::parse(unknown.body).at("fault_message").get<std::string>(),
              ::testing::HasSubstr("does not correspond to any existing network interface"));
  ASSERT_EQ(put("/network-interfaces/eth0", {{"iface_id", "eth0"}, {"host_dev_name", "tap0"}}).status,
            204);
  EXPECT_EQ(put("/mmds/config", {{"network_interfaces", {"eth0"}}, {"ipv4_address", "10.0.0.1"}})
                .status,
            400);
  EXPECT_EQ(put("/mmds/config", {{"network_interfaces", json::array()}}).status, 400);
  EXPECT_EQ(put("/mmds/config", {{"network_interfaces", {"eth0"}}, {"version", "V3"}}).status, 400);
  EXPECT_EQ(put("/mmds/config", {{"network_interfaces", {"eth0"}}, {"ipv4_address", "169.254.1.1"}})
                .status,
            204);
  EXPECT_THAT(get_errors("/vm/config"), ::testing::IsEmpty());
  EXPECT_THAT(get_errors("/mmds"), ::testing::IsEmpty());
}

TEST_F(ApiResponseSchema, ARestoredVmAnswersInFirecrackersShape) {
  ASSERT_EQ(put("/snapshot/load", {{"snapshot_path", "/s/state"},
                                   {"mem_backend",
                                    {{"backend_type", "File"}, {"backend_path", "/s/memory"}}}})
                .status,
            204);
  backend_.machine_config.nets = {{.tap = "tap0", .host_cidr = "", .mac = ""}};
  expect_every_get_conforms("restored (no boot source)");
}

TEST_F(ApiResponseSchema, ARefusalIsAnErrorBody) {
  const auto r = put("/network-interfaces/a", {{"iface_id", "a"}, {"mtu", 1500}});
  ASSERT_EQ(r.status, 400);
  EXPECT_THAT(
      schemas_.errors_of(schemas_.response_schema("put", "/network-interfaces/{iface_id}", 400),
                         json::parse(r.body)),
      ::testing::IsEmpty());
}

// The checker itself finds what it is for.
TEST_F(ApiResponseSchema, TheCheckNamesWhatDepartsFromTheSchema) {
  const auto& schema = schemas_.response_schema("get", "/vm/config", 200);
  auto config = json::parse(test::call(api_, http::Method::kGet, "/vm/config", "").body);
  config.erase("balloon");
  config["extra"] = 1;
  config["machine-config"]["vcpu_count"] = "2";
  config["drives"] = {{{"drive_id", "a"}, {"is_root_device", nullptr}, {"path_on_host", "/a"}}};
  EXPECT_THAT(schemas_.errors_of(schema, config),
              ::testing::UnorderedElementsAre(
                  "/: the required 'balloon' is missing", "/: 'extra' is not in the schema",
                  "/machine-config/vcpu_count: \"2\" is not of type integer",
                  "/drives/0/is_root_device: null, where the schema has no nullable"));
}

}  // namespace
}  // namespace dsec::api
