#include "vmm/agent/fs_protocol.h"

#include "vmm/agent/wire.h"

namespace dsec::agent {
namespace {

void write_entry(WireWriter& w, const FsEntry& m) {
  w.string(m.path);
  w.u8(static_cast<uint8_t>(m.type));
  w.u64(m.size);
  w.u32(m.mode);
  w.u64(static_cast<uint64_t>(m.mtime_ns));
  w.string(m.owner);
  w.string(m.group);
  w.string(m.symlink_target);
}

Result<FsEntry> read_entry(WireReader& r) {
  FsEntry m;
  m.path = DSEC_TRY(r.string(kMaxPathLen));
  const uint8_t type = DSEC_TRY(r.u8());
  if (type > static_cast<uint8_t>(FsEntry::Type::kOther)) {
    return fail("file system entry: unknown type " + std::to_string(type));
  }
  m.type = static_cast<FsEntry::Type>(type);
  m.size = DSEC_TRY(r.u64());
  m.mode = DSEC_TRY(r.u32());
  if (m.mode > 07777) {
    return fail("file system entry: mode " + std::to_string(m.mode) + " has bits beyond 07777");
  }
  m.mtime_ns = static_cast<int64_t>(DSEC_TRY(r.u64()));
  m.owner = DSEC_TRY(r.string(kMaxNameLen));
  m.group = DSEC_TRY(r.string(kMaxNameLen));
  m.symlink_target = DSEC_TRY(r.string(kMaxPathLen));
  DSEC_TRY(check_path(m.path, "file system entry"));
  return m;
}

Result<std::string> read_path(WireReader& r, const char* what) {
  std::string path = DSEC_TRY(r.string(kMaxPathLen));
  DSEC_TRY(check_path(path, what));
  return path;
}

}  // namespace

std::vector<uint8_t> encode(const FsEntry& m) {
  WireWriter w;
  write_entry(w, m);
  return w.take();
}

Result<FsEntry> decode_fs_entry(std::span<const uint8_t> payload) {
  WireReader r(payload, "fs-stat reply");
  FsEntry m = DSEC_TRY(read_entry(r));
  DSEC_TRY(r.finish());
  return m;
}

std::vector<uint8_t> encode(const FsPath& m) {
  WireWriter w;
  w.string(m.path);
  return w.take();
}

Result<FsPath> decode_fs_path(std::span<const uint8_t> payload) {
  WireReader r(payload, "file system request");
  FsPath m;
  m.path = DSEC_TRY(read_path(r, "file system request"));
  DSEC_TRY(r.finish());
  return m;
}

std::vector<uint8_t> encode(const FsListRequest& m) {
  WireWriter w;
  w.string(m.path);
  w.u32(m.depth);
  return w.take();
}

Result<FsListRequest> decode_fs_list_request(std::span<const uint8_t> payload) {
  WireReader r(payload, "fs-list request");
  FsListRequest m;
  m.path = DSEC_TRY(read_path(r, "fs-list request"));
  m.depth = DSEC_TRY(r.u32());
  DSEC_TRY(r.finish());
  if (m.depth < 1 || m.depth > kMaxListDepth) {
    return fail("fs-list request: a depth of " + std::to_string(m.depth) + "; it must be 1 to " +
                std::to_string(kMaxListDepth));
  }
  return m;
}

std::vector<uint8_t> encode(const FsMoveRequest& m) {
  WireWriter w;
  w.string(m.from);
  w.string(m.to);
  return w.take();
}

Result<FsMoveRequest> decode_fs_move_request(std::span<const uint8_t> payload) {
  WireReader r(payload, "fs-move request");
  FsMoveRequest m;
  m.from = DSEC_TRY(read_path(r, "fs-move request"));
  m.to = DSEC_TRY(read_path(r, "fs-move request"));
  DSEC_TRY(r.finish());
  return m;
}

std::vector<uint8_t> encode(const FsWatchRequest& m) {
  WireWriter w;
  w.string(m.path);
  w.u8(m.recursive ? 1 : 0);
  return w.take();
}

Result<FsWatchRequest> decode_fs_watch_request(std::span<const uint8_t> payload) {
  WireReader r(payload, "fs-watch request");
  FsWatchRequest m;
  m.path = DSEC_TRY(read_path(r, "fs-watch request"));
  const uint8_t recursive = DSEC_TRY(r.u8());
  DSEC_TRY(r.finish());
  if (recursive > 1) {
    return fail("fs-watch request: recursive flag " + std::to_string(recursive));
  }
  m.recursive = recursive == 1;
  return m;
}

std::vector<uint8_t> encode(const FsEntries& m) {
  WireWriter w;
  w.u32(static_cast<uint32_t>(m.entries.size()));
  for (const auto& e : m.entries) {
    write_entry(w, e);
  }
  return w.take();
}

Result<FsEntries> decode_fs_entries(std::span<const uint8_t> payload) {
  WireReader r(payload, "fs-entries");
  const uint32_t count = DSEC_TRY(r.u32());
  if (count > kMaxEntriesPerFrame) {
    return fail("fs-entries: " + std::to_string(count) + " entries in a frame, over the limit of " +
                std::to_string(kMaxEntriesPerFrame));
  }
  FsEntries m;
  for (uint32_t i = 0; i < count; ++i) {
    m.entries.push_back(DSEC_TRY(read_entry(r)));
  }
  DSEC_TRY(r.finish());
  return m;
}

std::vector<uint8_t> encode(const FsMade& m) {
  WireWriter w;
  w.u8(m.created ? 1 : 0);
  return w.take();
}

Result<FsMade> decode_fs_made(std::span<const uint8_t> payload) {
  WireReader r(payload, "fs-made");
  const uint8_t created = DSEC_TRY(r.u8());
  DSEC_TRY(r.finish());
  if (created > 1) {
    return fail("fs-made: created flag " + std::to_string(created));
  }
  return FsMade{created == 1};
}

std::vector<uint8_t> encode(const FsEvent& m) {
  WireWriter w;
  w.u8(static_cast<uint8_t>(m.kind));
  w.string(m.path);
  return w.take();
}

Result<FsEvent> decode_fs_event(std::span<const uint8_t> payload) {
  WireReader r(payload, "fs-event");
  const uint8_t kind = DSEC_TRY(r.u8());
  if (kind > static_cast<uint8_t>(FsEvent::Kind::kChmod)) {
    return fail("fs-event: unknown kind " + std::to_string(kind));
  }
  FsEvent m;
  m.kind = static_cast<FsEvent::Kind>(kind);
  m.path = DSEC_TRY(read_path(r, "fs-event"));
  DSEC_TRY(r.finish());
  return m;
}

}  // namespace dsec::agent
