// Sandbox images end to end (docs/images.md): the Debian image from images/build-rootfs,
// booted by `dsec-vmm run --image` under a private overlay, runs python3, git and cc;
// one sandbox's writes reach neither another sandbox nor the image file; a warm snapshot
// of it restores and runs python3.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/debian_image.h"
#include "tests/support/dsec_vmm.h"
#include "tests/support/sandbox.h"
#include "tests/support/warm_image.h"

namespace dsec::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kReadyDeadline = std::chrono::seconds(300);
constexpr auto kCommandDeadline = std::chrono::seconds(240);

struct Shell {
  int code = -1;
  std::string out, err;
};

// `sh -c script` in the guest; code is -1 when the agent failed or a signal ended it.
Shell in_guest(Sandbox& vm, const std::string& script) {
  auto client = vm.client();
  agent::ExecRequest req;
  req.argv = {"/bin/sh", "-c", script};
  req.timeout_ms = static_cast<uint32_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(kCommandDeadline).count());
  Shell result;
  auto status = client.exec(
      req,
      [&](std::span<const uint8_t> b) {
        result.out.append(b.begin(), b.end());
        return ok();
      },
      [&](std::span<const uint8_t> b) {
        result.err.append(b.begin(), b.end());
        return ok();
      });
  if (!status) {
    result.err += "agent: " + status.error().message();
  } else if (status->kind == agent::ExitStatus::Kind::kExited) {
    result.code = status->code;
  }
  return result;
}

std::string sha256(const std::filesystem::path& file) {
  const ProcessOutput sum = run_process({"sha256sum", file.string()}, std::chrono::seconds(120));
  EXPECT_EQ(sum.exit_status, 0) << sum.describe();
  return sum.out.substr(0, 64);
}

std::unique_ptr<Sandbox> boot(const std::filesystem::path& image) {
  auto vm = std::make_unique<Sandbox>(std::vector<std::string>{"--image", image.string()});
  std::string why;
  EXPECT_TRUE(vm->wait_ready(kReadyDeadline, why)) << why;
  return vm;
}

TEST(DebianImage, RunsPython3GitAndACompiledCProgram) {
  const auto image = debian_image();
  if (image.empty() || default_image().kernel.empty()) return;  // the failure says why
  auto vm = boot(image);

  Shell python = in_guest(*vm, "python3 -c 'print(2**10)'");
  EXPECT_EQ(python.code, 0) << python.err << vm->describe();
  EXPECT_EQ(python.out, "1024\n");

  Shell git =
      in_guest(*vm,
               "set -e; cd /tmp; git init -q repo; cd repo; echo hello >greeting; "
               "git add greeting; git -c user.name=t -c user.email=t@example.com commit -qm "
               "first; git log --format=%s; git show HEAD:greeting");
  EXPECT_EQ(git.code, 0) << git.err;
  EXPECT_EQ(git.out, "first\nhello\n");

  Shell cc = in_guest(*vm,
                      "set -e; cat >/tmp/answer.c <<'EOF'\n"
                      "#include <stdio.h>\n"
                      "int main(void) { printf(\"%d\\n\", 6 * 7); return 0; }\n"
                      "EOF\n"
                      "cc -O2 -o /tmp/answer /tmp/answer.c; /tmp/answer");
  EXPECT_EQ(cc.code, 0) << cc.err;
  EXPECT_EQ(cc.out, "42\n");
}

TEST(DebianImage, OneSandboxsWritesReachNeitherAnotherSandboxNorTheImage) {
  const auto image = debian_image();
  if (image.empty() || default_image().kernel.empty()) return;
  const std::string before = sha256(image);

  auto first = boot(image);
  // A new file, and a changed file of the image (copied up into the overlay).
  Shell wrote = in_guest(*first,
                         "echo first >/root/private && echo changed >>/etc/os-release && "
                         "cat /root/private && tail -n1 /etc/os-release");
  EXPECT_EQ(wrote.code, 0) << wrote.err;
  EXPECT_EQ(wrote.out, "first\nchanged\n");

  // A second sandbox of the same image, while the first still runs.
  auto second = boot(image);
  Shell seen = in_guest(*second, "test ! -e /root/private && tail -n1 /etc/os-release");
  EXPECT_EQ(seen.code, 0) << "the second sandbox sees the first's file\n" << seen.err;
  EXPECT_THAT(seen.out, Not(HasSubstr("changed")));
  Shell own = in_guest(*second, "echo second >/root/private && cat /root/private");
  EXPECT_EQ(own.out, "second\n") << own.err;
  Shell still = in_guest(*first, "cat /root/private");
  EXPECT_EQ(still.out, "first\n") << still.err;

  // The root is the overlay; the image itself is mounted read-only below it.
  Shell mounts = in_guest(*first, "cat /proc/mounts");
  EXPECT_THAT(mounts.out, HasSubstr("overlay / overlay"));

  first.reset();
  second.reset();
  EXPECT_EQ(sha256(image), before) << "the image file changed";
}

TEST(DebianImage, AWarmSnapshotRestoresAndRunsPython3) {
  const auto image = debian_image();
  if (image.empty() || default_image().kernel.empty()) return;
  const WarmImage& warm = shared_warm_image(
      {"--vcpus", "2", "--memory", "256", "--image", image.string(), "--exec", "python3 -c 1"});
  ASSERT_TRUE(warm.failure.empty()) << warm.failure;
  const auto clone = Sandbox::restore(warm.dir);
  std::string why;
  ASSERT_TRUE(clone->wait_ready(kReadyDeadline, why)) << why;
  Shell python = in_guest(*clone, "python3 -c 'import sys; print(sys.version_info[0], 2**10)'");
  EXPECT_EQ(python.code, 0) << python.err << clone->describe();
  EXPECT_EQ(python.out, "3 1024\n");
}

}  // namespace
}  // namespace dsec::test
