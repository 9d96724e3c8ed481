// dsec-getrandom: N bytes from the getrandom(2) system call, printed as hex. The e2e
// snapshot tests read it in two clones of one snapshot: a clone whose kernel RNG was not
// reseeded at restore would print what its sibling prints.
//
//   dsec-getrandom N    (1 <= N <= 4096)
#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const long n = argc == 2 ? std::strtol(argv[1], nullptr, 10) : 0;
  if (n < 1 || n > 4096) {
    std::fprintf(stderr, "usage: dsec-getrandom N (1..4096 bytes)\n");
    return 2;
  }
  std::vector<unsigned char> bytes(static_cast<size_t>(n));
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t r = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "dsec-getrandom: getrandom: %s\n", std::strerror(errno));
      return 1;
    }
    got += static_cast<size_t>(r);
  }
  for (const unsigned char b : bytes) std::printf("%02x", b);
  std::printf("\n");
  return 0;
}
