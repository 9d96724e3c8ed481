// The file system messages of the agent protocol (vmm/agent/fs_protocol.h): round trips,
// and the hostile inputs each decoder refuses before allocating or acting.
#include <gtest/gtest.h>

#include "tests/support/agent_round_trip.h"
#include "vmm/agent/fs_protocol.h"
#include "vmm/agent/wire.h"

namespace dsec::agent {
namespace {

using test::expect_round_trip_and_truncations_fail;

const FsEntry kLink{"/home/user/link",
                    FsEntry::Type::kSymlink,
                    4,
                    0777,
                    1700000000123456789,
                    "user",
                    "user",
                    "file"};

TEST(AgentFsMessages, EachRoundTripsAndTruncationsFail) {
  expect_round_trip_and_truncations_fail(kLink, decode_fs_entry);
  expect_round_trip_and_truncations_fail(FsPath{"/tmp/x"}, decode_fs_path);
  expect_round_trip_and_truncations_fail(FsListRequest{"/tmp", 3}, decode_fs_list_request);
  expect_round_trip_and_truncations_fail(FsMoveRequest{"/a", "/b"}, decode_fs_move_request);
  expect_round_trip_and_truncations_fail(FsWatchRequest{"/tmp", true}, decode_fs_watch_request);
  expect_round_trip_and_truncations_fail(FsEntries{{kLink, kLink}}, decode_fs_entries);
  expect_round_trip_and_truncations_fail(FsMade{true}, decode_fs_made);
  expect_round_trip_and_truncations_fail(FsEvent{FsEvent::Kind::kRenamed, "/tmp/a"},
                                         decode_fs_event);
}

TEST(AgentFsMessages, RequestsNeedAbsolutePathsAndBoundedDepths) {
  EXPECT_FALSE(decode_fs_path(encode(FsPath{"tmp"})).has_value());
  EXPECT_FALSE(decode_fs_path(encode(FsPath{""})).has_value());
  EXPECT_FALSE(decode_fs_move_request(encode(FsMoveRequest{"/a", "b"})).has_value());
  EXPECT_FALSE(decode_fs_list_request(encode(FsListRequest{"/", 0})).has_value());
  EXPECT_FALSE(decode_fs_list_request(encode(FsListRequest{"/", kMaxListDepth + 1})).has_value());
  EXPECT_TRUE(decode_fs_list_request(encode(FsListRequest{"/", kMaxListDepth})).has_value());
  auto watch = encode(FsWatchRequest{"/tmp", false});
  watch.back() = 2;
  EXPECT_FALSE(decode_fs_watch_request(watch).has_value());
  FsPath nul{"/tmp/a"};
  nul.path[2] = '\0';
  EXPECT_FALSE(decode_fs_path(encode(nul)).has_value());
}

TEST(AgentFsMessages, WhatALyingGuestSendsIsRefusedBeforeAllocating) {
  WireWriter many;
  many.u32(kMaxEntriesPerFrame + 1);
  auto refused = decode_fs_entries(many.bytes());
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.error().message().find("over the limit"), std::string::npos);
  auto bad_type = encode(kLink);
  bad_type[4 + kLink.path.size()] = 9;
  EXPECT_FALSE(decode_fs_entry(bad_type).has_value());
  FsEntry setuid = kLink;
  setuid.mode = 010000;
  EXPECT_FALSE(decode_fs_entry(encode(setuid)).has_value());
  FsEntry relative = kLink;
  relative.path = "etc/passwd";
  EXPECT_FALSE(decode_fs_entry(encode(relative)).has_value());
  auto kind = encode(FsEvent{FsEvent::Kind::kCreated, "/x"});
  kind[0] = 5;
  EXPECT_FALSE(decode_fs_event(kind).has_value());
}

}  // namespace
}  // namespace dsec::agent
