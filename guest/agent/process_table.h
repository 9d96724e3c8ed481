// The processes the agent keeps past the connection that started them (process-start):
// their output held in bounded buffers until read, their stdin fed, their exits recorded.
// Owned by the agent's one loop (agent_loop.h), which polls the fds this table names and
// hands it what the kernel reports; single-threaded by design.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "guest/agent/output_buffer.h"
#include "vmm/agent/process_protocol.h"
#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::agent {

// Input queued for a process that does not read it is bounded too.
inline constexpr size_t kMaxPendingStdin = size_t{1} << 20;

struct KeptProcess {
  using Clock = std::chrono::steady_clock;

  pid_t pid = -1;
  std::string tag;
  std::vector<std::string> argv;
  bool pty = false;
  UniqueFd in, out, err;
  std::deque<uint8_t> stdin_pending;
  bool stdin_closing = false;
  OutputBuffer stdout_buffer, stderr_buffer;
  std::optional<ExitStatus> exit;
  Clock::time_point exited_at;
  // Its end was told to someone (an attached connection, a list after its output was read):
  // the table may forget it once no one is attached.
  bool end_reported = false;
  int attached = 0;
  uint64_t started = 0;  // the order of starts, to reap the oldest first

  // Exited, with its output read to its end from the pipes (or left after the drain).
  bool finished() const { return exit.has_value() && !out && !err; }
};

class ProcessTable {
 public:
  using Clock = std::chrono::steady_clock;

  ProcessTable() = default;
  ProcessTable(const ProcessTable&) = delete;
  ProcessTable& operator=(const ProcessTable&) = delete;
  // Kills every process still running (SIGKILL to its group) and reaps it.
  ~ProcessTable();

  // Starts a process; past kMaxProcesses running ones, an Error that says so.
  Result<pid_t> start(const ProcessStartRequest& req);
  KeptProcess* find(pid_t pid);
  // Every process, oldest first; finished ones whose output was all read are then reported
  // and forgotten.
  ProcessListReply list();

  Status input(const ProcessInput& m);
  Status close_stdin(pid_t pid);
  Status signal(const ProcessSignal& m);
  Status resize(const ProcessResize& m);

  // A child the loop reaped; false when it is none of the table's.
  bool on_exit(pid_t pid, int wstatus);
  // The fds to poll for the table's processes, and what to do when they are ready.
  void add_pollfds(std::vector<pollfd>& fds) const;
  void on_ready(const pollfd& ready);
  // Ends drains that ran out (output a background child keeps open) and forgets processes
  // that are done with; returns when next to call it (nullopt: no timer needed).
  std::optional<Clock::time_point> tick();

  size_t size() const { return processes_.size(); }

 private:
  Result<KeptProcess*> running(pid_t pid);
  void read_output(KeptProcess& p, bool from_stderr);
  void write_stdin(KeptProcess& p);
  void reap_finished_for_room();

  std::map<pid_t, KeptProcess> processes_;
  uint64_t starts_ = 0;
};

}  // namespace dsec::agent
