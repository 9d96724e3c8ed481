// For the e2e tests of the pool's clone networks (tests/e2e/pool_network*_test.cpp): the
// warm image with a network device, what clone networks the host has, and calls on a
// daemon's sandboxes.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/support/pool_daemon.h"
#include "tests/support/temp_dir.h"
#include "tests/support/warm_image.h"

namespace dsec::test {

// The warm image: a network device on TAP dsnet0, and the guest's eth0 given its address
// and route before the snapshot, so that every clone wakes with them.
inline const WarmImage& network_image() {
  return shared_warm_image({"--vcpus", "2", "--memory", "256", "--net",
                            "tap=dsnet0,host=192.168.241.1/29", "--exec",
                            "ip addr add 192.168.241.2/29 dev eth0 && ip link set eth0 up && "
                            "ip route add default via 192.168.241.1"});
}

// The clone networks on the host: their namespaces' files and their veth ends.
inline std::set<std::string> clone_networks_on_host() {
  namespace fs = std::filesystem;
  std::set<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/run/netns", ec)) {
    found.insert("netns " + entry.path().filename().string());
  }
  for (const auto& entry : fs::directory_iterator("/sys/class/net", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("vh-") || name.starts_with("dsnet")) {
      found.insert("link " + name);
    }
  }
  return found;
}

inline nlohmann::json acquire(const PoolDaemon& daemon,
                              const nlohmann::json& body = {{"image", "net"}}) {
  const auto reply = daemon.request("POST", "/sandboxes", body.dump());
  EXPECT_EQ(reply.status, 201) << reply.body;
  return reply.status == 201 ? nlohmann::json::parse(reply.body) : nlohmann::json::object();
}

// `script` with sh -c in sandbox `id`: its exit code and output, "exit N: OUTPUT".
inline std::string sh(const PoolDaemon& daemon, const std::string& id, const std::string& script) {
  const nlohmann::json body = {{"argv", {"sh", "-c", script + " 2>&1"}}, {"timeout_ms", 120000}};
  const auto reply = daemon.request("POST", "/sandboxes/" + id + "/exec", body.dump());
  if (reply.status != 200) {
    return "status " + std::to_string(reply.status) + ": " + reply.body;
  }
  const auto outcome = nlohmann::json::parse(reply.body);
  return "exit " + std::to_string(outcome["exit"]["code"].get<int>()) + ": " +
         outcome["stdout"].get<std::string>();
}

// The metric `name`'s value for sandbox `id` in /metrics' `text`, -1 when it is not there.
inline long long metric(const std::string& text, const std::string& name, const std::string& id) {
  const std::string key = name + "{sandbox=\"" + id + "\"";
  const auto at = text.find(key);
  if (at == std::string::npos) {
    return -1;
  }
  const auto space = text.find(' ', at);
  return std::stoll(text.substr(space + 1, text.find('\n', space) - space - 1));
}

// A daemon of the test's own, serving the network image as "net"; what the host had of
// clone networks before.
class PoolNetworkFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(network_image().failure.empty()) << network_image().failure;
    before_ = clone_networks_on_host();
  }
  void start_daemon(std::vector<std::string> args = {}) {
    args.insert(args.begin(), {"--ready-timeout", "280"});
    daemon_ = std::make_unique<PoolDaemon>(dir_.path(), args);
    ASSERT_TRUE(daemon_->serving(std::chrono::seconds(60))) << daemon_->log();
  }
  void register_image(const nlohmann::json& limits) {
    ASSERT_FALSE(link_into_store(network_image(), daemon_->image_dir(), "net").empty());
    const auto put = daemon_->request("PUT", "/images/net", limits.dump());
    ASSERT_EQ(put.status, 200) << put.body << daemon_->log();
  }

  TempDir dir_{std::filesystem::path("/run")};
  std::set<std::string> before_;
  std::unique_ptr<PoolDaemon> daemon_;
};

}  // namespace dsec::test
