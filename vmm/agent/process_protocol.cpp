#include "vmm/agent/process_protocol.h"

#include "vmm/agent/wire.h"

namespace dsec::agent {
namespace {

Result<uint16_t> terminal_side(WireReader& r, const char* what) {
  const uint32_t v = DSEC_TRY(r.u32());
  if (v == 0 || v > kMaxTerminalSide) {
    return fail(std::string(what) + ": a terminal of " + std::to_string(v) +
                " characters a side; it must be 1 to " + std::to_string(kMaxTerminalSide));
  }
  return static_cast<uint16_t>(v);
}

Result<bool> flag(WireReader& r, const char* what) {
  const uint8_t v = DSEC_TRY(r.u8());
  if (v > 1) {
    return fail(std::string(what) + ": a flag of " + std::to_string(v) + ", not 0 or 1");
  }
  return v == 1;
}

}  // namespace

std::vector<std::string> listed_argv(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  size_t left = kMaxListedArgvBytes;
  for (const auto& a : argv) {
    if (left == 0) {
      break;
    }
    out.push_back(a.substr(0, left));
    left -= out.back().size();
  }
  return out;
}

std::vector<uint8_t> encode(const ProcessStartRequest& m) {
  WireWriter w;
  w.strings(m.argv);
  w.strings(m.env);
  w.string(m.cwd);
  w.string(m.tag);
  w.string(m.user);
  w.u8(m.stdin_open ? 1 : 0);
  w.u8(m.pty ? 1 : 0);
  w.u32(m.rows);
  w.u32(m.cols);
  return w.take();
}

Result<ProcessStartRequest> decode_process_start_request(std::span<const uint8_t> payload) {
  constexpr const char* kWhat = "process-start request";
  WireReader r(payload, kWhat);
  ProcessStartRequest m;
  m.argv = DSEC_TRY(r.strings(kMaxArgs, kMaxStringLen));
  m.env = DSEC_TRY(r.strings(kMaxEnv, kMaxStringLen));
  m.cwd = DSEC_TRY(r.string(kMaxPathLen));
  m.tag = DSEC_TRY(r.string(kMaxTagLen));
  m.user = DSEC_TRY(r.string(kMaxUserLen));
  m.stdin_open = DSEC_TRY(flag(r, kWhat));
  m.pty = DSEC_TRY(flag(r, kWhat));
  m.rows = DSEC_TRY(terminal_side(r, kWhat));
  m.cols = DSEC_TRY(terminal_side(r, kWhat));
  DSEC_TRY(r.finish());
  if (m.argv.empty() || m.argv.front().empty()) {
    return fail("process-start request: no program to run (argv is empty)");
  }
  DSEC_TRY(check_env(m.env, kWhat));
  if (!m.cwd.empty()) {
    DSEC_TRY(check_path(m.cwd, "process-start request: cwd"));
  }
  if (m.user.find_first_of(":/\n") != std::string::npos) {
    return fail("process-start request: '" + m.user + "' is no user name");
  }
  return m;
}

std::vector<uint8_t> encode(const ProcessRef& m) {
  WireWriter w;
  w.u32(m.pid);
  return w.take();
}

Result<ProcessRef> decode_process_ref(std::span<const uint8_t> payload) {
  WireReader r(payload, "process reference");
  ProcessRef m;
  m.pid = DSEC_TRY(r.u32());
  DSEC_TRY(r.finish());
  return m;
}

std::vector<uint8_t> encode(const ProcessInput& m) {
  WireWriter w;
  w.u32(m.pid);
  w.raw(m.data);
  return w.take();
}

Result<ProcessInput> decode_process_input(std::span<const uint8_t> payload) {
  WireReader r(payload, "process-input");
  ProcessInput m;
  m.pid = DSEC_TRY(r.u32());
  const auto data = r.rest();
  if (data.size() > kMaxChunk) {
    return fail("process-input: " + std::to_string(data.size()) + " bytes, over the limit of " +
                std::to_string(kMaxChunk) + " a frame");
  }
  m.data.assign(data.begin(), data.end());
  return m;
}

std::vector<uint8_t> encode(const ProcessSignal& m) {
  WireWriter w;
  w.u32(m.pid);
  w.i32(m.signal);
  return w.take();
}

Result<ProcessSignal> decode_process_signal(std::span<const uint8_t> payload) {
  WireReader r(payload, "process-signal");
  ProcessSignal m;
  m.pid = DSEC_TRY(r.u32());
  m.signal = DSEC_TRY(r.i32());
  DSEC_TRY(r.finish());
  if (m.signal < 1 || m.signal > kMaxSignal) {
    return fail("process-signal: signal " + std::to_string(m.signal) + " is not 1 to " +
                std::to_string(kMaxSignal));
  }
  return m;
}

std::vector<uint8_t> encode(const ProcessResize& m) {
  WireWriter w;
  w.u32(m.pid);
  w.u32(m.rows);
  w.u32(m.cols);
  return w.take();
}

Result<ProcessResize> decode_process_resize(std::span<const uint8_t> payload) {
  constexpr const char* kWhat = "process-resize";
  WireReader r(payload, kWhat);
  ProcessResize m;
  m.pid = DSEC_TRY(r.u32());
  m.rows = DSEC_TRY(terminal_side(r, kWhat));
  m.cols = DSEC_TRY(terminal_side(r, kWhat));
  DSEC_TRY(r.finish());
  return m;
}

std::vector<uint8_t> encode(const ProcessListReply& m) {
  WireWriter w;
  w.u32(static_cast<uint32_t>(m.processes.size()));
  for (const auto& p : m.processes) {
    w.u32(p.pid);
    w.string(p.tag);
    w.strings(p.argv);
    w.u8(p.running ? 1 : 0);
    w.u8(p.pty ? 1 : 0);
    w.u8(static_cast<uint8_t>(p.exit.kind));
    w.i32(p.exit.code);
    w.u64(p.stdout_dropped);
    w.u64(p.stderr_dropped);
  }
  return w.take();
}

Result<ProcessListReply> decode_process_list_reply(std::span<const uint8_t> payload) {
  constexpr const char* kWhat = "process-list reply";
  WireReader r(payload, kWhat);
  ProcessListReply m;
  const uint32_t count = DSEC_TRY(r.u32());
  if (count > kMaxProcesses) {
    return fail("process-list reply: " + std::to_string(count) + " processes, over the " +
                std::to_string(kMaxProcesses) + " an agent keeps");
  }
  for (uint32_t i = 0; i < count; ++i) {
    ProcessEntry p;
    p.pid = DSEC_TRY(r.u32());
    p.tag = DSEC_TRY(r.string(kMaxTagLen, /*no_nul=*/false));
    p.argv = DSEC_TRY(r.strings(kMaxListedArgvBytes, kMaxListedArgvBytes));
    p.running = DSEC_TRY(flag(r, kWhat));
    p.pty = DSEC_TRY(flag(r, kWhat));
    const uint8_t kind = DSEC_TRY(r.u8());
    if (kind > static_cast<uint8_t>(ExitStatus::Kind::kTimedOut)) {
      return fail("process-list reply: unknown exit kind " + std::to_string(kind));
    }
    p.exit.kind = static_cast<ExitStatus::Kind>(kind);
    p.exit.code = DSEC_TRY(r.i32());
    p.stdout_dropped = DSEC_TRY(r.u64());
    p.stderr_dropped = DSEC_TRY(r.u64());
    m.processes.push_back(std::move(p));
  }
  DSEC_TRY(r.finish());
  return m;
}

}  // namespace dsec::agent
