#include "vmm/devices/virtio/block.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/fs.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

#include "vmm/common/log_rate_limiter.h"
#include "vmm/common/unique_fd.h"
#include "vmm/devices/rate_limiter.h"
#include "vmm/devices/virtio/chain_buffers.h"
#include "vmm/devices/virtio/device_signals.h"
#include "vmm/devices/virtio/virtio_spec.h"
#include "vmm/snapshot/byte_codec.h"

namespace dsec::virtio {
namespace {

// Requests submitted and not completed, at most. The queue's size does not bound them: a
// hostile driver can publish the same head again and again. Past this the device stops
// taking chains until a completion makes room.
constexpr std::size_t kMaxInFlight = kBlockQueueSize;

std::string suppressed_note(uint64_t suppressed) {
  return suppressed == 0 ? std::string()
                         : fmt::format(" ({} similar lines suppressed)", suppressed);
}

template <typename T>
void put_le(std::vector<uint8_t>& bytes, uint64_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(value));  // little-endian host
}

// A request handed to the loop: what is left of it and how to answer it.
struct InFlight {
  // The disk's file when the request came: a file replaced since (PATCH /drives) stays
  // open until its last request ends, and the rest of a short transfer goes to it too.
  std::shared_ptr<const UniqueFd> file;
  uint64_t generation = 0;  // the activation it belongs to
  uint16_t head = 0;
  uint64_t status_gpa = 0;
  uint32_t type = kBlkTypeIn;
  uint32_t used_len = 0;      // bytes written to the guest once it succeeds, status included
  uint64_t offset = 0;        // file offset of the next byte to move
  uint64_t remaining = 0;     // bytes still to move
  uint64_t data_bytes = 0;    // the request's whole data, for the metrics
  std::vector<iovec> iovecs;  // what is left to move, starting at `offset`
};

// Drops the first `done` bytes of op's iovecs after a short transfer.
void advance(InFlight& op, uint64_t done) {
  op.offset += done;
  op.remaining -= done;
  auto it = op.iovecs.begin();
  while (it != op.iovecs.end() && done >= it->iov_len) {
    done -= it->iov_len;
    ++it;
  }
  op.iovecs.erase(op.iovecs.begin(), it);
  if (done != 0 && !op.iovecs.empty()) {
    op.iovecs.front().iov_base = static_cast<uint8_t*>(op.iovecs.front().iov_base) + done;
    op.iovecs.front().iov_len -= done;
  }
}

}  // namespace

struct VirtioBlock::Core : std::enable_shared_from_this<VirtioBlock::Core> {
  Core(std::string disk_path, UniqueFd disk_fd, BlockDeviceState disk_state, GuestMemory& mem,
       io::EventLoop& event_loop)
      : path(std::move(disk_path)),
        file(std::make_shared<const UniqueFd>(std::move(disk_fd))),
        state(disk_state),
        memory(mem),
        loop(event_loop) {
    limits.read_only = state.read_only;
    limits.max_segments = kBlockSegMax;
    config.resize(blk_config::kSize);
    set_capacity(state.capacity_sectors);
    put_le<uint32_t>(config, blk_config::kSegMax, kBlockSegMax);
    put_le<uint32_t>(config, blk_config::kBlkSize, static_cast<uint32_t>(kSectorSize));
  }

  void set_capacity(uint64_t sectors) {
    state.capacity_sectors = sectors;
    limits.capacity_sectors = sectors;
    put_le<uint64_t>(config, blk_config::kCapacity, sectors);
  }

  // All below run with `mutex` held.
  bool process_queue();
  bool start_request(uint16_t head, ParsedBlockRequest parsed);
  bool submit(std::unique_ptr<InFlight> op);
  void on_complete(std::unique_ptr<InFlight> op, int32_t result);
  bool complete(uint16_t head, std::optional<uint64_t> status_gpa, uint8_t status,
                uint32_t used_len);
  void signal_if_wanted();
  // A request done with success, in the metrics.
  void count_done(const InFlight& op);
  void queue_failed(const Error& error);
  // Replaces the rate limiter: none without a limit. Chains a replaced limiter held back
  // wait for the next notification or the caller's process_queue().
  void set_rate_limiter(const devices::RateLimiterConfig& limiter_config);

