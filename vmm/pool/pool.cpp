#include "vmm/pool/pool.h"

#include <fmt/format.h>

namespace dsec::pool {

namespace {

// Clone networks need both where they go and who makes them.
PoolOptions with_networks(PoolOptions options, const network::CloneNetworks* networks) {
  if (networks == nullptr) {
    options.networks.reset();
  }
  return options;
}

std::unique_ptr<PoolNetworks> pool_networks(const PoolOptions& options,
                                            std::shared_ptr<network::CloneNetworks> networks) {
  if (!options.networks || !networks) {
    return nullptr;
  }
  return std::make_unique<PoolNetworks>(std::move(networks), *options.networks);
}

}  // namespace

Pool::Pool(io::EventLoop& loop, StateDir state, ImageStore store,
           std::unique_ptr<VmmLauncher> launcher, PoolOptions options,
           std::shared_ptr<network::CloneNetworks> networks)
    : state_(std::move(state)),
      store_(std::move(store)),
      options_(with_networks(std::move(options), networks.get())),
      images_(store_, state_, sandboxes_, options_),
      resources_(loop, state_, std::move(launcher), options_.jail_ids,
                 pool_networks(options_, std::move(networks))),
      // The lifecycle's events go to the acquires, made after it: none comes before the
      // loop runs.
      lifecycle_(loop, state_, store_, options_, sandboxes_, images_, resources_, counters_,
                 LifecycleEvents{
                     .serving = [this](Sandbox& sandbox) { acquires_.serve(sandbox); },
                     .start_failed =
                         [this](const std::string& image) { acquires_.on_start_failed(image); },
                 }),
      leases_(lifecycle_, resources_, counters_),
      acquires_(sandboxes_, images_, lifecycle_, leases_, counters_),
      health_(loop, options_, sandboxes_, lifecycle_, counters_),
      requests_(SandboxRequestsDeps{.loop = loop,
                                    .options = options_,
                                    .state = state_,
                                    .store = store_,
                                    .sandboxes = sandboxes_,
                                    .images = images_,
                                    .lifecycle = lifecycle_,
                                    .resources = resources_,
                                    .leases = leases_}) {}

Pool::~Pool() {
  shutdown();
}

PoolResult<nlohmann::json> Pool::register_image(const ImageSpec& spec) {
  auto added = DSEC_TRY(images_.add(spec));
  images_.save();
  lifecycle_.refill();
  return added;
}

nlohmann::json Pool::images_json() const {
  return images_.images_json();
}

void Pool::acquire(const Tenant& caller, const AcquireRequest& request, Answer answer) {
  acquires_.acquire(caller, request, std::move(answer));
}

PoolResult<void> Pool::release(const Tenant& caller, const std::string& id) {
  Sandbox* s = DSEC_TRY(sandboxes_.in_use(caller, id));
  ++counters_.released;
  lifecycle_.stop(*s, "it was released");
  return {};
}

void Pool::exec(const Tenant& caller, const std::string& id, ExecCall call, Answer answer) {
  requests_.exec(caller, id, std::move(call), std::move(answer));
}

void Pool::write_file(const Tenant& caller, const std::string& id, const std::string& guest_path,
                      GuestFile file, std::move_only_function<void(PoolResult<void>)> answer) {
  requests_.write_file(caller, id, guest_path, std::move(file), std::move(answer));
}

void Pool::read_file(const Tenant& caller, const std::string& id, const std::string& guest_path,
                     std::move_only_function<void(PoolResult<GuestFile>)> answer) {
  requests_.read_file(caller, id, guest_path, std::move(answer));
}

void Pool::pause(const Tenant& caller, const std::string& id, Answer answer) {
  requests_.set_paused(caller, id, true, std::move(answer));
}

void Pool::resume(const Tenant& caller, const std::string& id, Answer answer) {
  requests_.set_paused(caller, id, false, std::move(answer));
}

void Pool::snapshot(const Tenant& caller, const std::string& id, const std::string& name,
                    Answer answer) {
  requests_.snapshot(caller, id, name, std::move(answer));
}

PoolResult<nlohmann::json> Pool::set_network(const Tenant& caller, const std::string& id,
                                             const network::EgressPolicy& egress) {
  Sandbox* s = DSEC_TRY(sandboxes_.in_use(caller, id));
  const PoolImage* image = images_.find(s->record.image);
  if (image == nullptr || !s->record.network_slot) {
    return std::unexpected(error(Failure::kInvalid, "sandbox " + id +
                                                        " has no network: its image's snapshot "
                                                        "has no network device"));
  }
  auto combined = caller_egress(image->spec.egress, egress);
  if (!combined) {
    return std::unexpected(error(Failure::kInvalid, combined.error().message()));
  }
  DSEC_TRY(resources_.set_egress(*s, *combined));
  s->last_request = Sandbox::Clock::now();
  return SandboxTable::view(*s);
}

PoolResult<nlohmann::json> Pool::forward_port(const Tenant& caller, const std::string& id,
                                              uint16_t guest_port) {
  Sandbox* s = DSEC_TRY(sandboxes_.in_use(caller, id));
  const uint16_t host_port = DSEC_TRY(resources_.forward_port(*s, guest_port));
  s->last_request = Sandbox::Clock::now();
  return nlohmann::json{{"host_port", host_port}, {"guest_port", guest_port}};
}

PoolResult<std::string> Pool::proxy_address(const std::string& id) const {
  const Sandbox* s = sandboxes_.find(id);
  if (s == nullptr || s->record.state != SandboxState::kInUse) {
    return std::unexpected(error(Failure::kNotFound, "no sandbox " + id + " is in use"));
  }
  const std::string address = resources_.network_address(s->record);
  if (address.empty()) {
    return std::unexpected(error(Failure::kInvalid, "sandbox " + id +
                                                        " has no network: its image's snapshot "
                                                        "has no network device"));
  }
  if (s->record.paused) {
    return std::unexpected(
        error(Failure::kConflict, "sandbox " + id + " is paused: resume it first"));
  }
  return address;
}

PoolResult<void> Pool::set_time_to_live(const Tenant& caller, const std::string& id,
                                        uint64_t ttl_s) {
  Sandbox* s = DSEC_TRY(sandboxes_.in_use(caller, id));
  leases_.set_time_to_live(*s, ttl_s);
  return {};
}

void Pool::agent_request(const Tenant& caller, const std::string& id,
                         SandboxRequests::AgentWork work,
                         std::move_only_function<void(PoolResult<void>)> done) {
  requests_.agent(caller, id, std::move(work), std::move(done));
}

PoolResult<void> Pool::keepalive(const Tenant& caller, const std::string& id) {
  Sandbox* s = DSEC_TRY(sandboxes_.in_use(caller, id));
  s->last_request = Sandbox::Clock::now();
  return {};
}

PoolResult<nlohmann::json> Pool::sandbox_json(const Tenant& caller, const std::string& id) {
  Sandbox* s = sandboxes_.find(id);
  if (s == nullptr || !SandboxTable::sees(caller, s->record.owner)) {
    return std::unexpected(sandboxes_.gone(caller, id));
  }
  s->last_request = Sandbox::Clock::now();
  return SandboxTable::view(*s);
}

nlohmann::json Pool::sandboxes_json(const Tenant& caller) const {
  return sandboxes_.list_json(caller);
}

std::string Pool::metrics() {
  std::vector<SandboxNetworkCounters> networks;
  for (const auto& [id, s] : sandboxes_.all()) {
    if (auto counters = resources_.network_counters(*s)) {
      networks.push_back({.sandbox = id, .image = s->record.image, .counters = *counters});
    }
  }
  return metrics_text(counters_, lifecycle_.restore_latency(), images_.gauges(),
                      options_.jail_ids.has_value()) +
         network_metrics_text(networks) +
         fmt::format(
             "# HELP dsec_pool_guest_memory_committed_bytes Guest memory of every sandbox the "
             "pool holds, what admission counts against --memory-overcommit.\n"
             "# TYPE dsec_pool_guest_memory_committed_bytes gauge\n"
             "dsec_pool_guest_memory_committed_bytes {}\n",
             images_.committed_guest_bytes());
}

uint32_t Pool::count(const std::string& image, SandboxState state) const {
  return sandboxes_.count(image, state);
}

void Pool::shutdown() {
  health_.stop();
  images_.clear();    // nothing refills from here on
  acquires_.clear();  // the API stopped: nobody to answer
  lifecycle_.stop_all();
  // Their VMMs are gone: the requests' connections broke, and their threads end.
  requests_.clear();
  lifecycle_.remove_all();
  state_.remove_own_files();
}

}  // namespace dsec::pool
