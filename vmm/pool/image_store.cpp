#include "vmm/pool/image_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <vector>

#include "vmm/snapshot/snapshot_dir.h"

namespace dsec::pool {

struct StagedImage::InFlight {
  std::set<std::string> names;  // of snapshots being written
  uint64_t bytes = 0;           // they may take
};

namespace {

constexpr size_t kMaxImageNameLength = 64;
constexpr std::string_view kStagingPrefix = ".staging-";
constexpr std::array<const char*, 2> kImageFiles = {snapshot::kStateFileName,
                                                    snapshot::kMemoryFileName};

std::string mib(uint64_t bytes) {
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

// Whether `st`, of `what`, is the daemon's and writable by it alone; an error says which
// check failed.
Status check_owned(const struct stat& st, const std::string& what) {
  if (st.st_uid != ::geteuid()) {
    return fail(fmt::format("{} is owned by uid {}, not by the daemon's uid {}", what, st.st_uid,
                            ::geteuid()),
                "the store's files must be the daemon's: chown them, or put the image there as "
                "the daemon's user");
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fail(
        fmt::format("{} is writable by {} (mode {:04o})", what,
                    (st.st_mode & S_IWOTH) != 0 ? "others" : "its group", st.st_mode & 07777),
        "a clone maps the image's files: nobody but the daemon may change them; chmod "
        "go-w");
  }
  return ok();
}

// `name` in the directory `dir_fd`, opened without following a link: a directory when
// `directory`, else a regular file (read-only; O_NONBLOCK so that a FIFO does not block).
Result<UniqueFd> open_checked(int dir_fd, const char* name, bool directory,
                              const std::string& what) {
  const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (directory ? O_DIRECTORY : O_NONBLOCK);
  UniqueFd fd(::openat(dir_fd, name, flags));
  if (!fd) {
    const int err = errno;
    if (err == ELOOP || (directory && err == ENOTDIR)) {
      return fail(what + " is a symbolic link" + (directory ? " or not a directory" : ""),
                  "the store follows no links: put the image's files themselves there");
    }
    return fail_errno("cannot open " + what, err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return fail_errno("fstat " + what, errno);
  }
  if (directory ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
    return fail(what + (directory ? " is not a directory" : " is not a regular file"));
  }
  DSEC_TRY(check_owned(st, what));
  return fd;
}

// A regular file's size, 0 when `name` is not one (fstatat never follows a link).
uint64_t file_size_at(int dir_fd, const char* name) {
  struct stat st {};
  if (::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
    return 0;
  }
  return static_cast<uint64_t>(st.st_size);
}

// The names in the directory `dir_fd` (its descriptor stays where it is).
Result<std::vector<std::string>> list_dir(int dir_fd, const std::string& path) {
  const int copy = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR* dir = copy < 0 ? nullptr : ::fdopendir(copy);
  if (dir == nullptr) {
    const int err = errno;
    if (copy >= 0) {
      ::close(copy);
    }
    return fail_errno("cannot list " + path, err);
  }
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view name = entry->d_name;
    if (name != "." && name != "..") {
      names.emplace_back(name);
    }
  }
  ::closedir(dir);
  return names;
}

// Removes a staging directory `name` of the store and the image files in it, through
// descriptors: nothing outside it is touched whatever was swapped in.
void remove_staging(int store_fd, const std::string& name) {
  UniqueFd dir(::openat(store_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir) {
    for (const char* file : kImageFiles) {
      ::unlinkat(dir.get(), file, 0);
    }
  }
  if (::unlinkat(store_fd, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    spdlog::warn("pool: cannot remove the image store's staging directory {}: {}", name,
                 std::strerror(errno));
  }
}

Result<ImageStoreUsage> usage_of(int store_fd, const std::string& path) {
  ImageStoreUsage usage;
  for (const auto& name : DSEC_TRY(list_dir(store_fd, path))) {
    if (name.starts_with('.')) {
      continue;  // a staging directory: no image's name begins so
    }
    UniqueFd image(
        ::openat(store_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!image) {
      continue;  // not an image
    }
    ++usage.images;
    for (const char* file : kImageFiles) {
      usage.bytes += file_size_at(image.get(), file);
    }
  }
  return usage;
}

PoolError full(const std::string& what, const std::string& option) {
  return error(Failure::kFull,
               "the image store is full: " + what + "; remove images from it, or raise " + option);
}

std::string random_staging_name() {
  std::array<uint8_t, 8> bytes{};
  std::string name(kStagingPrefix);
  if (::getrandom(bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size())) {
    // Unique enough within one daemon: the store is its alone.
    return name + fmt::format("{:x}-{:x}", ::getpid(),
                              std::chrono::steady_clock::now().time_since_epoch().count());
  }
  for (const uint8_t b : bytes) {
    name += fmt::format("{:02x}", b);
  }
  return name;
}

}  // namespace

Status check_image_name(std::string_view name) {
  const auto allowed = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  };
  const bool alnum_first = !name.empty() && allowed(name.front()) && name.front() != '.' &&
                           name.front() != '-' && name.front() != '_';
  if (!alnum_first || name.size() > kMaxImageNameLength ||
      !std::all_of(name.begin(), name.end(), allowed) ||
      name.find("..") != std::string_view::npos) {
    return fail(
        fmt::format("an image's name must be 1 to {} letters, digits, '.', '_' or '-', "
                    "beginning with a letter or digit and without \"..\" (it names a "
                    "directory in the daemon's image store, never a path)",
                    kMaxImageNameLength));
  }
  return ok();
}

// --- ImageStore ---

ImageStore::ImageStore(std::string path, UniqueFd fd, ImageStoreLimits limits)
    : path_(std::move(path)),
      fd_(std::move(fd)),
      limits_(limits),
      in_flight_(std::make_shared<StagedImage::InFlight>()) {}

Result<ImageStore> ImageStore::open(const std::string& dir, ImageStoreLimits limits) {
  if (dir.empty()) {
    return fail("the image store needs a directory", "give --image-dir DIR");
  }
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return fail_errno("cannot make the image store " + dir, errno,
                      "its parent must exist and be the daemon's to write");
  }
  const std::string what = "the image store " + dir;
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    const int err = errno;
    if (err == ELOOP || err == ENOTDIR) {
      return fail(what + " is a symbolic link or not a directory",
                  "give --image-dir a directory of the daemon's own, not a link");
    }
    return fail_errno("cannot open " + what, err);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return fail_errno("fstat " + what, errno);
  }
  if (auto owned = check_owned(st, what); !owned) {
    return fail(owned.error().what(),
                "give --image-dir a directory owned by the daemon's user, mode 0700 or 0755");
  }
  ImageStore store(dir, std::move(fd), limits);
  store.remove_stale_staging();
  return store;
}

void ImageStore::remove_stale_staging() const {
  auto names = list_dir(fd_.get(), path_);
  if (!names) {
    spdlog::warn("pool: {}", names.error().message());
    return;
  }
  for (const auto& name : *names) {
    if (name.starts_with(kStagingPrefix)) {
      spdlog::info("pool: removing {}/{}, a snapshot a daemon left unfinished", path_, name);
      remove_staging(fd_.get(), name);
    }
  }
}

Result<ImageFiles> ImageStore::open_image(std::string_view name) const {
  DSEC_TRY(check_image_name(name));
  const std::string image_path = path_ + "/" + std::string(name);
  const std::string dir_name(name);
  struct stat st {};
  if (::fstatat(fd_.get(), dir_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT) {
    return fail("the image store has no image " + dir_name,
                "make it there: dsec-vmm warm --out " + image_path);
  }
  const UniqueFd dir = DSEC_TRY(open_checked(fd_.get(), dir_name.c_str(), true, image_path));
  ImageFiles files;
  files.state =
      DSEC_TRY(open_checked(dir.get(), snapshot::kStateFileName, false, image_path + "/state"));
  files.memory =
      DSEC_TRY(open_checked(dir.get(), snapshot::kMemoryFileName, false, image_path + "/memory"));
  if (::fstat(files.memory.get(), &st) != 0) {
    return fail_errno("fstat " + image_path + "/memory", errno);
  }
  files.memory_bytes = static_cast<uint64_t>(st.st_size);
  return files;
}

Result<ImageStoreUsage> ImageStore::usage() const {
  return usage_of(fd_.get(), path_);
}

PoolResult<StagedImage> ImageStore::stage(std::string_view name, uint64_t expected_bytes) {
  if (auto valid = check_image_name(name); !valid) {
    return std::unexpected(error(Failure::kInvalid, "'name': " + valid.error().message()));
  }
  const std::string image(name);
  struct stat st {};
  if (::fstatat(fd_.get(), image.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 ||
      in_flight_->names.contains(image)) {
    return std::unexpected(error(Failure::kConflict, "the image store has " + image +
                                                         " already (or a snapshot of that name "
                                                         "is being written): name another"));
  }
  auto usage = usage_of(fd_.get(), path_);
  if (!usage) {
    return std::unexpected(error(Failure::kUnavailable, usage.error().message()));
  }
  const uint64_t images = usage->images + in_flight_->names.size();
  if (images + 1 > limits_.max_images) {
    return std::unexpected(full(fmt::format("it holds {} images (snapshots being written "
                                            "included), its maximum",
                                            images),
                                "--image-store-max-images"));
  }
  const uint64_t bytes = usage->bytes + in_flight_->bytes;
  if (bytes + expected_bytes > limits_.max_bytes) {
    return std::unexpected(
        full(fmt::format("it holds {} (snapshots being written included), and "
                         "this snapshot takes {} more, past its {}",
                         mib(bytes), mib(expected_bytes), mib(limits_.max_bytes)),
             "--image-store-max-bytes"));
  }
  const std::string staging = random_staging_name();
  if (::mkdirat(fd_.get(), staging.c_str(), 0700) != 0) {
    return std::unexpected(
        error(Failure::kUnavailable,
              fmt::format("cannot make {}/{}: {}", path_, staging, std::strerror(errno))));
  }
  auto dir = open_checked(fd_.get(), staging.c_str(), true, path_ + "/" + staging);
  if (!dir) {
    remove_staging(fd_.get(), staging);
    return std::unexpected(error(Failure::kUnavailable, dir.error().message()));
  }
  in_flight_->names.insert(image);
  in_flight_->bytes += expected_bytes;
  return StagedImage(in_flight_, fd_.get(), image, staging, std::move(*dir), expected_bytes,
                     limits_, path_);
}

// --- StagedImage ---

StagedImage::StagedImage(std::shared_ptr<InFlight> in_flight, int store_fd, std::string name,
                         std::string staging_name, UniqueFd dir, uint64_t reserved_bytes,
                         ImageStoreLimits limits, std::string store_path)
    : in_flight_(std::move(in_flight)),
      store_fd_(store_fd),
      name_(std::move(name)),
      staging_name_(std::move(staging_name)),
      dir_(std::move(dir)),
      reserved_bytes_(reserved_bytes),
      limits_(limits),
      store_path_(std::move(store_path)) {}

StagedImage::StagedImage(StagedImage&& other) noexcept
    : in_flight_(std::move(other.in_flight_)),
      store_fd_(other.store_fd_),
      name_(std::move(other.name_)),
      staging_name_(std::exchange(other.staging_name_, {})),
      dir_(std::move(other.dir_)),
      reserved_bytes_(std::exchange(other.reserved_bytes_, 0)),
      limits_(other.limits_),
      store_path_(std::move(other.store_path_)) {}

StagedImage::~StagedImage() {
  discard();
}

void StagedImage::discard() {
  if (!staging_name_.empty()) {
    remove_staging(store_fd_, staging_name_);
    staging_name_.clear();
  }
  if (in_flight_) {
    in_flight_->names.erase(name_);
    in_flight_->bytes -= std::min(in_flight_->bytes, reserved_bytes_);
    in_flight_.reset();
  }
  dir_.reset();
}

PoolResult<void> StagedImage::commit() {
  if (staging_name_.empty()) {
    return std::unexpected(error(Failure::kUnavailable, "the snapshot was discarded"));
  }
  uint64_t written = 0;
  for (const char* file : kImageFiles) {
    struct stat st {};
    if (::fstatat(dir_.get(), file, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
      discard();
      return std::unexpected(error(Failure::kInvalid, fmt::format("the snapshot has no regular "
                                                                  "file {}",
                                                                  file)));
    }
    written += static_cast<uint64_t>(st.st_size);
  }
  // What the store holds now, other snapshots committed meanwhile included: the one check
  // that counts (stage()'s refused early what would surely not fit).
  auto usage = usage_of(store_fd_, store_path_);
  if (!usage) {
    discard();
    return std::unexpected(error(Failure::kUnavailable, usage.error().message()));
  }
  if (usage->images + 1 > limits_.max_images) {
    discard();
    return std::unexpected(full(fmt::format("it holds {} images, its maximum", usage->images),
                                "--image-store-max-images"));
  }
  if (usage->bytes + written > limits_.max_bytes) {
    discard();
    return std::unexpected(
        full(fmt::format("it holds {}, and the snapshot {} more, past its {}", mib(usage->bytes),
                         mib(written), mib(limits_.max_bytes)),
             "--image-store-max-bytes"));
  }
  ::fsync(dir_.get());
  // Never over anything: renameat would replace an empty directory or a link there.
  if (::renameat2(store_fd_, staging_name_.c_str(), store_fd_, name_.c_str(), RENAME_NOREPLACE) !=
      0) {
    const int err = errno;
    discard();
    if (err == EEXIST) {
      return std::unexpected(
          error(Failure::kConflict, "the image store has " + name_ + " already: name another"));
    }
    return std::unexpected(
        error(Failure::kUnavailable, fmt::format("cannot rename the snapshot to {}/{}: {}",
                                                 store_path_, name_, std::strerror(err))));
  }
  ::fsync(store_fd_);
  staging_name_.clear();
  discard();  // the reservation
  return {};
}

}  // namespace dsec::pool