  std::string path;
  std::shared_ptr<const UniqueFd> file;  // replaced by replace_disk()
  BlockDeviceState state;  // its id may be replaced by a snapshot's, before activation
  GuestMemory& memory;
  io::EventLoop& loop;
  BlockLimits limits;
  std::vector<uint8_t> config;

  mutable std::mutex mutex;
  VirtQueue* queue = nullptr;  // while active
  std::shared_ptr<VirtioInterrupt> interrupt;
  // Bumped by every activate, reset and the device's destruction: a completion of an
  // older generation only counts itself out.
  uint64_t generation = 0;
  std::size_t in_flight = 0;
  bool throttled = false;  // chains were left in the ring at kMaxInFlight
  bool quiescing = false;  // a snapshot is being taken: no new chain is taken
  // Guest-triggered lines: requests refused (debug), and faults (warnings).
  LogRateLimiter refusal_log;
  LogRateLimiter fault_log;
  std::optional<devices::LoopRateLimiter> rate_limiter;  // with a limit configured
  const std::shared_ptr<devices::BlockMetrics> metrics = std::make_shared<devices::BlockMetrics>();
};

namespace {

// What a request costs its rate limiter's bandwidth bucket: the data it moves.
uint64_t rate_limited_bytes(const ParsedBlockRequest& parsed) {
  return parsed && (parsed->type == kBlkTypeIn || parsed->type == kBlkTypeOut) ? parsed->data_bytes
                                                                               : 0;
}

}  // namespace

// Pops and starts chains until the ring is empty, the queue breaks or kMaxInFlight
// requests are in flight. Returns true if it returned any chain to the used ring.
bool VirtioBlock::Core::process_queue() {
  throttled = false;
  if (queue == nullptr || quiescing || !queue->state().ready || queue->state().broken) {
    return false;
  }
  bool returned = false;
  for (;;) {
    if (in_flight >= kMaxInFlight) {
      throttled = true;
      break;
    }
    auto chain = queue->pop(memory);
    if (!chain) {
      queue_failed(chain.error());
      break;
    }
    std::optional<DescriptorChain>& next = *chain;
    if (!next.has_value()) {
      break;
    }
    auto parsed = parse_block_request(memory, *next, limits);
    if (rate_limiter && !rate_limiter->admit(rate_limited_bytes(parsed))) {
      metrics->rate_limiter_throttled_events.inc();
      queue->undo_pop();  // taken again when the limiter's timer calls
      break;
    }
    returned |= start_request(next->head, std::move(parsed));
  }
  return returned;
}

