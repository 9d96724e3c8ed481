// What a client does with a running VMM through its API socket, in the order the API asks
// for (docs/api.md): pause, resume, and a snapshot of a paused VM. `dsec-vmm snapshot` and
// the embedding library (sdk/) share it.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "vmm/common/error.h"
#include "vmm/http/client.h"

namespace dsec::api {

// A client of the VMM's API socket at `socket_path`, whose errors name a VMM and its
// --api-sock.
http::HttpClient vmm_api_client(const std::string& socket_path, std::chrono::milliseconds timeout);

Status pause_vm(const http::HttpClient& client);
Status resume_vm(const http::HttpClient& client);

// Pauses the VM if it runs, writes `out_dir`/state and `out_dir`/memory (the layout
// `dsec-vmm warm` writes; the directory is created if missing), then leaves the VM paused,
// or resumes it with `resume`; a failed snapshot resumes a VM it paused. Returns the
// directory's absolute path (the VMM writes the files, whatever its working directory).
Result<std::filesystem::path> create_snapshot(const http::HttpClient& client,
                                              const std::string& out_dir, bool resume);
// The same for a VMM whose paths are not this process's (a jailed VMM's are rooted at its
// jail): `vmm_dir` is the directory as the VMM sees it, and must exist there.
Status create_snapshot_at(const http::HttpClient& client, const std::string& vmm_dir, bool resume);

}  // namespace dsec::api
