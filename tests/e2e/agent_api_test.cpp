// The guest agent's kept processes and file system requests in a real sandbox
// (docs/agent-protocol.md, "Processes", "File system"): a process started on one
// connection, then listed, attached, given stdin and signalled on others; a tree made,
// listed, moved and removed; a watch that sees what a command does; as the E2B front will
// drive them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dsec/sandbox_client.h"
#include "tests/support/dsec_vmm.h"
#include "tests/support/sandbox.h"
#include "tests/support/warm_image.h"

namespace dsec::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr auto kReadyDeadline = std::chrono::seconds(300);

std::span<const uint8_t> bytes(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// A ready clone of the shared warm image of the default image.
std::unique_ptr<Sandbox> ready_sandbox() {
  const WarmImage& image = shared_warm_image({"--vcpus", "2", "--memory", "256"});
  EXPECT_TRUE(image.failure.empty()) << image.failure;
  if (!image.failure.empty()) return nullptr;
  auto vm = Sandbox::restore(image.dir);
  std::string why;
  EXPECT_TRUE(vm->wait_ready(kReadyDeadline, why)) << why;
  return why.empty() ? std::move(vm) : nullptr;
}

TEST(AgentApi, ABackgroundProcessOutlivesItsConnectionTakesInputAndASignal) {
  if (default_image().kernel.empty()) return;  // the failure says how to build it
  auto vm = ready_sandbox();
  ASSERT_TRUE(vm);
  auto client = vm->client();
  auto health = client.health();
  ASSERT_TRUE(health.has_value()) << health.error().message();
  EXPECT_EQ(health->agent_version, agent::kAgentVersion);

  agent::ProcessStartRequest req;
  req.argv = {"/bin/sh", "-c", "echo ready; while read line; do echo \"got $line\"; done"};
  req.tag = "echo-server";
  req.stdin_open = true;
  auto pid = client.start_process(req);  // its connection is closed once answered
  ASSERT_TRUE(pid.has_value()) << pid.error().message() << vm->describe_stuck();

  // Listed, and given input, through the embedding library's client.
  const sdk::SandboxClient sdk_client({vm->vsock_path(), ""});
  auto list = sdk_client.list_processes();
  ASSERT_TRUE(list.has_value()) << list.error().message();
  ASSERT_EQ(list->size(), 1U);
  EXPECT_EQ((*list)[0].pid, *pid);
  EXPECT_EQ((*list)[0].tag, "echo-server");
  EXPECT_TRUE((*list)[0].running);
  ASSERT_TRUE(sdk_client.send_process_input(*pid, "hello\n").has_value());
  std::mutex mutex;
  std::string out;
  auto attached = std::async(std::launch::async, [&] {
    auto c = vm->client();
    return c.attach_process(
        *pid,
        [&](std::span<const uint8_t> b) {
          const std::lock_guard lock(mutex);
          out.append(b.begin(), b.end());
          return ok();
        },
        [](std::span<const uint8_t>) { return ok(); });
  });
  const auto seen = [&](const std::string& what) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        const std::lock_guard lock(mutex);
        if (out.find(what) != std::string::npos) return true;
      }
      std::this_thread::sleep_for(20ms);
    }
    return false;
  };
  EXPECT_TRUE(seen("ready\ngot hello\n")) << out << vm->describe_stuck();
  // Input sent while attached comes back on the same stream, live.
  ASSERT_TRUE(client.send_process_input(*pid, bytes("again\n")).has_value());
  EXPECT_TRUE(seen("got again\n")) << out;
  ASSERT_TRUE(client.signal_process(*pid, SIGTERM).has_value());
  ASSERT_EQ(attached.wait_for(120s), std::future_status::ready) << vm->describe_stuck();
  auto status = attached.get();
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(*status, (agent::ExitStatus{agent::ExitStatus::Kind::kSignaled, SIGTERM}));

  auto after = client.list_processes();
  ASSERT_TRUE(after.has_value()) << after.error().message();
  EXPECT_TRUE(after->processes.empty());
}

TEST(AgentApi, ATerminalRunsAShellAndTakesANewSize) {
  if (default_image().kernel.empty()) return;
  auto vm = ready_sandbox();
  ASSERT_TRUE(vm);
  auto client = vm->client();
  agent::ProcessStartRequest req;
  req.argv = {"/bin/sh"};
  req.pty = true;
  req.rows = 24;
  req.cols = 80;
  auto pid = client.start_process(req);
  ASSERT_TRUE(pid.has_value()) << pid.error().message();
  ASSERT_TRUE(client.send_process_input(*pid, bytes("stty size\n")).has_value());
  ASSERT_TRUE(client.resize_process_terminal(*pid, 50, 132).has_value());
  ASSERT_TRUE(client.send_process_input(*pid, bytes("stty size; exit 7\n")).has_value());
  std::string out;
  auto status = client.attach_process(
      *pid,
      [&](std::span<const uint8_t> b) {
        out.append(b.begin(), b.end());
        return ok();
      },
      [](std::span<const uint8_t>) { return ok(); });
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(*status, (agent::ExitStatus{agent::ExitStatus::Kind::kExited, 7}));
  EXPECT_THAT(out, HasSubstr("50 132\r\n"));
}