// Starts one request; returns true if it was answered at once.
bool VirtioBlock::Core::start_request(uint16_t head, ParsedBlockRequest parsed) {
  if (!parsed) {
    metrics->invalid_reqs_count.inc();
    const RejectedRequest& rejected = parsed.error();
    // An unsupported type is a driver probing for what it was not offered: not worth a line.
    if (rejected.status != kBlkStatusUnsupp) {
      if (const auto suppressed = refusal_log.allow()) {
        spdlog::debug("virtio-blk {}: request at head {} refused: {}{}", path, head,
                      rejected.reason, suppressed_note(*suppressed));
      }
    }
    return complete(head, rejected.status_gpa, rejected.status, rejected.status_gpa ? 1 : 0);
  }
  BlockRequest& request = *parsed;
  switch (request.type) {
    case kBlkTypeGetId: {
      if (!write_buffers(memory, request.data, std::span(state.id).first(request.data_bytes))) {
        return complete(head, request.status_gpa, kBlkStatusIoErr, 1);
      }
      return complete(head, request.status_gpa, kBlkStatusOk,
                      static_cast<uint32_t>(request.data_bytes + 1));
    }
    case kBlkTypeFlush:
    case kBlkTypeIn:
    case kBlkTypeOut:
      break;
    default:
      return complete(head, request.status_gpa, kBlkStatusUnsupp, 1);
  }
  if (request.type != kBlkTypeFlush && request.data_bytes == 0) {
    return complete(head, request.status_gpa, kBlkStatusOk, 1);
  }
  auto op = std::make_unique<InFlight>();
  op->file = file;
  op->generation = generation;
  op->head = head;
  op->status_gpa = request.status_gpa;
  op->type = request.type;
  op->offset = request.sector * kSectorSize;  // sector <= capacity: cannot overflow
  op->remaining = request.data_bytes;
  op->data_bytes = request.data_bytes;
  // Bytes given back to the driver: the data it reads and the status (5.2.6).
  op->used_len = static_cast<uint32_t>((request.type == kBlkTypeIn ? request.data_bytes : 0) + 1);
  // The one way from a guest address to a host pointer, bounded to guest RAM.
  auto iovecs = host_iovecs(memory, request.data);
  if (!iovecs) {
    return complete(head, request.status_gpa, kBlkStatusIoErr, 1);
  }
  op->iovecs = std::move(*iovecs);
  return submit(std::move(op));
}

// Hands `op` to the loop; returns true if it could not and answered it with IOERR.
bool VirtioBlock::Core::submit(std::unique_ptr<InFlight> op) {
  const uint16_t head = op->head;
  const uint64_t status_gpa = op->status_gpa;
  const uint32_t type = op->type;
  const uint64_t offset = op->offset;
  // Stay valid while `done` owns op (on the heap); the loop copies the array anyway.
  const std::span<const iovec> iovecs = op->iovecs;
  const int fd = op->file->get();
  auto done = [core = shared_from_this(), op = std::move(op)](int32_t result) mutable {
    const std::lock_guard lock(core->mutex);
    core->on_complete(std::move(op), result);
  };
  Status submitted = type == kBlkTypeFlush
                         ? loop.submit_fsync(fd, /*datasync=*/true, std::move(done))
                     : type == kBlkTypeIn ? loop.submit_read(fd, iovecs, offset, std::move(done))
                                          : loop.submit_write(fd, iovecs, offset, std::move(done));
  if (!submitted) {
    if (const auto suppressed = fault_log.allow()) {
      spdlog::warn("virtio-blk {}: {}{}", path, submitted.error().message(),
                   suppressed_note(*suppressed));
    }
    return complete(head, status_gpa, kBlkStatusIoErr, 1);
  }
  ++in_flight;
  return false;
}

void VirtioBlock::Core::on_complete(std::unique_ptr<InFlight> op, int32_t result) {
  --in_flight;
  if (op->generation != generation || queue == nullptr) {
    // The device was reset (or destroyed) since: the queue is no longer this request's.
    // Its place in flight is free all the same, and the activation after the reset may
    // have left chains in the ring at kMaxInFlight, waiting for it.
    if (throttled && process_queue()) {
      signal_if_wanted();
    }
    return;
  }
  bool returned = false;
  const bool moves_data = op->type != kBlkTypeFlush;
  if (moves_data && result > 0 && static_cast<uint64_t>(result) < op->remaining) {
    // A short transfer: move the rest (requests are never empty, see start_request).
    advance(*op, static_cast<uint64_t>(result));
    returned = submit(std::move(op));
    if (!returned) {
      return;  // the rest is on its way
    }
  } else {
    // 0 bytes of a read or write: end of file, the disk shrank under the guest.
    const bool failed = result < 0 || (moves_data && result == 0);
    if (result < 0) {
      if (const auto suppressed = fault_log.allow()) {
        spdlog::warn("virtio-blk {}: {} at offset {}: {}{}", path,
                     !moves_data              ? "fdatasync"
                     : op->type == kBlkTypeIn ? "read"
                                              : "write",
                     op->offset, std::strerror(-result), suppressed_note(*suppressed));
      }
    }
    if (!failed) {
      count_done(*op);
    }
    returned = complete(op->head, op->status_gpa, failed ? kBlkStatusIoErr : kBlkStatusOk,
                        failed ? 1 : op->used_len);
  }
  // Chains left in the ring at kMaxInFlight: there is room for one now.
  const bool more = throttled && process_queue();
  if (returned || more) {
    signal_if_wanted();
  }
}

