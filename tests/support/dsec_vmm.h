// For end-to-end tests: the dsec-vmm binary, the guest images it boots, and what the
// default image's init prints.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/build_paths.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace dsec::test {

inline const std::string kVmmBinary = dsec::test::binary_path("/vmm/dsec-vmm");

// Runs `dsec-vmm ARGS...` with stdin from /dev/null; killed at the deadline, after a
// SIGUSR1 that makes a `dsec-vmm run` log where its guest's interrupts and devices stood.
inline ProcessOutput run_vmm(std::vector<std::string> args, std::chrono::milliseconds timeout) {
  args.insert(args.begin(), kVmmBinary);
  return run_process(args, timeout, SIGUSR1);
}

// ${DSEC_CACHE:-$HOME/.cache/dsec-vmm}, where the image and test-bed builds keep their files.
inline std::filesystem::path cache_dir() {
  if (const char* c = std::getenv("DSEC_CACHE"); c && *c) {
    return c;
  }
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/root") / ".cache/dsec-vmm";
}

// The directory dsec-vmm takes its default image from (vmm/cli/default_image.cpp).
inline std::filesystem::path default_image_dir() {
  if (const char* d = std::getenv("DSEC_IMAGE_DIR"); d && *d) {
    return d;
  }
  return cache_dir() / "default";
}

// The default image's files. Each is empty (and the test failed, saying how to build
// them) if missing: an e2e test never skips.
struct DefaultImage {
  std::filesystem::path kernel;   // bzImage
  std::filesystem::path vmlinux;  // the same kernel as an ELF with the PVH note (booted by default)
  std::filesystem::path initrd;
};

inline DefaultImage default_image() {
  namespace fs = std::filesystem;
  const fs::path dir = default_image_dir();
  std::error_code ec;
  DefaultImage image;
  // The default image's kernel link names the vmlinux; images/build-kernel puts the
  // bzImage of the same build beside it.
  const fs::path linked = fs::canonical(dir / "kernel", ec);
  if (!ec) {
    for (const char* name : {"bzImage", "vmlinux"}) {
      if (fs::exists(linked.parent_path() / name)) {
        (name[0] == 'b' ? image.kernel : image.vmlinux) = linked.parent_path() / name;
      }
    }
  }
  image.initrd = fs::canonical(dir / "initrd", ec);
  if (ec) {
    image.initrd.clear();
  }
  if (image.kernel.empty() || image.initrd.empty() || image.vmlinux.empty()) {
    ADD_FAILURE() << "the default image is incomplete in " << dir << " (bzImage: '"
                  << image.kernel.string() << "', vmlinux: '" << image.vmlinux.string()
                  << "', initrd: '" << image.initrd.string()
                  << "'): build it with images/build-image (or point DSEC_IMAGE_DIR at a "
                     "directory with kernel and initrd links, bzImage and vmlinux side by "
                     "side where the kernel link points)";
  }
  return image;
}

// Debian's stock kernel (a bzImage), which the test bed downloads. Empty, and the test
// failed saying how to get it, if missing.
inline std::filesystem::path debian_stock_kernel() {
  namespace fs = std::filesystem;
  const fs::path testbed = cache_dir() / "testbed";
  std::error_code ec;
  for (fs::directory_iterator it(testbed, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->path().filename().string().starts_with("linux-image-")) {
      continue;
    }
    for (fs::directory_iterator boot(it->path() / "root/boot", ec), bend; !ec && boot != bend;
         boot.increment(ec)) {
      if (boot->path().filename().string().starts_with("vmlinuz-")) {
        return boot->path();
      }
    }
    ec.clear();
  }
  ADD_FAILURE() << "Debian's stock kernel is not in " << testbed
                << "/linux-image-*/root/boot/vmlinuz-*: run `tools/kvm-harness prepare`, "
                   "which downloads it (the linux-image-amd64 package, unpacked)";
  return {};
}

// `dsec-init: cpus=N memtotal_kib=K cmdline=...`, the banner the default init prints.
struct Banner {
  int cpus = 0;
  long memtotal_kib = 0;
  std::string cmdline;
};

inline std::optional<Banner> find_banner(const std::string& console) {
  static const std::regex kBanner(R"(dsec-init: cpus=(\d+) memtotal_kib=(\d+) cmdline=([^\r\n]*))");
  std::smatch m;
  if (!std::regex_search(console, m, kBanner)) {
    return std::nullopt;
  }
  return Banner{std::stoi(m[1]), std::stol(m[2]), m[3]};
}

}  // namespace dsec::test
