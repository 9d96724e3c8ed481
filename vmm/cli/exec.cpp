// `dsec-vmm exec` and `dsec-vmm cp`: run a command in a sandbox and move files in and out,
// through the guest agent (docs/agent-protocol.md) behind the VM's vsock Unix socket.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "vmm/agent/client.h"
#include "vmm/agent/file_copy.h"
#include "vmm/agent/frame_io.h"
#include "vmm/agent/readiness.h"
#include "vmm/cli/cli11.h"
#include "vmm/cli/commands.h"

namespace dsec::cli {
namespace {

// Exit statuses of exec beyond the command's own (documented in --help).
constexpr int kExitTimedOut = 124;
constexpr int kExitAgentError = 125;

agent::AgentClient client_for(const std::string& vsock, double answer_timeout_s) {
  return agent::vsock_uds_client(
      vsock, std::chrono::milliseconds(static_cast<int64_t>(answer_timeout_s * 1000)));
}

// Default of --answer-timeout, in seconds.
constexpr double kDefaultAnswerTimeoutS =
    std::chrono::duration<double>(agent::kDefaultAnswerTimeout).count();

// --answer-timeout, the same on exec and cp.
void add_answer_timeout_option(CLI::App& command, double& seconds, const std::string& what) {
  command
      .add_option("--answer-timeout", seconds,
                  "Seconds the guest has to answer at each step (the VM's socket to accept and "
                  "answer the connection, the agent each reply and each frame we send); past "
                  "them the " +
                      what + " fails, saying the guest stopped answering")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str();
}

// --wait, the same on exec and cp.
void add_wait_option(CLI::App& command, double& seconds) {
  command
      .add_option("--wait", seconds,
                  "Seconds to wait, before anything else, for the sandbox's agent to answer (the "
                  "socket to appear and a health check to pass), for a VM that is still booting "
                  "or restoring; 0 (the default): no waiting")
      ->check(CLI::Range(0.0, 86400.0));
}

// Waits for the agent as --wait says; an error that says why it did not answer in time.
Status wait_for_agent(const std::string& vsock, double wait_s) {
  if (wait_s <= 0) {
    return ok();
  }
  return agent::wait_for_agent(vsock,
                               std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)), {});
}

agent::Sink to_fd(int fd) {
  return [fd](std::span<const uint8_t> b) { return agent::write_all(fd, b); };
}

struct ExecOptions {
  std::string vsock;
  std::vector<std::string> command;
  std::vector<std::string> env;
  std::string cwd;
  double timeout_s = 0;
  double answer_timeout_s = kDefaultAnswerTimeoutS;
  double wait_s = 0;
  bool stdin_open = false;
};

Result<std::vector<uint8_t>> read_all_stdin() {
  std::vector<uint8_t> data;
  std::vector<uint8_t> buf(size_t{64} * 1024);
  while (true) {
    const ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      return fail_errno("reading stdin", errno);
    }
    if (n == 0) {
      return data;
    }
    data.insert(data.end(), buf.begin(), buf.begin() + n);
  }
}

int exec_main(const ExecOptions& o) {
  agent::ExecRequest req{o.command, o.env, o.cwd, static_cast<uint32_t>(o.timeout_s * 1000),
                         o.stdin_open};
  std::vector<uint8_t> input;
  if (o.stdin_open) {
    auto in = read_all_stdin();
    if (!in) {
      (void)std::fprintf(stderr, "dsec-vmm exec: %s\n", in.error().message().c_str());
      return kExitAgentError;
    }
    input = std::move(*in);
  }
  if (auto waited = wait_for_agent(o.vsock, o.wait_s); !waited) {
    (void)std::fprintf(stderr, "dsec-vmm exec: %s\n", waited.error().message().c_str());
    return kExitAgentError;
  }
  auto client = client_for(o.vsock, o.answer_timeout_s);
  auto status = client.exec(req, to_fd(STDOUT_FILENO), to_fd(STDERR_FILENO), input);
  if (!status) {
    (void)std::fprintf(stderr, "dsec-vmm exec: %s\n", status.error().message().c_str());
    return kExitAgentError;
  }
  switch (status->kind) {
    case agent::ExitStatus::Kind::kExited:
      return status->code;
    case agent::ExitStatus::Kind::kSignaled:
      return 128 + status->code;
    case agent::ExitStatus::Kind::kTimedOut:
      (void)std::fprintf(stderr, "dsec-vmm exec: '%s' timed out after %g s and was killed\n",
                         o.command.front().c_str(), o.timeout_s);
      return kExitTimedOut;
  }
  return kExitAgentError;
}