// Writes the status byte and returns the chain to the driver with `used_len` bytes
// written. Returns true if the chain reached the used ring.
bool VirtioBlock::Core::complete(uint16_t head, std::optional<uint64_t> status_gpa, uint8_t status,
                                 uint32_t used_len) {
  if (status_gpa) {
    // Inside guest RAM: it lies in a buffer of the chain. A failure still leaves the chain
    // to be returned, with the driver reading whatever the byte held.
    (void)memory.write_obj<uint8_t>(*status_gpa, status);
  }
  if (queue->state().broken) {
    return false;  // it said so once, when it broke; the driver resets it
  }
  if (auto added = queue->add_used(memory, head, used_len); !added) {
    queue_failed(added.error());
    return false;
  }
  return true;
}

void VirtioBlock::Core::count_done(const InFlight& op) {
  switch (op.type) {
    case kBlkTypeIn:
      metrics->read_count.inc();
      metrics->read_bytes.add(op.data_bytes);
      break;
    case kBlkTypeOut:
      metrics->write_count.inc();
      metrics->write_bytes.add(op.data_bytes);
      break;
    default:
      metrics->flush_count.inc();
      break;
  }
}

void VirtioBlock::Core::signal_if_wanted() {
  if (queue == nullptr) {
    return;
  }
  signal_used_if_wanted(*queue, memory, *interrupt);
}

void VirtioBlock::Core::queue_failed(const Error& error) {
  report_broken_queue(*interrupt, fault_log, "virtio-blk " + path, error);
}

void VirtioBlock::Core::set_rate_limiter(const devices::RateLimiterConfig& limiter_config) {
  if (!limiter_config.limits()) {
    rate_limiter.reset();
    return;
  }
  // The timer holds the core weakly: a device destroyed meanwhile is left alone.
  rate_limiter.emplace(limiter_config, loop, [weak = weak_from_this()] {
    if (const auto core = weak.lock()) {
      const std::lock_guard lock(core->mutex);
      if (core->process_queue()) {
        core->signal_if_wanted();
      }
    }
  });
}

