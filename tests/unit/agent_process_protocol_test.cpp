// The process messages of the agent protocol (vmm/agent/process_protocol.h): round trips,
// and the hostile inputs each decoder refuses before allocating or acting.
#include <gtest/gtest.h>

#include "tests/support/agent_round_trip.h"
#include "vmm/agent/process_protocol.h"
#include "vmm/agent/wire.h"

namespace dsec::agent {
namespace {

using test::expect_round_trip_and_truncations_fail;

ProcessStartRequest start_request() {
  return {
      {"/bin/bash", "-l", "-c", "echo hi"}, {"A=1"}, "/tmp", "web", "user", true, true, 30, 100};
}

TEST(AgentProcessMessages, EachRoundTripsAndTruncationsFail) {
  expect_round_trip_and_truncations_fail(start_request(), decode_process_start_request);
  expect_round_trip_and_truncations_fail(ProcessRef{42}, decode_process_ref);
  expect_round_trip_and_truncations_fail(ProcessSignal{42, 15}, decode_process_signal);
  expect_round_trip_and_truncations_fail(ProcessResize{42, 50, 132}, decode_process_resize);
  const ProcessListReply list{
      {{1, "a", {"sleep", "9"}, true, {}, false, 0, 0},
       {2, "", {"sh"}, false, {ExitStatus::Kind::kSignaled, 9}, true, 10, 20}}};
  expect_round_trip_and_truncations_fail(list, decode_process_list_reply);
  // Input is the pid then raw bytes: only a cut pid fails.
  const ProcessInput input{7, {1, 2, 3}};
  auto back = decode_process_input(encode(input));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(*back, input);
}

TEST(AgentProcessMessages, StartRequestsThatCannotRunAreRefusedWithAReason) {
  auto no_argv = start_request();
  no_argv.argv.clear();
  EXPECT_FALSE(decode_process_start_request(encode(no_argv)).has_value());
  auto relative = start_request();
  relative.cwd = "tmp";
  EXPECT_FALSE(decode_process_start_request(encode(relative)).has_value());
  auto bad_env = start_request();
  bad_env.env = {"=x"};
  EXPECT_FALSE(decode_process_start_request(encode(bad_env)).has_value());
  auto bad_user = start_request();
  bad_user.user = "../root";
  auto refused = decode_process_start_request(encode(bad_user));
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message().find("no user name"), std::string::npos);
  auto no_rows = start_request();
  no_rows.rows = 0;
  EXPECT_FALSE(decode_process_start_request(encode(no_rows)).has_value());
  auto long_tag = start_request();
  long_tag.tag.assign(kMaxTagLen + 1, 't');
  EXPECT_FALSE(decode_process_start_request(encode(long_tag)).has_value());
  auto flag = encode(start_request());
  flag[flag.size() - 10] = 2;  // the pty flag, before rows and cols
  EXPECT_FALSE(decode_process_start_request(flag).has_value());
}

TEST(AgentProcessMessages, SignalsTerminalSizesAndInputAreBounded) {
  EXPECT_FALSE(decode_process_signal(encode(ProcessSignal{1, 0})).has_value());
  EXPECT_FALSE(decode_process_signal(encode(ProcessSignal{1, kMaxSignal + 1})).has_value());
  EXPECT_FALSE(decode_process_signal(encode(ProcessSignal{1, -9})).has_value());
  WireWriter w;
  w.u32(1);
  w.u32(kMaxTerminalSide + 1);
  w.u32(80);
  EXPECT_FALSE(decode_process_resize(w.bytes()).has_value());
  const ProcessInput too_much{1, std::vector<uint8_t>(kMaxChunk + 1)};
  EXPECT_FALSE(decode_process_input(encode(too_much)).has_value());
}

TEST(AgentProcessMessages, AListFromALyingGuestIsRefusedBeforeAllocating) {
  WireWriter many;
  many.u32(kMaxProcesses + 1);
  auto refused = decode_process_list_reply(many.bytes());
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message().find("over the 64"), std::string::npos);
  WireWriter huge_argv;
  huge_argv.u32(1);
  huge_argv.u32(1);
  huge_argv.string("");
  huge_argv.u32(0xffffffff);  // argv count
  EXPECT_FALSE(decode_process_list_reply(huge_argv.bytes()).has_value());
  auto list = encode(ProcessListReply{{{1, "", {"x"}, false, {}, false, 0, 0}}});
  list[4 + 4 + 4 + 4 + 4 + 1 + 1 + 1] = 7;  // the exit kind, after the running and pty flags
  EXPECT_FALSE(decode_process_list_reply(list).has_value());
}

TEST(AgentProcessMessages, AListedArgvIsCutToItsBound) {
  const std::vector<std::string> argv{std::string(1500, 'a'), std::string(1500, 'b'), "c"};
  const auto listed = listed_argv(argv);
  ASSERT_EQ(listed.size(), 2U);
  EXPECT_EQ(listed[0], argv[0]);
  EXPECT_EQ(listed[1].size(), kMaxListedArgvBytes - 1500);
  EXPECT_EQ(listed_argv({"sh", "-c", "x"}), (std::vector<std::string>{"sh", "-c", "x"}));
}

}  // namespace
}  // namespace dsec::agent
