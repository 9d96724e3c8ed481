// For end-to-end tests: a warm image (`dsec-vmm warm` of the default image) that every test
// process of one test-bed session shares. ctest runs each test in a process of its own, so
// an image made per process would cost every test a cold boot; this one is made by the
// first process that asks, under a lock, and found by the others. It lives on a local
// file system (/run, a tmpfs in the test bed, whose /tmp is the host's over 9p) in a
// directory named after the dsec-vmm binary (its size and time) and the setup commands,
// so that a rebuilt VMM or other commands make a new one.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tests/support/dsec_vmm.h"
#include "tests/support/file_text.h"

namespace dsec::test {

struct WarmImage {
  std::filesystem::path dir;  // holds `state` and `memory`, as `dsec-vmm warm --out` writes
  std::chrono::system_clock::time_point taken;  // when the snapshot was written
  std::string failure;                          // empty when the image is there
};

namespace warm_image_detail {

inline std::filesystem::path local_dir() {
  return ::access("/run", W_OK) == 0 ? "/run" : std::filesystem::temp_directory_path();
}

// Names the image after what made it: the binary's size and modification time, and the
// warm arguments.
inline std::string key(const std::vector<std::string>& warm_args) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string what = std::to_string(fs::file_size(kVmmBinary, ec));
  what += "/" + std::to_string(fs::last_write_time(kVmmBinary, ec).time_since_epoch().count());
  for (const auto& a : warm_args) what += "\n" + a;
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016zx", std::hash<std::string>{}(what));
  return hex;
}

inline WarmImage make(const std::vector<std::string>& warm_args) {
  namespace fs = std::filesystem;
  using std::chrono::seconds;
  using std::chrono::system_clock;
  WarmImage image;
  const std::string name = "dsec-warm-" + key(warm_args);
  image.dir = local_dir() / name;
  const fs::path taken_file = image.dir / "taken";
  // Held until the image is there (or failed): another test process waits here.
  const int lock =
      ::open((local_dir() / (name + ".lock")).c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) {
    image.failure = "cannot lock the warm image's lock file in " + local_dir().string();
    if (lock >= 0) ::close(lock);
    return image;
  }
  std::error_code ec;
  if (!fs::exists(taken_file, ec)) {
    const fs::path partial = local_dir() / (name + ".partial");
    fs::remove_all(partial, ec);
    std::vector<std::string> args{"warm", "--out", partial.string(), "--console",
                                  (fs::temp_directory_path() / (name + ".console")).string()};
    args.insert(args.end(), warm_args.begin(), warm_args.end());
    const auto out = run_vmm(args, std::chrono::seconds(300));
    if (out.exit_status != 0) {
      image.failure = "dsec-vmm warm failed: " + out.describe();
    } else {
      std::ofstream(partial / "taken")
          << std::chrono::duration_cast<seconds>(system_clock::now().time_since_epoch()).count();
      fs::rename(partial, image.dir, ec);
      if (ec) image.failure = "cannot rename the warm image into place: " + ec.message();
    }
  }
  if (image.failure.empty()) {
    const long long taken = std::strtoll(file_text(taken_file).c_str(), nullptr, 10);
    if (taken <= 0) image.failure = "the warm image's " + taken_file.string() + " is unreadable";
    image.taken = system_clock::time_point(seconds(taken));
  }
  ::close(lock);  // releases the lock
  return image;
}

}  // namespace warm_image_detail

// The warm image made by `dsec-vmm warm` with `warm_args` (vCPUs, memory, --exec setup
// commands): made once per test-bed session, found by every later test process.
inline const WarmImage& shared_warm_image(const std::vector<std::string>& warm_args) {
  static std::mutex mutex;
  static std::map<std::vector<std::string>, WarmImage> images;
  std::lock_guard lock(mutex);
  auto it = images.find(warm_args);
  if (it == images.end()) {
    it = images.emplace(warm_args, warm_image_detail::make(warm_args)).first;
  }
  return it->second;
}

// Puts `image` into a pool's image store `store` as image `name`: the store and the image's
// directory made 0700, and the image's files hard links of the shared image's (no copy of
// its memory; the store needs no file of its own). Returns the image's directory, empty
// when it could not be made. Never change a linked file's mode: it is the shared image's.
inline std::filesystem::path link_into_store(const WarmImage& image,
                                             const std::filesystem::path& store,
                                             const std::string& name) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(store / name, ec);
  for (const auto& dir : {store, store / name}) {
    fs::permissions(dir, fs::perms::owner_all, ec);
  }
  for (const char* file : {"state", "memory"}) {
    fs::create_hard_link(image.dir / file, store / name / file, ec);
  }
  return ec ? fs::path() : store / name;
}

}  // namespace dsec::test