TEST(AgentApi, AProcessRunsAsTheImagesUnprivilegedUser) {
  if (default_image().kernel.empty()) return;
  auto vm = ready_sandbox();
  ASSERT_TRUE(vm);
  auto client = vm->client();
  agent::ProcessStartRequest req;
  req.argv = {"/bin/sh", "-c", "id -u; id -g; echo $HOME; pwd; touch /root/x"};
  req.user = "user";
  auto pid = client.start_process(req);
  ASSERT_TRUE(pid.has_value()) << pid.error().message() << vm->describe_stuck();
  std::string out, err;
  auto status = client.attach_process(
      *pid,
      [&](std::span<const uint8_t> b) {
        out.append(b.begin(), b.end());
        return ok();
      },
      [&](std::span<const uint8_t> b) {
        err.append(b.begin(), b.end());
        return ok();
      });
  ASSERT_TRUE(status.has_value()) << status.error().message();
  EXPECT_EQ(out, "1000\n1000\n/home/user\n/home/user\n");
  EXPECT_THAT(err, HasSubstr("Permission denied"));  // unprivileged: no writing /root
  EXPECT_EQ(status->code, 1);
}

std::vector<std::string> names(const std::vector<agent::FsEntry>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) {
    out.push_back(e.path + (e.type == agent::FsEntry::Type::kDirectory ? "/" : ""));
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(AgentApi, AFileTreeIsMadeListedMovedAndRemovedAndAWatchSeesACommandsFile) {
  if (default_image().kernel.empty()) return;
  auto vm = ready_sandbox();
  ASSERT_TRUE(vm);
  auto client = vm->client();
  auto made = client.make_directory("/tmp/tree/a/b");
  ASSERT_TRUE(made.has_value()) << made.error().message() << vm->describe_stuck();
  EXPECT_TRUE(*made);
  auto sub = client.make_directory("/tmp/tree/c");
  ASSERT_TRUE(sub.has_value()) << sub.error().message();
  auto one = client.list_directory("/tmp/tree", 1);
  ASSERT_TRUE(one.has_value()) << one.error().message();
  EXPECT_EQ(names(*one), (std::vector<std::string>{"/tmp/tree/a/", "/tmp/tree/c/"}));
  auto two = client.list_directory("/tmp/tree", 2);
  ASSERT_TRUE(two.has_value()) << two.error().message();
  EXPECT_EQ(names(*two),
            (std::vector<std::string>{"/tmp/tree/a/", "/tmp/tree/a/b/", "/tmp/tree/c/"}));
  auto dir = client.stat("/tmp/tree/a");
  ASSERT_TRUE(dir.has_value()) << dir.error().message();
  EXPECT_EQ(dir->type, agent::FsEntry::Type::kDirectory);
  EXPECT_EQ(dir->mode, 0755U);
  EXPECT_EQ(dir->owner, "root");
  ASSERT_TRUE(client.move_path("/tmp/tree/a", "/tmp/tree/moved").has_value());
  auto moved = client.list_directory("/tmp/tree", 1);
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(names(*moved), (std::vector<std::string>{"/tmp/tree/c/", "/tmp/tree/moved/"}));
  ASSERT_TRUE(client.remove_path("/tmp/tree").has_value());
  auto gone = client.stat("/tmp/tree");
  ASSERT_FALSE(gone.has_value());
  EXPECT_THAT(gone.error().message(), HasSubstr("No such file or directory"));

  ASSERT_TRUE(client.make_directory("/tmp/watched").has_value());
  auto watch = client.watch_directory("/tmp/watched");
  ASSERT_TRUE(watch.has_value()) << watch.error().message();
  agent::ExecRequest touch{
      {"/bin/sh", "-c", "echo hi > /tmp/watched/made-by-a-command"}, {}, "", 0, false};
  auto ran = client.exec(
      touch, [](std::span<const uint8_t>) { return ok(); },
      [](std::span<const uint8_t>) { return ok(); });
  ASSERT_TRUE(ran.has_value()) << ran.error().message();
  std::optional<agent::FsEvent> created;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (!created && std::chrono::steady_clock::now() < deadline) {
    auto ev = watch->next(1s);
    ASSERT_TRUE(ev.has_value()) << ev.error().message();
    created = *ev;
  }
  ASSERT_TRUE(created.has_value()) << vm->describe_stuck();
  EXPECT_EQ(created->kind, agent::FsEvent::Kind::kCreated);
  EXPECT_EQ(created->path, "/tmp/watched/made-by-a-command");
}

}  // namespace
}  // namespace dsec::test
