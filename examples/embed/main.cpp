// What an orchestrator does with dsec-vmm's library: boot a sandbox, run a command in it,
// move a file in and out, bound what a command may write, pause and resume it, snapshot it
// once set up (a warm image), and start a clone of that snapshot. Every sandbox is its own
// dsec-vmm process; each Sandbox object stops its VMM and removes its files when it goes.
//
//   embed-example KERNEL INITRD WORK_DIR
//
// KERNEL and INITRD: a guest image whose init runs the dsec-vmm agent (the default image,
// images/build-image: ~/.cache/dsec-vmm/default/{kernel,initrd}). WORK_DIR: where the
// example writes its files and the snapshot (a local file system). Exit status 0 when every
// step did what it should.
#include <dsec/sandbox.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

int failed(const char* step, const dsec::sdk::Error& error) {
  std::fprintf(stderr, "embed-example: %s failed: %s\n", step, error.to_string().c_str());
  return 1;
}

// Runs `command` with sh -c; prints it and its output.
dsec::sdk::Result<dsec::sdk::ExecResult> run(const dsec::sdk::Sandbox& sandbox,
                                             const std::string& command) {
  std::printf("$ %s\n", command.c_str());
  auto result = sandbox.client().exec({.argv = {"sh", "-c", command}});
  if (result) {
    std::printf("%s%s(exit status %d)\n", result->stdout_data.c_str(), result->stderr_data.c_str(),
                result->status.code);
  }
  return result;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s KERNEL INITRD WORK_DIR\n", argv[0]);
    return 2;
  }
  const std::string work = argv[3];

  dsec::sdk::BootOptions boot;
  boot.kernel = argv[1];
  boot.initrd = argv[2];
  boot.vcpus = 1;
  boot.memory_mib = 128;
  auto start = Clock::now();
  auto sandbox = dsec::sdk::Sandbox::boot(boot);
  if (!sandbox) {
    return failed("boot", sandbox.error());
  }
  std::printf("booted a sandbox: VMM pid %d, agent ready after %.0f ms\n", sandbox->vmm_pid(),
              ms_since(start));

  auto uname = run(*sandbox, "uname -a");
  if (!uname || !uname->status.success()) {
    return uname ? 1 : failed("exec", uname.error());
  }

  // A file in, changed in the guest, and back out.
  const std::string input = work + "/hello.txt";
  const std::string output = work + "/upper.txt";
  std::ofstream(input) << "hello from the host\n";
  if (auto in = sandbox->client().copy_in(input, "/tmp/hello.txt"); !in) {
    return failed("copy in", in.error());
  }
  if (auto upper = run(*sandbox, "tr a-z A-Z </tmp/hello.txt >/tmp/upper.txt"); !upper) {
    return failed("exec", upper.error());
  }
  auto copied = sandbox->client().copy_out("/tmp/upper.txt", output);
  if (!copied) {
    return failed("copy out", copied.error());
  }
  const std::string upper = read_file(output);
  std::printf("copied in %s, out %s (%llu bytes): %s", input.c_str(), output.c_str(),
              static_cast<unsigned long long>(*copied), upper.c_str());
  if (upper != "HELLO FROM THE HOST\n") {
    std::fprintf(stderr, "embed-example: the file came back as '%s'\n", upper.c_str());
    return 1;
  }

  // What a sandbox writes is bounded: past the limit the exec fails, and the sandbox serves
  // the next one.
  auto flood = sandbox->client().exec({.argv = {"head", "-c", "4194304", "/dev/zero"}},
                                      /*max_output_bytes=*/size_t{1} << 20);
  if (flood || flood.error().code() != dsec::sdk::ErrorCode::kOutputLimit) {
    std::fprintf(stderr, "embed-example: 4 MiB of output passed a 1 MiB limit\n");
    return 1;
  }
  std::printf("a command writing 4 MiB with a 1 MiB limit: %s\n", flood.error().message().c_str());

  // Set the sandbox up once, snapshot it: a warm image that clones start from.
  if (auto setup = run(*sandbox, "echo set up before the snapshot >/tmp/warm"); !setup) {
    return failed("exec", setup.error());
  }
  const std::string snapshot = work + "/warm";
  start = Clock::now();
  if (auto paused = sandbox->client().pause(); !paused) {
    return failed("pause", paused.error());
  }
  if (auto resumed = sandbox->client().resume(); !resumed) {
    return failed("resume", resumed.error());
  }
  std::printf("paused and resumed the sandbox\n");
  if (auto made = sandbox->client().snapshot(snapshot); !made) {
    return failed("snapshot", made.error());
  }
  std::printf("snapshot written to %s in %.0f ms\n", snapshot.c_str(), ms_since(start));
  auto stopped = sandbox->stop();
  if (!stopped) {
    return failed("stop", stopped.error());
  }
  std::printf("first sandbox stopped (VMM exit status %d)\n", *stopped);

  start = Clock::now();
  auto clone = dsec::sdk::Sandbox::restore({.snapshot_dir = snapshot, .launch = {}});
  if (!clone) {
    return failed("restore", clone.error());
  }
  std::printf("restored a clone: VMM pid %d, ready after %.0f ms\n", clone->vmm_pid(),
              ms_since(start));
  auto warm = run(*clone, "cat /tmp/warm");
  if (!warm) {
    return failed("exec in the clone", warm.error());
  }
  if (warm->stdout_data != "set up before the snapshot\n") {
    std::fprintf(stderr, "embed-example: the clone lacks what the snapshot held\n");
    return 1;
  }
  std::printf("done: the clone has what was set up before the snapshot\n");
  return 0;
}