struct CpOptions {
  std::string vsock;
  std::string source;
  std::string destination;
  double answer_timeout_s = kDefaultAnswerTimeoutS;
  double wait_s = 0;
};

constexpr std::string_view kGuestPrefix = "vm:";

int cp_main(const CpOptions& o) {
  const bool into_guest = o.destination.starts_with(kGuestPrefix);
  const bool out_of_guest = o.source.starts_with(kGuestPrefix);
  if (into_guest == out_of_guest) {
    (void)std::fprintf(
        stderr, "dsec-vmm cp: exactly one of SOURCE and DEST must be a guest path (vm:/path)\n");
    return 1;
  }
  if (auto waited = wait_for_agent(o.vsock, o.wait_s); !waited) {
    (void)std::fprintf(stderr, "dsec-vmm cp: %s\n", waited.error().message().c_str());
    return 1;
  }
  auto client = client_for(o.vsock, o.answer_timeout_s);
  if (into_guest) {
    auto s = agent::copy_into_guest(client, o.source, o.destination.substr(kGuestPrefix.size()));
    if (!s) {
      (void)std::fprintf(stderr, "dsec-vmm cp: %s\n", s.error().message().c_str());
      return 1;
    }
    return 0;
  }
  // Out of the guest: the file lands whole with the guest's permission bits less our umask
  // (never setuid, setgid or sticky), or not at all.
  const mode_t umask = ::umask(0);
  ::umask(umask);
  auto copied =
      agent::copy_out_of_guest(client, o.source.substr(kGuestPrefix.size()), o.destination, umask);
  if (!copied) {
    (void)std::fprintf(stderr, "dsec-vmm cp: %s\n", copied.error().message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

void add_exec_command(CLI::App& app, CommandAction& action) {
  auto o = std::make_shared<ExecOptions>();
  CLI::App* exec =
      app.add_subcommand("exec", "Run a command in a running sandbox through its guest agent");
  exec->footer(
      "VSOCK is the VM's vsock Unix socket (dsec-vmm run --vsock). The guest must run the agent "
      "(the default image does with dsec.agent on its command line). The command's stdout and "
      "stderr stream to ours. The command may stay silent as long as it likes: when its "
      "connection is quiet for --answer-timeout, a health check on a fresh connection asks the "
      "agent whether it still answers, and exec fails (status 125) when it does not. Exit "
      "status: the command's own; 128+N if signal N killed it; 124 if --timeout fired (the "
      "command's whole process group is killed); 125 if the agent could not be reached, "
      "stopped answering, refused the command or did not answer within --wait (the reason goes "
      "to stderr).");
  exec->add_option("vsock", o->vsock, "The VM's vsock Unix socket")->required();
  exec->add_option("command", o->command, "The command and its arguments (after --)")->required();
  exec->add_option("--env,-e", o->env, "NAME=value for the command's environment (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  exec->add_option("--cwd", o->cwd, "Working directory in the guest (default /)");
  exec->add_option("--timeout", o->timeout_s,
                   "Kill the command after this many seconds (default: none)")
      ->check(CLI::Range(0.0, 4294967.0));
  exec->add_flag("--stdin,-i", o->stdin_open, "Send our stdin to the command (read whole first)");
  add_answer_timeout_option(*exec, o->answer_timeout_s, "exec");
  add_wait_option(*exec, o->wait_s);
  exec->callback([&action, o] { action = [o] { return exec_main(*o); }; });

  auto c = std::make_shared<CpOptions>();
  CLI::App* cp = app.add_subcommand("cp", "Copy a file into or out of a running sandbox");
  cp->footer(
      "A guest path is written vm:/absolute/path; exactly one of SOURCE and DEST is one. Files "
      "land whole or not at all on either side (written beside the target, synced, then renamed "
      "over it). Into the guest, the file keeps its permission bits. Out of it, the host file "
      "gets the guest's read, write and execute bits less our umask, never setuid, setgid or "
      "sticky; the guest must send exactly the size it announced (a byte more fails the copy "
      "at once), and each step must come within --answer-timeout. Exit status 0, or 1 with "
      "the reason on stderr.");
  cp->add_option("vsock", c->vsock, "The VM's vsock Unix socket")->required();
  cp->add_option("source", c->source, "Host path, or vm:/path in the guest")->required();
  cp->add_option("dest", c->destination, "Host path, or vm:/path in the guest")->required();
  add_answer_timeout_option(*cp, c->answer_timeout_s, "copy");
  add_wait_option(*cp, c->wait_s);
  cp->callback([&action, c] { action = [c] { return cp_main(*c); }; });
}

}  // namespace dsec::cli
