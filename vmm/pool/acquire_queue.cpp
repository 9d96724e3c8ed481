#include "vmm/pool/acquire_queue.h"

namespace dsec::pool {

AcquireQueue::AcquireQueue(SandboxTable& sandboxes, const PoolImages& images,
                           SandboxLifecycle& lifecycle, Leases& leases, PoolCounters& counters)
    : sandboxes_(sandboxes),
      images_(images),
      lifecycle_(lifecycle),
      leases_(leases),
      counters_(counters) {}

namespace {

// The acquire with its egress (if it asks for one) combined with its image's.
PoolResult<AcquireRequest> with_image_egress(AcquireRequest request, const PoolImage& image) {
  if (!request.egress) {
    return request;
  }
  if (!image.network) {
    return std::unexpected(error(Failure::kInvalid, "image " + image.spec.name +
                                                        " has no network device: leave "
                                                        "'egress' out"));
  }
  auto combined = caller_egress(image.spec.egress, *request.egress);
  if (!combined) {
    return std::unexpected(error(Failure::kInvalid, combined.error().message()));
  }
  request.egress = *combined;
  return request;
}

}  // namespace

void AcquireQueue::acquire(const Tenant& caller, const AcquireRequest& asked, PoolAnswer answer) {
  const PoolImage* image = images_.find(asked.image);
  if (image == nullptr) {
    answer(std::unexpected(
        error(Failure::kNotFound, "no image '" + asked.image +
                                      "' is registered: GET /images lists those that are "
                                      "(the operator registers one with PUT /images/NAME)")));
    return;
  }
  auto combined = with_image_egress(asked, *image);
  if (!combined) {
    answer(std::unexpected(combined.error()));
    return;
  }
  const AcquireRequest& request = *combined;
  if (auto room = images_.check_quota(caller, *image, waiting_for(caller.name)); !room) {
    ++counters_.refused;
    answer(std::unexpected(room.error()));
    return;
  }
  auto& waiting = waiters_[request.image];
  if (waiting.empty()) {
    for (const auto& [id, s] : sandboxes_.all()) {
      if (s->record.image == request.image && s->record.state == SandboxState::kReady) {
        hand_over(*s, caller, request, image->spec, std::move(answer));
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
  hand_over(sandbox, waiter.caller, waiter.request, image->spec, std::move(waiter.answer));
}

void AcquireQueue::hand_over(Sandbox& sandbox, const Tenant& caller, const AcquireRequest& request,
                             const ImageSpec& spec, PoolAnswer answer) {
  if (auto granted = leases_.grant(sandbox, caller, request, spec); !granted) {
    // A clone whose network would not take the caller's policy is not handed out, nor
    // kept: the pool refills.
    lifecycle_.stop(sandbox, "its network's egress could not be set");
    answer(std::unexpected(granted.error()));
    return;
  }
  answer(SandboxTable::view(sandbox));
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
