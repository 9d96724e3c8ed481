#include "vmm/devices/virtio/transport_state_codec.h"

#include "vmm/snapshot/byte_codec.h"

namespace dsec::virtio {
namespace {

// More queues than any device of ours has; a count beyond it is a corrupt file.
constexpr uint64_t kMaxQueues = 64;

void put_bool(snapshot::ByteWriter& out, bool value) {
  out.put<uint8_t>(value ? 1 : 0);
}

Result<bool> get_bool(snapshot::ByteReader& in, const char* field) {
  const auto value = DSEC_TRY(in.get<uint8_t>(field));
  if (value > 1) {
    return fail(
        std::string("snapshot state: ") + field + " is " + std::to_string(value) + ", not 0 or 1",
        "the state file is corrupt");
  }
  return value == 1;
}

void put_queue(snapshot::ByteWriter& out, const QueueState& q) {
  out.put(q.size);
  put_bool(out, q.ready);
  out.put(q.desc_table);
  out.put(q.avail_ring);
  out.put(q.used_ring);
  out.put(q.next_avail);
  out.put(q.next_used);
  put_bool(out, q.event_idx);
  put_bool(out, q.indirect_desc);
  put_bool(out, q.broken);
  // signalled_used is not saved: after a restore the next check notifies (queue.h).
}

Result<QueueState> get_queue(snapshot::ByteReader& in) {
  QueueState q;
  q.size = DSEC_TRY(in.get<uint16_t>("queue size"));
  q.ready = DSEC_TRY(get_bool(in, "queue ready"));
  q.desc_table = DSEC_TRY(in.get<uint64_t>("queue descriptor table"));
  q.avail_ring = DSEC_TRY(in.get<uint64_t>("queue avail ring"));
  q.used_ring = DSEC_TRY(in.get<uint64_t>("queue used ring"));
  q.next_avail = DSEC_TRY(in.get<uint16_t>("queue next avail"));
  q.next_used = DSEC_TRY(in.get<uint16_t>("queue next used"));
  q.event_idx = DSEC_TRY(get_bool(in, "queue event idx"));
  q.indirect_desc = DSEC_TRY(get_bool(in, "queue indirect descriptors"));
  q.broken = DSEC_TRY(get_bool(in, "queue broken"));
  return q;
}

}  // namespace

std::vector<uint8_t> encode_transport_state(const TransportState& state) {
  snapshot::ByteWriter out;
  out.put(state.status);
  out.put(state.device_features_sel);
  out.put(state.driver_features_sel);
  out.put(state.driver_features);
  out.put(state.queue_sel);
  out.put(state.interrupt_status);
  out.put(state.config_generation);
  out.put<uint64_t>(state.queues.size());
  for (const auto& q : state.queues) {
    put_queue(out, q);
  }
  return out.take();
}

Result<TransportState> decode_transport_state(std::span<const uint8_t> bytes) {
  snapshot::ByteReader in(bytes);
  TransportState state;
  state.status = DSEC_TRY(in.get<uint32_t>("transport status"));
  state.device_features_sel = DSEC_TRY(in.get<uint32_t>("transport device features select"));
  state.driver_features_sel = DSEC_TRY(in.get<uint32_t>("transport driver features select"));
  state.driver_features = DSEC_TRY(in.get<uint64_t>("transport driver features"));
  state.queue_sel = DSEC_TRY(in.get<uint32_t>("transport queue select"));
  state.interrupt_status = DSEC_TRY(in.get<uint32_t>("transport interrupt status"));
  state.config_generation = DSEC_TRY(in.get<uint32_t>("transport config generation"));
  const auto count = DSEC_TRY(in.get<uint64_t>("transport queue count"));
  if (count > kMaxQueues) {
    return fail("snapshot state: a virtio transport with " + std::to_string(count) + " queues",
                "the state file is corrupt");
  }
  for (uint64_t i = 0; i < count; ++i) {
    state.queues.push_back(DSEC_TRY(get_queue(in)));
  }
  DSEC_TRY(in.expect_end("virtio transport state"));
  return state;
}

}  // namespace dsec::virtio
