// The agent protocol's file system messages (docs/agent-protocol.md, "File system"): stat,
// a directory listed to a depth, directories made with their parents, move, remove, and a
// directory watched. Bounds are checked before anything is allocated, both ways.
//
// Dependency-free beyond vmm/common/error.h: the guest agent compiles it too.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vmm/agent/protocol.h"
#include "vmm/common/error.h"

namespace dsec::agent {

// How deep a listing goes at most, and how many entries it may hold in all.
inline constexpr uint32_t kMaxListDepth = 32;
inline constexpr size_t kMaxListEntries = 65536;
// The most entries one fs-entries frame carries (a frame of them stays under kMaxPayload
// with paths of up to 2 KiB; the agent sends fewer when paths are longer).
inline constexpr size_t kMaxEntriesPerFrame = 512;
inline constexpr size_t kMaxNameLen = 256;

struct FsEntry {
  enum class Type : uint8_t { kFile = 0, kDirectory = 1, kSymlink = 2, kOther = 3 };
  std::string path;  // absolute
  Type type = Type::kFile;
  uint64_t size = 0;
  uint32_t mode = 0;  // permission bits, 07777
  int64_t mtime_ns = 0;
  std::string owner;           // the user's name, or its uid as digits
  std::string group;           // the group's name, or its gid as digits
  std::string symlink_target;  // when a symlink

  bool operator==(const FsEntry&) const = default;
};

// fs-stat, fs-mkdir and fs-remove name one path.
struct FsPath {
  std::string path;  // absolute

  bool operator==(const FsPath&) const = default;
};

struct FsListRequest {
  std::string path;
  uint32_t depth = 1;  // 1: the directory's own entries; 1..kMaxListDepth

  bool operator==(const FsListRequest&) const = default;
};

struct FsMoveRequest {
  std::string from, to;

  bool operator==(const FsMoveRequest&) const = default;
};

struct FsWatchRequest {
  std::string path;
  bool recursive = false;

  bool operator==(const FsWatchRequest&) const = default;
};

// fs-entries: part of a listing.
struct FsEntries {
  std::vector<FsEntry> entries;  // at most kMaxEntriesPerFrame

  bool operator==(const FsEntries&) const = default;
};

// fs-made: the answer to fs-mkdir.
struct FsMade {
  bool created = false;  // false: it was a directory already

  bool operator==(const FsMade&) const = default;
};

struct FsEvent {
  enum class Kind : uint8_t { kCreated = 0, kWritten = 1, kRemoved = 2, kRenamed = 3, kChmod = 4 };
  Kind kind = Kind::kCreated;
  std::string path;  // absolute

  bool operator==(const FsEvent&) const = default;
};

std::vector<uint8_t> encode(const FsEntry& m);
std::vector<uint8_t> encode(const FsPath& m);
std::vector<uint8_t> encode(const FsListRequest& m);
std::vector<uint8_t> encode(const FsMoveRequest& m);
std::vector<uint8_t> encode(const FsWatchRequest& m);
std::vector<uint8_t> encode(const FsEntries& m);
std::vector<uint8_t> encode(const FsMade& m);
std::vector<uint8_t> encode(const FsEvent& m);

Result<FsEntry> decode_fs_entry(std::span<const uint8_t> payload);
Result<FsPath> decode_fs_path(std::span<const uint8_t> payload);
Result<FsListRequest> decode_fs_list_request(std::span<const uint8_t> payload);
Result<FsMoveRequest> decode_fs_move_request(std::span<const uint8_t> payload);
Result<FsWatchRequest> decode_fs_watch_request(std::span<const uint8_t> payload);
Result<FsEntries> decode_fs_entries(std::span<const uint8_t> payload);
Result<FsMade> decode_fs_made(std::span<const uint8_t> payload);
Result<FsEvent> decode_fs_event(std::span<const uint8_t> payload);

}  // namespace dsec::agent
