// `dsec-vmm pool` (the dsec-vmm-pool program): the node-local sandbox pool daemon
// (docs/pool.md). One thread serves the API socket and supervises every VMM on the same
// event loop; the main thread waits for SIGTERM or SIGINT, then stops the API, every VMM,
// and removes what the daemon made.
#include "vmm/pool_daemon/pool_command.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vmm/cli/cli11.h"
#include "vmm/cli/seccomp_option.h"
#include "vmm/common/sibling_binary.h"
#include "vmm/e2b/e2b_front.h"
#include "vmm/http/server.h"
#include "vmm/io/loop_calls.h"
#include "vmm/jail/cgroup.h"
#include "vmm/network/clone_network_host.h"
#include "vmm/pool/host_proxy.h"
#include "vmm/pool/image_store.h"
#include "vmm/pool/launcher_networks.h"
#include "vmm/pool/launcher_process.h"
#include "vmm/pool/pool.h"
#include "vmm/pool/pool_api.h"
#include "vmm/pool/sandbox_dir.h"
#include "vmm/pool/sandbox_files.h"
#include "vmm/pool/tenant_access.h"
#include "vmm/seccomp/policy.h"
#include "vmm/tls/tls_transport.h"

namespace dsec::cli {
namespace {

struct PoolOptions {
  std::string state_dir;
  std::string image_dir;  // empty: STATE_DIR/images
  pool::ImageStoreLimits image_store;
  std::string socket;
  std::string vmm;
  std::optional<uint16_t> tcp_port;
  std::string tcp_address = "127.0.0.1";
  std::string tokens;
  std::string tls_cert;
  std::string tls_key;
  seccomp::Mode seccomp = seccomp::Mode::kOn;
  std::vector<uid_t> allow_uids;
  std::vector<gid_t> allow_gids;
  std::vector<std::string> allow_hosts;
  std::string e2b_listen;  // ADDRESS:PORT of the E2B front (vmm/e2b); empty: none
  double max_memory_ratio = 0.9;
  double memory_overcommit = 1.0;
  double ready_timeout_s = 60;
  double health_interval_s = 10;
  double health_timeout_s = 15;
  uint32_t health_failures = 2;
  uint32_t max_requests = 128;
  uint32_t max_requests_per_tenant = 16;
  // HttpLimits' deadlines for a client's connection.
  double client_idle_timeout_s = 120;
  double client_header_timeout_s = 10;
  std::vector<std::string> restore_args;
  bool no_jail = false;
  std::string jail_ids = "200000-265535";
  bool no_clone_networks = false;
  std::string clone_network_range = "10.200.0.0/16";
  std::string proxy_listen;  // ADDRESS:PORT; empty: no Host-routed proxy
  std::string proxy_domain;
  uint64_t memory_overhead_mib = 64;
  pool::CloneLimits limits;
};

// Jailing needs root and cgroup v2 with the controllers the clones' limits use: checked, and
// the clones' parent cgroup made, before the daemon serves, so that it never runs unjailed
// by surprise.
Status check_can_jail(const pool::CloneLimits& limits) {
  constexpr const char* kHint =
      "run the daemon as root on a host with cgroup v2 at /sys/fs/cgroup, or pass --no-jail "
      "(clones then run unjailed: for debugging only)";
  if (::geteuid() != 0) {
    return fail("jailing clones needs root", kHint);
  }
  jail::JailConfig config;
  config.cgroup_parent = limits.cgroup_parent;
  config.cgroup_settings = {{.file = "memory.max", .value = "max"},
                            {.file = "pids.max", .value = "max"}};
  if (!limits.cpu_max.empty()) {
    config.cgroup_settings.push_back({.file = "cpu.max", .value = limits.cpu_max});
  }
  if (auto made = jail::Cgroup::make_parent(config); !made) {
    return fail("cannot jail clones: " + made.error().message(), kHint);
  }
  return ok();
}

// Clients connected at once, and so execs running at once.
constexpr size_t kMaxClients = 256;
// And from one caller (one uid on the socket, one address on TCP): one tenant's idle or
// slow connections leave the others room.
constexpr size_t kMaxClientsPerCaller = 64;

// One daemon per state directory: a lock held for the daemon's life.
Result<UniqueFd> lock_state_dir(const std::string& dir) {
  const std::string path = dir + "/lock";
  UniqueFd fd(::open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) {
    return fail_errno("cannot open " + path, errno);
  }
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    return fail(path + ": another pool daemon uses this state directory",
                "stop it, or give another --state-dir");
  }
  return fd;
}

// Who may use the API, from the options: callers on the socket by uid and gid, on TCP by
// the tokens file's bearer tokens (TCP is refused without one).
// --e2b-listen's address and port: "127.0.0.1:3000", "[::1]:3000".
Result<std::pair<std::string, uint16_t>> e2b_address(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  unsigned long port = 0;
  if (colon != std::string::npos) {
    const std::string digits = listen.substr(colon + 1);
    if (!digits.empty() && digits.size() <= 5 &&
        std::ranges::all_of(digits, [](char c) { return c >= '0' && c <= '9'; })) {
      port = std::stoul(digits);
    }
  }
  std::string address = colon == std::string::npos ? "" : listen.substr(0, colon);
  if (address.size() > 2 && address.front() == '[' && address.back() == ']') {
    address = address.substr(1, address.size() - 2);
  }
  if (address.empty() || port > 65535 || colon + 1 == listen.size()) {
    return fail("--e2b-listen '" + listen + "' is not ADDRESS:PORT",
                "give a numeric address and a port, e.g. 127.0.0.1:3000 or [::1]:3000");
  }
  return std::pair{address, static_cast<uint16_t>(port)};
}

Result<pool::AccessPolicy> access_policy(const PoolOptions& options) {
  pool::AccessPolicy policy{.daemon_uid = ::geteuid(),
                            .allow_uids = options.allow_uids,
                            .allow_gids = options.allow_gids,
                            .tokens = {},
                            .hosts = pool::default_hosts(options.tcp_address, options.allow_hosts)};
  const bool tcp = options.tcp_port || !options.e2b_listen.empty();
  if (tcp && options.tokens.empty()) {
    return fail(
        "--tcp-port and --e2b-listen need --tokens FILE: a request over TCP carries a "
        "tenant's token",
        "write a tokens file (docs/pool-tenants.md)");
  }
  if (!tcp && !options.tokens.empty()) {
    return fail("--tokens is for requests over TCP",
                "give --tcp-port or --e2b-listen too, or leave --tokens out");
  }
  if (!options.e2b_listen.empty()) {
    const auto [address, port] = DSEC_TRY(e2b_address(options.e2b_listen));
    for (std::string& host : pool::default_hosts(address, {})) {
      policy.hosts.push_back(std::move(host));
    }
  }
  if (!options.tokens.empty()) {
    policy.tokens = DSEC_TRY(pool::read_tokens_file(options.tokens, policy.daemon_uid));
  }
  return policy;
}

// The Host-routed proxy of --proxy-listen (pool/host_proxy.h), listening now, before the
// daemon's filter; none without the option. Its connections ask the loop's thread where a
// sandbox is, through `calls`.
struct RunningProxy {
  std::unique_ptr<io::LoopCalls> calls;
  std::unique_ptr<pool::HostProxy> proxy;
  void reset() {
    proxy.reset();
    calls.reset();
  }
};

Result<RunningProxy> start_proxy(const PoolOptions& options, io::EventLoop& loop,
                                 const pool::Pool& served) {
  RunningProxy running;
  if (options.proxy_listen.empty()) {
    if (!options.proxy_domain.empty()) {
      return fail("--proxy-domain is for the proxy", "give --proxy-listen too, or leave it out");
    }
    return running;
  }
  const auto colon = options.proxy_listen.rfind(':');
  uint16_t port = 0;
  const std::string port_text =
      colon == std::string::npos ? std::string() : options.proxy_listen.substr(colon + 1);
  const auto [end, err] =
      std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (colon == std::string::npos || port_text.empty() || err != std::errc() ||
      end != port_text.data() + port_text.size()) {
    return fail("--proxy-listen '" + options.proxy_listen + "' is not ADDRESS:PORT",
                "give e.g. 0.0.0.0:8080");
  }
  if (options.no_clone_networks) {
    return fail("--proxy-listen reaches clones through their networks",
                "leave out --no-clone-networks");
  }
  running.calls = DSEC_TRY(io::LoopCalls::create(loop));
  auto resolve = [calls = running.calls.get(), &served](
                     const std::string& id) -> std::expected<std::string, pool::ProxyRefusal> {
    // By value: a call that timed out may still run later.
    auto found =
        calls->call([&served, id] { return served.proxy_address(id); }, std::chrono::seconds(5));
    if (!found) {
      return std::unexpected(pool::ProxyRefusal{503, "the pool did not answer in time; retry"});
    }
    if (!*found) {
      const auto& e = found->error();
      const int status = e.kind == pool::Failure::kNotFound || e.kind == pool::Failure::kGone ? 404
                         : e.kind == pool::Failure::kConflict                                 ? 409
                                                                                              : 502;
      return std::unexpected(pool::ProxyRefusal{status, e.message});
    }
    return **found;
  };
  running.proxy = DSEC_TRY(pool::HostProxy::listen(options.proxy_listen.substr(0, colon), port,
                                                   {.domain = options.proxy_domain}, resolve));
  spdlog::info("pool: proxying Host <port>-<sandbox id>.{} on {}:{}", options.proxy_domain,
               options.proxy_listen.substr(0, colon), running.proxy->port());
  return running;
}

// The TCP listener's TLS: its certificate and key, both or neither, and only for --tcp-port.
// Null without them: TCP in the clear, which the daemon warns of.
Result<std::shared_ptr<const tls::TlsServerContext>> tcp_tls(const PoolOptions& options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return fail("--tls-cert and --tls-key go together", "give both, or neither");
  }
  if (options.tls_cert.empty()) {
    return nullptr;
  }
  if (!options.tcp_port && options.e2b_listen.empty()) {
    return fail("--tls-cert and --tls-key are for the TCP listeners",
                "give --tcp-port too (the Unix socket is never TLS), or leave them out");
  }
  return DSEC_TRY(tls::TlsServerContext::load(options.tls_cert, options.tls_key));
}

