// Starts a process the agent keeps (process-start): in a session of its own, so that a
// signal reaches everything it started, with pipes (or a terminal) the agent's loop reads
// and writes, optionally as another user of the guest.
#pragma once

#include <sys/types.h>

#include "vmm/agent/process_protocol.h"
#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"

namespace dsec::agent {

struct SpawnedProcess {
  pid_t pid = -1;
  // Its stdin's write end (invalid when stdin is /dev/null); with a terminal, the master.
  UniqueFd in;
  // Its stdout's and stderr's read ends; with a terminal, `out` reads the master (a
  // duplicate of `in`) and `err` is invalid.
  UniqueFd out;
  UniqueFd err;
};

// Forks and execs `req`; the Error (no such program, user or directory) is the host's to
// read. The caller reaps the child.
Result<SpawnedProcess> spawn_process(const ProcessStartRequest& req);

// A close-on-exec pipe (exec's and process-start's stdio).
Status make_pipe(UniqueFd& read_end, UniqueFd& write_end);

// Sets the terminal size of a pty master.
Status set_terminal_size(int master, uint16_t rows, uint16_t cols);

}  // namespace dsec::agent