namespace {

// A disk's file, opened and checked; `st` names it for a derived id.
struct OpenedDisk {
  UniqueFd fd;
  uint64_t capacity_sectors = 0;
  struct stat st {};
};

// Opens `path` for a disk: a regular file or a block device, of whole sectors, not empty.
Result<OpenedDisk> open_disk(const std::string& path, bool read_only) {
  // O_NONBLOCK so that a FIFO put in the file's place cannot hang the open; cleared below,
  // since io_uring answers EAGAIN for files that have it.
  const int flags = (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | O_NONBLOCK;
  OpenedDisk disk;
  disk.fd = UniqueFd(::open(path.c_str(), flags));
  const UniqueFd& fd = disk.fd;
  if (!fd) {
    return fail_errno(fmt::format("cannot open disk {}{}", path,
                                  read_only ? " for reading" : " for reading and writing"),
                      errno,
                      errno == EACCES || errno == EROFS
                          ? (read_only ? "" : "attach it read-only if it must not change")
                          : "");
  }
  struct stat& st = disk.st;
  if (::fstat(fd.get(), &st) != 0) {
    return fail_errno("cannot stat disk " + path, errno);
  }
  uint64_t size = 0;
  if (S_ISREG(st.st_mode)) {
    size = static_cast<uint64_t>(st.st_size);
  } else if (S_ISBLK(st.st_mode)) {
    if (::ioctl(fd.get(), BLKGETSIZE64, &size) != 0) {
      return fail_errno("BLKGETSIZE64 on disk " + path, errno);
    }
  } else {
    return fail(fmt::format("disk {} is neither a regular file nor a block device", path));
  }
  if (const int fl = ::fcntl(fd.get(), F_GETFL);
      fl < 0 || ::fcntl(fd.get(), F_SETFL, fl & ~O_NONBLOCK) != 0) {
    return fail_errno("fcntl(F_SETFL) on disk " + path, errno);
  }
  if (size == 0) {
    return fail(fmt::format("disk {} is empty", path), "a disk needs at least one 512-byte sector");
  }
  if (size % kSectorSize != 0) {
    return fail(fmt::format("disk {} is {} bytes, not a multiple of 512", path, size),
                fmt::format("pad it to whole sectors: truncate -s %512 {}", path));
  }
  disk.capacity_sectors = size / kSectorSize;
  return disk;
}

}  // namespace

Result<std::unique_ptr<VirtioBlock>> VirtioBlock::create(const std::string& path,
                                                         const BlockOptions& options,
                                                         GuestMemory& memory, io::EventLoop& loop) {
  OpenedDisk disk = DSEC_TRY(open_disk(path, options.read_only));
  BlockDeviceState state;
  state.capacity_sectors = disk.capacity_sectors;
  state.read_only = options.read_only;
  const struct stat& st = disk.st;
  const std::string id = !options.id.empty()
                             ? options.id
                             : fmt::format("{:x}{:x}{:x}", st.st_dev, st.st_rdev, st.st_ino);
  std::copy_n(id.begin(), std::min<std::size_t>(id.size(), kBlkIdBytes), state.id.begin());

  auto core = std::make_shared<Core>(path, std::move(disk.fd), state, memory, loop);
  core->set_rate_limiter(options.rate_limiter);
  return std::unique_ptr<VirtioBlock>(new VirtioBlock(std::move(core)));
}

VirtioBlock::VirtioBlock(std::shared_ptr<Core> core) : core_(std::move(core)) {}

VirtioBlock::~VirtioBlock() {
  const std::lock_guard lock(core_->mutex);
  ++core_->generation;
  core_->queue = nullptr;
  core_->interrupt.reset();
}

uint64_t VirtioBlock::features() const {
  uint64_t features = feature_bit(kBlkFeatureSegMax) | feature_bit(kBlkFeatureBlkSize) |
                      feature_bit(kBlkFeatureFlush) | feature_bit(kFeatureIndirectDesc) |
                      feature_bit(kFeatureEventIdx);
  if (core_->state.read_only) {
    features |= feature_bit(kBlkFeatureRo);
  }
  return features;
}

void VirtioBlock::read_config(uint64_t offset, std::span<uint8_t> data) const {
  // A vCPU's read; replace_disk() rewrites the capacity from the API thread.
  const std::lock_guard lock(core_->mutex);
  copy_config(core_->config, offset, data);
}

void VirtioBlock::write_config(uint64_t /*offset*/, std::span<const uint8_t> /*data*/) {}

Status VirtioBlock::activate(std::span<VirtQueue> queues, uint64_t /*features*/,
                             std::shared_ptr<VirtioInterrupt> interrupt) {
  if (queues.size() != 1 || !interrupt) {
    return fail(
        fmt::format("virtio-blk {}: activated with {} queues, not 1", core_->path, queues.size()));
  }
  const std::lock_guard lock(core_->mutex);
  ++core_->generation;
  core_->queue = &queues[0];
  core_->interrupt = std::move(interrupt);
  core_->throttled = false;
  return ok();
}

void VirtioBlock::reset() {
  const std::lock_guard lock(core_->mutex);
  ++core_->generation;
  core_->queue = nullptr;
  core_->interrupt.reset();
  core_->throttled = false;
}

void VirtioBlock::notify(uint16_t queue) {
  const std::lock_guard lock(core_->mutex);
  if (queue != 0 || core_->queue == nullptr) {
    return;
  }
  if (core_->process_queue()) {
    core_->signal_if_wanted();
  }
}

void VirtioBlock::set_rate_limiter(const devices::RateLimiterConfig& config) {
  const std::lock_guard lock(core_->mutex);
  core_->set_rate_limiter(config);
  // What the old limiter held back goes now if the new one lets it.
  if (core_->queue != nullptr && core_->process_queue()) {
    core_->signal_if_wanted();
  }
}

std::shared_ptr<devices::BlockMetrics> VirtioBlock::metrics() const {
  return core_->metrics;
}

std::string VirtioBlock::path() const {
  const std::lock_guard lock(core_->mutex);
  return core_->path;
}

Status VirtioBlock::replace_disk(const std::string& path) {
  const bool read_only = state().read_only;  // fixed at create()
  OpenedDisk disk = DSEC_TRY(open_disk(path, read_only));
  const std::lock_guard lock(core_->mutex);
  core_->path = path;
  core_->file = std::make_shared<const UniqueFd>(std::move(disk.fd));
  core_->set_capacity(disk.capacity_sectors);
  // A driver reads the new capacity at a configuration change notification (5.2.6.1,
  // Linux's virtblk_config_changed), as Firecracker's update_disk_image sends it.
  if (core_->interrupt) {
    core_->interrupt->signal_config_change();
  }
  spdlog::info("virtio-blk: the disk is now {} ({} sectors)", path, disk.capacity_sectors);
  return ok();
}

const BlockDeviceState& VirtioBlock::state() const {
  return core_->state;
}

bool VirtioBlock::quiesce() {
  const std::lock_guard lock(core_->mutex);
  core_->quiescing = true;
  return core_->in_flight == 0;
}

void VirtioBlock::resume_after_quiesce() {
  const std::lock_guard lock(core_->mutex);
  core_->quiescing = false;
  if (core_->process_queue()) {
    core_->signal_if_wanted();
  }
}

std::vector<uint8_t> VirtioBlock::save_state() const {
  const std::lock_guard lock(core_->mutex);
  snapshot::ByteWriter out;
  out.put(core_->state.capacity_sectors);
  out.put<uint8_t>(core_->state.read_only ? 1 : 0);
  out.put(core_->state.id);
  return out.take();
}

Status VirtioBlock::restore_state(std::span<const uint8_t> bytes) {
  snapshot::ByteReader in(bytes);
  const auto capacity = DSEC_TRY(in.get<uint64_t>("virtio-blk capacity"));
  const auto read_only = DSEC_TRY(in.get<uint8_t>("virtio-blk read-only flag"));
  const auto id = DSEC_TRY(in.get<decltype(BlockDeviceState::id)>("virtio-blk id"));
  DSEC_TRY(in.expect_end("virtio-blk state"));
  const std::lock_guard lock(core_->mutex);
  if (capacity != core_->state.capacity_sectors) {
    return fail(fmt::format("drive {} has {} sectors of 512 bytes, but the snapshot's guest saw a "
                            "disk of {} sectors",
                            core_->path, core_->state.capacity_sectors, capacity),
                "give the restore a drive of the same size as the one snapshotted");
  }
  if ((read_only != 0) != core_->state.read_only) {
    return fail(fmt::format("drive {} is {}, but the snapshot's guest saw it {}", core_->path,
                            core_->state.read_only ? "read-only" : "writable",
                            read_only != 0 ? "read-only" : "writable"),
                "restore it with the same read-only setting as when it was snapshotted");
  }
  core_->state.id = id;  // what the guest read with GET_ID stays its disk's id
  return ok();
}

std::size_t VirtioBlock::requests_in_flight() const {
  const std::lock_guard lock(core_->mutex);
  return core_->in_flight;
}

}  // namespace dsec::virtio
