// Snapshots end to end: a warm image (`dsec-vmm warm`) of the default image with a process
// and a file made before the snapshot, restored as clones (`dsec-vmm restore`) that go on
// from where the snapshot stood, diverge from each other, and each get their own entropy
// and the host's clock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/support/dsec_vmm.h"
#include "tests/support/sandbox.h"
#include "tests/support/warm_image.h"

namespace dsec::test {
namespace {

using ::testing::HasSubstr;
using namespace std::chrono_literals;

constexpr auto kReadyDeadline = std::chrono::seconds(300);

// Started before the snapshot: a counter in /tmp that goes up every 100 ms, detached from
// the agent's exec (its own session, output nowhere). Each value replaces the file whole
// (a rename), so that a reader never sees it empty between truncation and write.
constexpr const char* kCounterSetup =
    "echo warm-file > /tmp/warm.txt; "
    "setsid sh -c 'i=0; while :; do i=$((i+1)); echo $i > /tmp/counter.new; "
    "mv /tmp/counter.new /tmp/counter; sleep 0.1; done' >/dev/null 2>&1 </dev/null &";

// The warm image the tests clone: 2 vCPUs, 256 MiB, the counter and the file made first.
const WarmImage& warm_image() {
  return shared_warm_image({"--vcpus", "2", "--memory", "256", "--exec", kCounterSetup});
}

std::unique_ptr<Sandbox> ready_clone() {
  const auto& image = warm_image();
  if (!image.failure.empty()) {
    ADD_FAILURE() << image.failure;
    return nullptr;
  }
  auto vm = Sandbox::restore(image.dir);
  std::string why;
  if (!vm->wait_ready(kReadyDeadline, why)) {
    ADD_FAILURE() << "the clone did not become ready: " << why;
    return nullptr;
  }
  return vm;
}

TEST(Snapshot, AFileAndARunningProcessFromBeforeTheSnapshotAreThereAfterRestore) {
  auto vm = ready_clone();
  ASSERT_TRUE(vm);
  auto file = sh(*vm, "cat /tmp/warm.txt");
  ASSERT_TRUE(file.status && file.status->code == 0) << file.out << vm->describe();
  EXPECT_EQ(trimmed(file.out), "warm-file");
  auto first = sh(*vm, "cat /tmp/counter");
  ASSERT_TRUE(first.status) << vm->describe();
  std::this_thread::sleep_for(1500ms);
  auto second = sh(*vm, "cat /tmp/counter");
  ASSERT_TRUE(second.status) << vm->describe();
  const long a = std::stol(trimmed(first.out));
  const long b = std::stol(trimmed(second.out));
  EXPECT_GT(a, 0) << "the counter started before the snapshot";
  EXPECT_GT(b, a) << "the counter goes on after the restore\n" << vm->describe();
  // cp works on the clone too.
  auto wrote = sh(*vm, "head -c 100000 /dev/zero | tr '\\0' x > /tmp/big && wc -c < /tmp/big");
  ASSERT_TRUE(wrote.status) << vm->describe();
  EXPECT_EQ(trimmed(wrote.out), "100000");
}

TEST(Snapshot, TwoClonesOfOneSnapshotRunAtOnceAndDiverge) {
  auto one = ready_clone();
  auto two = ready_clone();
  ASSERT_TRUE(one && two);
  ASSERT_TRUE(sh(*one, "echo one > /tmp/mine").status);
  ASSERT_TRUE(sh(*two, "echo two > /tmp/mine").status);
  EXPECT_EQ(trimmed(sh(*one, "cat /tmp/mine").out), "one");
  EXPECT_EQ(trimmed(sh(*two, "cat /tmp/mine").out), "two");
  // What each started from is the snapshot's, whatever the other wrote.
  EXPECT_EQ(trimmed(sh(*one, "cat /tmp/warm.txt").out), "warm-file");
  EXPECT_EQ(trimmed(sh(*two, "cat /tmp/warm.txt").out), "warm-file");
}

TEST(Snapshot, ClonesDrawDifferentRandomBytesAndRunOnTheHostsClock) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  // A snapshot 15 s old or more: its guest's clock stood still for that long, far beyond the
  // check's second either way below.
  const auto old_enough = image.taken + 15s;
  if (std::chrono::system_clock::now() < old_enough) {
    std::this_thread::sleep_until(old_enough);
  }
  auto one = ready_clone();
  auto two = ready_clone();
  ASSERT_TRUE(one && two);
  const std::string random = "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'";
  const auto r1 = sh(*one, random);
  const auto r2 = sh(*two, random);
  ASSERT_TRUE(r1.status && r2.status);
  EXPECT_EQ(trimmed(r1.out).size(), 64u) << r1.out;
  EXPECT_NE(r1.out, r2.out) << "two clones drew the same bytes from /dev/urandom";
  // The same through the system call (guest/tools/dsec-getrandom).
  const auto g1 = sh(*one, "dsec-getrandom 32");
  const auto g2 = sh(*two, "dsec-getrandom 32");
  ASSERT_TRUE(g1.ok() && g2.ok()) << g1.out << g2.out;
  EXPECT_EQ(trimmed(g1.out).size(), 64u) << g1.out;
  EXPECT_NE(g1.out, g2.out) << "two clones drew the same bytes from getrandom";
  // The guest reads its clock between the host's two readings (an exec in a loaded test
  // bed can take seconds); a second either way for the rounding of whole seconds.
  for (auto* vm : {one.get(), two.get()}) {
    const long before = static_cast<long>(::time(nullptr));
    const auto guest = sh(*vm, "date +%s");
    const long after = static_cast<long>(::time(nullptr));
    ASSERT_TRUE(guest.status) << vm->describe();
    const long clock = std::stol(trimmed(guest.out));
    EXPECT_GE(clock, before - 1) << "the clone's wall clock is behind the host's";
    EXPECT_LE(clock, after + 1) << "the clone's wall clock is ahead of the host's";
  }
}

TEST(Snapshot, RestoreRefusesAMissingOrCorruptSnapshotWithAClearError) {
  const auto& image = warm_image();
  ASSERT_TRUE(image.failure.empty()) << image.failure;
  const auto bad =
      std::filesystem::temp_directory_path() / ("dsec-bad-" + std::to_string(::getpid()));
  std::filesystem::create_directories(bad);
  std::filesystem::copy_file(image.dir / "state", bad / "state");
  // A memory file shorter than the state says: refused before anything runs.
  {
    FILE* f = std::fopen((bad / "memory").c_str(), "w");
    ASSERT_TRUE(f);
    std::fclose(f);
  }
  auto out = run_vmm({"restore", bad.string(), "--vsock", "/run/dsec-bad.vsock"}, 60s);
  EXPECT_EQ(out.exit_status, 1) << out.describe();
  EXPECT_THAT(out.err, HasSubstr("memory")) << out.describe();
  std::filesystem::remove_all(bad);
}

}  // namespace
}  // namespace dsec::test
