// Console output to a file descriptor: the serial port's sink for stdout or a log file.
#pragma once

#include "vmm/devices/legacy/serial.h"

namespace dsec::devices {

// A Serial::OutputSink that writes every byte to `fd`, which the caller owns and keeps open
// for as long as the sink lives. Interrupted and partial writes are retried. Bytes that
// cannot be written (a non-blocking fd that is full, a full disk, a closed pipe) are dropped:
// the guest's output must never stop or fail the VM. A blocking fd that is full blocks the
// writing vCPU, as it would on a real console. A closed pipe raises SIGPIPE unless the process
// ignores it, which is the program's choice, not this sink's.
Serial::OutputSink fd_output(int fd);

}  // namespace dsec::devices
