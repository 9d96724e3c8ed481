// AgentClient's file system requests (docs/agent-protocol.md, "File system"), and the
// watch of a directory that streams its events.
#include <fmt/format.h>

#include <algorithm>
#include <iterator>

#include "vmm/agent/client.h"
#include "vmm/agent/client_stream.h"

namespace dsec::agent {

using namespace client_detail;

DirectoryWatch::DirectoryWatch(std::unique_ptr<Stream> stream, uint32_t id)
    : stream_(std::move(stream)), id_(id) {}
DirectoryWatch::DirectoryWatch(DirectoryWatch&&) noexcept = default;
DirectoryWatch& DirectoryWatch::operator=(DirectoryWatch&&) noexcept = default;
DirectoryWatch::~DirectoryWatch() = default;

Result<std::optional<FsEvent>> DirectoryWatch::next(std::chrono::milliseconds wait) {
  constexpr const char* kDuring = "directory watch";
  auto frame = DSEC_TRY(stream_->receive_within(wait, kDuring));
  if (!frame) {
    return std::nullopt;
  }
  if (frame->type != MessageType::kFsEvent || frame->request_id != id_) {
    return unexpected_frame(*frame, kDuring);
  }
  return DSEC_TRY(decode_fs_event(frame->payload));
}

Result<FsEntry> AgentClient::stat(const std::string& path) {
  const Frame f = DSEC_TRY(
      request(MessageType::kFsStat, encode(FsPath{path}), MessageType::kFsStatReply, "stat"));
  return decode_fs_entry(f.payload);
}

Result<std::vector<FsEntry>> AgentClient::list_directory(const std::string& path, uint32_t depth) {
  constexpr const char* kDuring = "directory listing";
  const Stalled stalled = give_up(kDuring, answer_timeout_);
  Stream stream(DSEC_TRY(connector_()), answer_timeout_);
  const uint32_t id = next_id_++;
  DSEC_TRY(stream.send(MessageType::kFsList, id, encode(FsListRequest{path, depth}), stalled));
  std::vector<FsEntry> entries;
  while (true) {
    const Frame f = DSEC_TRY(stream.receive(kDuring, stalled));
    if (f.request_id != id) {
      return unexpected_frame(f, kDuring);
    }
    if (f.type == MessageType::kOk) {
      return entries;
    }
    if (f.type != MessageType::kFsEntries) {
      return unexpected_frame(f, kDuring);
    }
    FsEntries part = DSEC_TRY(decode_fs_entries(f.payload));
    if (entries.size() + part.entries.size() > kMaxListEntries) {
      return fail(fmt::format("listing {}: the guest sent more than the {} entries a listing "
                              "holds",
                              path, kMaxListEntries),
                  "the guest misbehaves (its agent stops at that bound)");
    }
    std::move(part.entries.begin(), part.entries.end(), std::back_inserter(entries));
  }
}

Result<bool> AgentClient::make_directory(const std::string& path) {
  const Frame f = DSEC_TRY(request(MessageType::kFsMkdir, encode(FsPath{path}),
                                   MessageType::kFsMade, "making a directory"));
  return DSEC_TRY(decode_fs_made(f.payload)).created;
}

Status AgentClient::move_path(const std::string& from, const std::string& to) {
  DSEC_TRY(
      request(MessageType::kFsMove, encode(FsMoveRequest{from, to}), MessageType::kOk, "move"));
  return ok();
}

Status AgentClient::remove_path(const std::string& path) {
  DSEC_TRY(request(MessageType::kFsRemove, encode(FsPath{path}), MessageType::kOk, "removal"));
  return ok();
}

Result<DirectoryWatch> AgentClient::watch_directory(const std::string& path, bool recursive) {
  constexpr const char* kDuring = "directory watch";
  const Stalled stalled = give_up(kDuring, answer_timeout_);
  auto stream = std::make_unique<Stream>(DSEC_TRY(connector_()), answer_timeout_);
  const uint32_t id = next_id_++;
  DSEC_TRY(
      stream->send(MessageType::kFsWatch, id, encode(FsWatchRequest{path, recursive}), stalled));
  const Frame f = DSEC_TRY(stream->receive(kDuring, stalled));
  if (f.type != MessageType::kOk || f.request_id != id) {
    return unexpected_frame(f, kDuring);
  }
  return DirectoryWatch(std::move(stream), id);
}

}  // namespace dsec::agent
