// dsec-blkbench: block-device load for benchmarks/sandbox-vs-qemu, run in the guest through
// the agent. O_DIRECT, queue depth 1, so the figures are the device's, not the page cache's.
//
//   dsec-blkbench seqread  DEV MIB    read MIB MiB in 1 MiB requests
//   dsec-blkbench seqwrite DEV MIB    write MIB MiB in 1 MiB requests, then fdatasync
//   dsec-blkbench randread DEV OPS    OPS 4 KiB reads at random 4 KiB-aligned offsets
//
// Prints `bytes=<n> ops=<n>`; the caller times the command from the host, whose clock is
// trustworthy where the guest's (nested, emulated) is not.
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

namespace {

int usage() {
  (void)std::fprintf(stderr, "usage: dsec-blkbench seqread|seqwrite|randread DEV N\n");
  return 2;
}

int die(const char* what) {
  (void)std::fprintf(stderr, "dsec-blkbench: %s: %s\n", what, std::strerror(errno));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    return usage();
  }
  const std::string mode = argv[1];
  const char* dev = argv[2];
  const long n = std::strtol(argv[3], nullptr, 10);
  if (n <= 0) {
    return usage();
  }
  const bool write = mode == "seqwrite";
  if (!write && mode != "seqread" && mode != "randread") {
    return usage();
  }
  const int fd = ::open(dev, (write ? O_WRONLY : O_RDONLY) | O_DIRECT | O_CLOEXEC);
  if (fd < 0) {
    return die(dev);
  }
  uint64_t dev_bytes = 0;
  if (::ioctl(fd, BLKGETSIZE64, &dev_bytes) != 0) {
    return die("BLKGETSIZE64");
  }
  constexpr size_t kBig = 1 << 20, kSmall = 4096;
  void* buf = nullptr;
  if (::posix_memalign(&buf, 4096, kBig) != 0) {
    return die("posix_memalign");
  }
  std::memset(buf, 0x5a, kBig);
  uint64_t bytes = 0, ops = 0;
  if (mode == "randread") {
    std::mt19937_64 rng(1);
    const uint64_t blocks = dev_bytes / kSmall;
    for (long i = 0; i < n; ++i) {
      const off_t off = static_cast<off_t>((rng() % blocks) * kSmall);
      if (::pread(fd, buf, kSmall, off) != static_cast<ssize_t>(kSmall)) {
        return die("pread");
      }
      bytes += kSmall;
      ++ops;
    }
  } else {
    const uint64_t total = static_cast<uint64_t>(n) * kBig;
    if (total > dev_bytes) {
      (void)std::fprintf(stderr, "dsec-blkbench: %s holds %llu bytes, fewer than %llu\n", dev,
                         static_cast<unsigned long long>(dev_bytes),
                         static_cast<unsigned long long>(total));
      return 1;
    }
    for (uint64_t off = 0; off < total; off += kBig) {
      const ssize_t r = write ? ::pwrite(fd, buf, kBig, static_cast<off_t>(off))
                              : ::pread(fd, buf, kBig, static_cast<off_t>(off));
      if (r != static_cast<ssize_t>(kBig)) {
        return die(write ? "pwrite" : "pread");
      }
      bytes += kBig;
      ++ops;
    }
    if (write && ::fdatasync(fd) != 0) {
      return die("fdatasync");
    }
  }
  std::printf("bytes=%llu ops=%llu\n", static_cast<unsigned long long>(bytes),
              static_cast<unsigned long long>(ops));
  return 0;
}
