#include "vmm/pool/acquire_queue.h"

namespace dsec::pool {

AcquireQueue::AcquireQueue(SandboxTable& sandboxes, const PoolImages& images,
                           SandboxLifecycle& lifecycle, Leases& leases, PoolCounters& counters)
    : sandboxes_(sandboxes),
      images_(images),
      lifecycle_(lifecycle),
      leases_(leases),
      counters_(counters) {}

void AcquireQueue::acquire(const Tenant& caller, const AcquireRequest& request, PoolAnswer answer) {
  const PoolImage* image = images_.find(request.image);
  if (image == nullptr) {
    answer(std::unexpected(
        error(Failure::kNotFound, "no image '" + request.image +
                                      "' is registered: GET /images lists those that are "
                                      "(the operator registers one with PUT /images/NAME)")));
    return;
  }
  if (auto room = images_.check_quota(caller, *image, waiting_for(caller.name)); !room) {
    ++counters_.refused;
    answer(std::unexpected(room.error()));
    return;
  }
  auto& waiting = waiters_[request.image];
  if (waiting.empty()) {
    for (const auto& [id, s] : sandboxes_.all()) {
      if (s->record.image == request.image && s->record.state == SandboxState::kReady) {
        leases_.grant(*s, caller, request, image->spec);
        answer(SandboxTable::view(*s));
        lifecycle_.refill_soon();
        return;
      }
    }
  }
  waiting.push_back(Waiter{
      .caller = caller, .request = request, .answer = std::move(answer), .failed_starts = 0});
  start_for_waiters(request.image);
}

void AcquireQueue::start_for_waiters(const std::string& image_name) {
  auto& waiting = waiters_[image_name];
  const PoolImage* image = images_.find(image_name);
  while (!waiting.empty() &&
         sandboxes_.count(image_name, SandboxState::kStarting) < waiting.size()) {
    auto launched =
        image == nullptr
            ? PoolResult<Sandbox*>(std::unexpected(
                  error(Failure::kNotFound, "image " + image_name + " is no longer registered")))
            : lifecycle_.launch(*image);
    if (launched) {
      continue;
    }
    // The newest waiter hears why; those before it have their clones starting.
    if (launched.error().kind == Failure::kFull) {
      ++counters_.refused;
    }
    auto refused = std::move(waiting.back());
    waiting.pop_back();
    refused.answer(std::unexpected(launched.error()));
  }
}

void AcquireQueue::serve(Sandbox& sandbox) {
  auto& waiting = waiters_[sandbox.record.image];
  const PoolImage* image = images_.find(sandbox.record.image);
  if (waiting.empty() || image == nullptr) {
    return;
  }
  auto waiter = std::move(waiting.front());
  waiting.pop_front();
  leases_.grant(sandbox, waiter.caller, waiter.request, image->spec);
  waiter.answer(SandboxTable::view(sandbox));
}

void AcquireQueue::on_start_failed(const std::string& image) {
  auto& waiting = waiters_[image];
  if (waiting.empty()) {
    return;
  }
  if (++waiting.front().failed_starts >= 3) {
    auto failed = std::move(waiting.front());
    waiting.pop_front();
    failed.answer(std::unexpected(
        error(Failure::kUnavailable, "no clone of " + image +
                                         " came up (3 failed to start): GET /metrics "
                                         "counts refill errors, the daemon's log says "
                                         "why")));
  }
  start_for_waiters(image);
}

std::vector<std::string> AcquireQueue::waiting_for(const std::string& tenant) const {
  std::vector<std::string> images;
  for (const auto& [image, waiting] : waiters_) {
    for (const auto& waiter : waiting) {
      if (waiter.caller.name == tenant) {
        images.push_back(image);
      }
    }
  }
  return images;
}

}  // namespace dsec::pool