// The socket's mode: owner-only, unless other users may call (--allow-uid, --allow-gid).
// Then anyone may connect, and SO_PEERCRED, read by the kernel at connect, is the check:
// a file mode cannot name a set of users, and a caller not allowed gets 403 and nothing done.
Status open_socket_to_allowed(const PoolOptions& options, const http::HttpServer& server) {
  if (options.allow_uids.empty() && options.allow_gids.empty()) {
    return ok();
  }
  auto mode = server.set_socket_mode(0666);
  if (!mode) {
    return std::unexpected(mode.error().with_context("--socket"));
  }
  return ok();
}

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

int run_pool(const PoolOptions& options) {
  // Before any thread: SIGTERM and SIGINT are read by sigwait below, never delivered.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const auto fail_with = [](const Error& e) {
    (void)std::fprintf(stderr, "dsec-vmm pool: %s\n", e.message().c_str());
    return 1;
  };
  // Before anything is made: a refused tokens file leaves no state directory behind.
  auto policy = access_policy(options);
  if (!policy) {
    return fail_with(policy.error());
  }
  const pool::TenantAccess access(std::move(*policy));
  auto tls = tcp_tls(options);
  if (!tls) {
    return fail_with(tls.error());
  }
  if (auto fits = pool::check_socket_paths_fit(options.state_dir); !fits) {
    return fail_with(fits.error());
  }
  std::optional<pool::JailIdRange> jail_ids;
  if (options.no_jail) {
    spdlog::warn(
        "pool: --no-jail: clones run UNJAILED, as the daemon's user in the host's namespaces, "
        "with no cgroup limits: for debugging only, never in front of tenants");
  } else {
    auto range = pool::parse_jail_id_range(options.jail_ids);
    if (!range) {
      return fail_with(range.error());
    }
    if (auto can = check_can_jail(options.limits); !can) {
      return fail_with(can.error());
    }
    jail_ids = *range;
  }
  std::optional<pool::PoolNetworkOptions> networks;
  if (!options.no_clone_networks) {
    auto range = pool::parse_clone_range(options.clone_network_range);
    if (!range) {
      return fail_with(range.error());
    }
    networks = pool::PoolNetworkOptions{.clone_range = *range};
  }
  auto state = pool::StateDir::open(options.state_dir);
  if (!state) {
    return fail_with(state.error());
  }
  auto store = pool::ImageStore::open(
      options.image_dir.empty() ? state->path() + "/images" : options.image_dir,
      options.image_store);
  if (!store) {
    return fail_with(store.error());
  }
  pool::CloneLimits limits = options.limits;
  limits.memory_overhead_bytes = options.memory_overhead_mib << 20;
  auto lock = lock_state_dir(state->path());
  if (!lock) {
    return fail_with(lock.error());
  }
  auto vmm = options.vmm.empty() ? sibling_binary("dsec-vmm") : Result<std::string>(options.vmm);
  if (!vmm) {
    return fail_with(vmm.error());
  }
  auto filters = seccomp::policy_for(options.seccomp);
  if (!filters) {
    return fail_with(filters.error());
  }
  // While the daemon has one thread and no filter: every VMM is started by this child, so
  // that none inherits the daemon's filter (launcher_process.h).
  // The clones' networks are made and held there too: the launcher's copy of `host` is
  // the one that serves (docs/network.md, "The pool's clones").
  // Forwards a killed daemon's launcher left lead to clones that are gone or not forwarded
  // any more: they go (an adopted clone's are made again from its record, where they were).
  if (networks) {
    if (auto cleared = network::HostPortForwards::clear(); !cleared) {
      return fail_with(cleared.error());
    }
  }
  auto host = std::make_shared<network::CloneNetworkHost>();
  auto launcher = pool::LauncherProcess::start(
      *vmm, [host](std::string_view request) { return host->serve(request); });
  if (!launcher) {
    return fail_with(launcher.error());
  }
  std::shared_ptr<pool::LauncherProcess> launcher_process = std::move(*launcher);
  // Bodies carry the files PUT into sandboxes.
  auto server = http::HttpServer::bind(
      options.socket,
      http::HttpLimits{.max_body_bytes = pool::kMaxPoolFileBytes,
                       .allow_query = true,  // the E2B front's; the pool's API refuses one
                       .idle_timeout = milliseconds(options.client_idle_timeout_s),
                       .header_timeout = milliseconds(options.client_header_timeout_s)});
  if (!server) {
    return fail_with(server.error().with_context("--socket"));
  }
  if (auto opened = open_socket_to_allowed(options, **server); !opened) {
    return fail_with(opened.error());
  }
  if (options.tcp_port) {
    auto port = (*server)->listen_on_tcp(options.tcp_address, *options.tcp_port, *tls);
    if (!port) {
      return fail_with(port.error());
    }
    // On stderr, so that a caller that asked for port 0 learns which one it got.
    spdlog::info("pool: serving on {}:{} too{}", options.tcp_address, *port,
                 *tls ? ", over TLS" : "");
    if (!*tls) {
      spdlog::warn(
          "pool: TCP without --tls-cert and --tls-key: tenants' bearer tokens and every request "
          "travel in clear; keep {} on loopback or a network you trust",
          options.tcp_address);
    }
  }
  if (!options.e2b_listen.empty()) {
    const auto [address, port] = *e2b_address(options.e2b_listen);
    auto bound = (*server)->listen_on_tcp(address, port, *tls, std::string(e2b::kE2bListener));
    if (!bound) {
      return fail_with(bound.error().with_context("--e2b-listen"));
    }
    // On stderr, so that a caller that asked for port 0 learns which one it got.
    spdlog::info("pool: serving E2B's API on {}:{}{}", address, *bound, *tls ? ", over TLS" : "");
  }
  const std::string lock_path = state->path() + "/lock";
  pool::Pool pool(
      (*server)->loop(), std::move(*state), std::move(*store),
      std::make_unique<pool::RestoreLauncher>(*vmm, limits, options.restore_args, launcher_process),
      pool::PoolOptions{.max_memory_ratio = options.max_memory_ratio,
                        .memory_overcommit = options.memory_overcommit,
                        .ready_timeout = milliseconds(options.ready_timeout_s),
                        .health_interval = milliseconds(options.health_interval_s),
                        .health_timeout = milliseconds(options.health_timeout_s),
                        .health_failures = options.health_failures,
                        .jail_ids = jail_ids,
                        .max_requests_per_tenant = options.max_requests_per_tenant,
                        .max_requests = options.max_requests,
                        .networks = networks},
      std::make_shared<pool::LauncherNetworks>(launcher_process));
  // Before serve(): the loop does not run yet, so its watches and timers may be set here.
  pool.recover();
  const auto router = std::make_shared<http::Router>(pool::pool_router(pool, access));
  auto proxy = start_proxy(options, (*server)->loop(), pool);
  if (!proxy) {
    return fail_with(proxy.error());
  }
  e2b::E2bSandboxes e2b_sandboxes;
  const auto e2b_router =
      std::make_shared<http::Router>(e2b::e2b_router(pool, access, e2b_sandboxes));
  // Each client holds at most one request; an exec runs on a thread of its own meanwhile.
  (*server)->set_max_connections(kMaxClients);
  (*server)->set_max_connections_per_caller(kMaxClientsPerCaller);
  // Everything is open and the launcher runs: the daemon's filter, before its first thread
  // (the API's) and its first request; every thread started later inherits it.
  if (auto filtered = filters->apply_to_process(seccomp::Role::kPoolDaemon); !filtered) {
    return fail_with(filtered.error());
  }
  if (auto serving = (*server)->serve_deferred(
          [router, e2b_router](const http::HttpRequest& request, http::Responder respond) {
            if (request.caller.listener == e2b::kE2bListener) {
              e2b_router->route(request, std::move(respond));
            } else if (!request.query.empty()) {
              respond(http::HttpResponse::fault(
                  "query strings are not supported: the path is the whole URL"));
            } else {
              router->route(request, std::move(respond));
            }
          });
      !serving) {
    return fail_with(serving.error());
  }
  spdlog::info("pool: serving on {}", options.socket);
  int signo = 0;
  sigwait(&signals, &signo);
  spdlog::info("pool: {}: stopping", strsignal(signo));
  // The proxy's connections first (they ask the loop where sandboxes are), then the API
  // thread: nothing touches the pool after this but this thread.
  proxy->reset();
  (*server)->stop();
  pool.shutdown();
  ::unlink(lock_path.c_str());
  return 0;
}

}  // namespace

