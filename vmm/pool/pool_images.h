// The images the pool serves, from its image store (image_store.h), with their limits, and
// admission: whether one more clone fits the image's `max` and the host's memory, and
// whether a tenant's quotas leave room for one more sandbox.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "vmm/pool/image_store.h"
#include "vmm/pool/pool_error.h"
#include "vmm/pool/pool_metrics.h"
#include "vmm/pool/pool_networks.h"
#include "vmm/pool/pool_options.h"
#include "vmm/pool/pool_requests.h"
#include "vmm/pool/sandbox_table.h"
#include "vmm/pool/state_records.h"
#include "vmm/pool/tenant.h"

namespace dsec::pool {

struct PoolImage {
  ImageSpec spec;
  uint64_t guest_bytes = 0;  // the snapshot's memory file's size
  // Its snapshot's network device, which each clone gets a network for; none: it has none.
  std::optional<ImageNetwork> network{};
};

class PoolImages {
 public:
  PoolImages(const ImageStore& store, const StateDir& state, const SandboxTable& sandboxes,
             const PoolOptions& options);

  // Registers the store's image `spec.name` (its files checked), or changes its limits.
  PoolResult<nlohmann::json> add(const ImageSpec& spec);
  // Saves the registered images' limits in images.json, for a daemon started again.
  void save() const;
  // Nothing is served from here on: the pool is shutting down.
  void clear() { images_.clear(); }

  const PoolImage* find(const std::string& name) const;
  const std::map<std::string, PoolImage>& all() const { return images_; }
  nlohmann::json images_json() const;
  std::vector<ImageGauges> gauges() const;

  // Whether one more clone of `image` fits its `max` and the host's memory (kFull if not).
  PoolResult<void> admit(const PoolImage& image) const;
  // The guest memory of every sandbox the pool holds (starting, ready, in use, stopping).
  uint64_t committed_guest_bytes() const;
  // Whether `caller`'s quotas leave room for one more sandbox of `image` (kQuota if not),
  // counting those it holds and those its acquires `waiting_for` (their images) will hold.
  PoolResult<void> check_quota(const Tenant& caller, const PoolImage& image,
                               const std::vector<std::string>& waiting_for) const;

 private:
  const ImageStore& store_;
  const StateDir& state_;
  const SandboxTable& sandboxes_;
  const PoolOptions& options_;
  std::map<std::string, PoolImage> images_;
};

}  // namespace dsec::pool