void configure_pool_command(CLI::App* pool, std::function<int()>& action) {
  auto options = std::make_shared<PoolOptions>();
  pool->description(kPoolSummary);
  pool->footer(
      "Each sandbox is one `dsec-vmm restore` process in a process group of its own, "
      "supervised through its pidfd on the daemon's one event loop. The daemon keeps its "
      "images and a record per sandbox in --state-dir, and a daemon started again after a "
      "crash adopts the VMMs that still run. Images live in its image store (--image-dir): "
      "image NAME is IMAGE_DIR/NAME/{state,memory}, named, never given as a path, and its "
      "files are opened through the store's descriptor, never following a link, and checked "
      "(the daemon's, writable by nobody else); a sandbox's snapshot becomes a new image there. "
      "SIGTERM or SIGINT stops every VMM and removes "
      "the socket and every file the daemon made (the image store is kept). "
      "No request holds the others: an exec runs on a thread of its own, and an acquire "
      "from an empty pool waits on the event loop for a clone restored for it (up to 256 "
      "clients at once, 64 from one caller; idle and slow ones are closed at their "
      "deadlines). Callers are known: on the socket by their uid (SO_PEERCRED; the "
      "daemon's own user is the operator, others need --allow-uid or --allow-gid), on TCP by "
      "a bearer token from --tokens (over TLS with --tls-cert and --tls-key, else in clear); a "
      "sandbox answers only the tenant that acquired it. "
      "Every clone is jailed (docs/jail.md): a uid and gid of its own from "
      "--jail-ids, its own directory sandboxes/ID/ (its sockets and console) as its root, its "
      "own pid, mount, IPC, UTS and network namespaces, and a cgroup of its own under "
      "--cgroup-parent with memory.max (the guest's RAM plus --clone-memory-overhead), pids.max "
      "and --clone-cpu-max; one its cgroup's OOM killer killed is reported lost. Jailing needs "
      "root and cgroup v2: the daemon refuses to start without them unless given --no-jail. "
      "Clones are restored with --no-host-paths-from-snapshot. "
      "The daemon runs under a seccomp filter of its own (role pool: no program started, no "
      "executable memory, no network socket opened), so its VMMs are started by a launcher "
      "process it forks first; each VMM has its own filters (--restore-arg=--seccomp=...).");
  pool->add_option("--state-dir", options->state_dir,
                   "The daemon's directory: images.json, and under sandboxes/ each sandbox's "
                   "record, VMM log and directory (its sockets and console) (made if missing; one "
                   "daemon per directory; short: its sockets' paths must fit 107 bytes)")
      ->required();
  pool->add_option("--image-dir", options->image_dir,
                   "The image store: image NAME is DIR/NAME/{state,memory} (dsec-vmm warm --out "
                   "DIR/NAME); snapshots of sandboxes go there too. Default: STATE_DIR/images. "
                   "Made 0700 if missing; refused if a symbolic link, not owned by the daemon's "
                   "user, or writable by group or others");
  pool->add_option("--image-store-max-bytes", options->image_store.max_bytes,
                   "A snapshot that would take the image store's files past this size (bytes, "
                   "or 512MiB, 64GiB, ...; holes counted) is refused (429)")
      ->transform(CLI::AsSizeValue(true))
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50))
      ->default_str("64GiB");
  pool->add_option("--image-store-max-images", options->image_store.max_images,
                   "A snapshot that would take the image store past this many images is "
                   "refused (429)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  pool->add_option("--socket", options->socket,
                   "The API's Unix socket: owner-only, or mode 0666 with --allow-uid or "
                   "--allow-gid (the caller's uid, read with SO_PEERCRED, is then the check)")
      ->required();
  pool->add_option("--allow-uid", options->allow_uids,
                   "A user that may call on the socket, as tenant uid:UID (repeat it; the "
                   "daemon's own user and root always may, as the operator)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  pool->add_option("--allow-gid", options->allow_gids,
                   "A group whose members (by the primary gid they connect with) may call on "
                   "the socket, each as tenant uid:UID (repeat it)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  pool->add_option("--tcp-port", options->tcp_port,
                   "Also serve the API on --tcp-address:PORT (0: a free port, logged at start); "
                   "needs --tokens: every request there carries a tenant's bearer token. In "
                   "clear (logged as a warning) unless given --tls-cert and --tls-key");
  pool->add_option("--tcp-address", options->tcp_address,
                   "The numeric IPv4 or IPv6 address --tcp-port listens on (0.0.0.0: every "
                   "interface, so that workers on other hosts reach the node)")
      ->capture_default_str();
  pool->add_option("--tokens", options->tokens,
                   "The tenants that may call over TCP, one a line: NAME TOKEN [operator] "
                   "[max_sandboxes=N] [max_memory=SIZE]; read at start, refused unless owned by "
                   "root or the daemon's user and not writable by group or others nor readable "
                   "by others");
  pool->add_option("--tls-cert", options->tls_cert,
                   "Speak TLS (1.2 or newer) on --tcp-port with this certificate: a PEM file, "
                   "the server's certificate first, then its chain. Needs --tls-key; the Unix "
                   "socket stays plain");
  pool->add_option("--tls-key", options->tls_key,
                   "The PEM private key of --tls-cert, unencrypted; refused when others may read "
                   "or write it (0600, or 0640 with a group of the daemon's)");
  pool->add_option("--allow-host", options->allow_hosts,
                   "A name a TCP request's Host header may give besides the listening address "
                   "and localhost forms (repeat it); others get 403 (DNS rebinding)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  pool->add_option("--e2b-listen", options->e2b_listen,
                   "Also serve E2B's API (both its control plane and envd's) on ADDRESS:PORT, "
                   "for E2B's SDKs (docs/e2b.md); needs --tokens: a tenant's token is its "
                   "E2B_API_KEY. TLS with --tls-cert and --tls-key, as --tcp-port");
  pool->add_option(
      "--vmm", options->vmm,
      "The dsec-vmm binary that restores clones (default: the one beside this daemon)");
  pool->add_option("--max-memory-ratio", options->max_memory_ratio,
                   "Refuse (429) a clone that would take the host's used memory past this share "
                   "of its memory")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  pool->add_option("--memory-overcommit", options->memory_overcommit,
                   "Refuse (429) a clone when the guest memory of every clone the pool holds, "
                   "its own included, would pass --max-memory-ratio times this times the "
                   "host's memory (1: no more guest memory than the host has; more counts on "
                   "clones not writing all of theirs)")
      ->check(CLI::Range(0.1, 100.0))
      ->capture_default_str();
  pool->add_option("--ready-timeout", options->ready_timeout_s,
                   "Seconds a clone has from its launch until its agent serves")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  pool->add_option("--health-interval", options->health_interval_s,
                   "Seconds between two checks that each ready and acquired sandbox still serves "
                   "(its VMM answers a CONNECT to the agent's port once the guest accepted it); "
                   "0: no checks")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  pool->add_option("--health-timeout", options->health_timeout_s,
                   "Seconds a sandbox has to answer a health check")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  pool->add_option("--health-failures", options->health_failures,
                   "Health checks in a row a sandbox may fail before it is reported lost (hung), "
                   "its VMM killed and replaced")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  pool->add_option("--max-requests", options->max_requests,
                   "Requests that each run on a thread of their own (exec, file copies, pause, "
                   "resume, snapshot) at once, all callers together; one more is answered 429")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  pool->add_option("--max-requests-per-tenant", options->max_requests_per_tenant,
                   "The same for one tenant (a uid on the socket, a token on TCP); one more is "
                   "answered 429")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  pool->add_option("--client-idle-timeout", options->client_idle_timeout_s,
                   "Seconds a client's connection may go without sending a request (from its "
                   "connect, or from its last answer) before the daemon closes it")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  pool->add_option("--client-header-timeout", options->client_header_timeout_s,
                   "Seconds a request's URL and headers may take from its first byte (a TLS "
                   "handshake counts as the first request's) before the daemon closes the "
                   "connection")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  pool->add_option("--restore-arg", options->restore_args,
                   "An argument added to every clone's `dsec-vmm restore` (repeat it: "
                   "--restore-arg=--seccomp=log)")
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  constexpr const char* kJail = "Jail (docs/jail.md#the-pools-clones)";
  pool->add_flag("--no-jail", options->no_jail,
                 "Run clones unjailed: as the daemon's user, in its namespaces, without cgroup "
                 "limits. For debugging only: logged as a warning at start, and "
                 "dsec_pool_jail_enabled is 0 in /metrics")
      ->group(kJail);
  pool->add_option("--jail-ids", options->jail_ids,
                   "FIRST-LAST: the uids (and gids) of jailed clones, one per live clone, never "
                   "two at once. Give each daemon of a host its own range, owned by no user")
      ->group(kJail)
      ->capture_default_str();
  constexpr const char* kNetwork = "Clone networks (docs/network.md#the-pools-clones)";
  pool->add_option("--clone-network-range", options->clone_network_range,
                   "A.B.C.D/N: the /30s of the veth pairs of clones with a network, one per live "
                   "clone; no host interface, route or other daemon may use it")
      ->group(kNetwork)
      ->capture_default_str();
  pool->add_flag("--no-clone-networks", options->no_clone_networks,
                 "Make no network namespaces: an image whose snapshot has a network device is "
                 "refused")
      ->group(kNetwork);
  pool->add_option("--proxy-listen", options->proxy_listen,
                   "ADDRESS:PORT (numeric IPv4; port 0: a free one, logged at start): a proxy "
                   "that sends each connection whose Host is <port>-<sandbox id>.DOMAIN to "
                   "that port of the sandbox's guest, streams and WebSockets included. Needs "
                   "--proxy-domain; no token is asked: anyone who reaches it reaches every "
                   "acquired sandbox's ports")
      ->group(kNetwork);
  pool->add_option("--proxy-domain", options->proxy_domain,
                   "The domain under which --proxy-listen's Host names are (sandbox.example.com)")
      ->group(kNetwork);
  pool->add_option("--cgroup-parent", options->limits.cgroup_parent,
                   "The cgroup below /sys/fs/cgroup that holds each clone's cgroup (named by "
                   "its sandbox id); made if missing")
      ->group(kJail)
      ->capture_default_str();
  pool->add_option("--clone-memory-overhead", options->memory_overhead_mib,
                   "MiB added to the image's guest RAM for a clone's memory.max: the VMM's own "
                   "memory. A clone past it is killed by its cgroup's OOM killer and reported "
                   "lost")
      ->group(kJail)
      ->check(CLI::Range(16, 65536))
      ->capture_default_str();
  pool->add_option("--clone-cpu-max", options->limits.cpu_max,
                   "A clone's cpu.max, 'QUOTA PERIOD' in microseconds (e.g. '200000 100000': two "
                   "CPUs' worth); default: no limit")
      ->group(kJail);
  pool->add_option("--clone-console-limit", options->limits.console_limit_bytes,
                   "How much of a clone's serial console output its sandboxes/ID/console file "
                   "keeps (bytes, or 64KiB, 1MiB, ...); the rest is dropped. Jailed or not")
      ->transform(CLI::AsSizeValue(true))
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30))
      ->default_str("1MiB");
  pool->add_option("--clone-log-limit", options->limits.log_limit_bytes,
                   "How much of its own log a clone's VMM writes to sandboxes/ID.log (bytes, or "
                   "64KiB, 1MiB, ...); past it one line says so and the rest is dropped")
      ->transform(CLI::AsSizeValue(true))
      ->check(CLI::Range(uint64_t{4096}, uint64_t{1} << 30))
      ->default_str("1MiB");
  add_seccomp_option(*pool, options->seccomp, "every thread of the daemon (role pool)");
  pool->callback([&action, options] { action = [options] { return run_pool(*options); }; });
}

}  // namespace dsec::cli
