#include "vmm/devices/virtio/net/net.h"

#include <fcntl.h>
#include <linux/if_tun.h>
#include <spdlog/spdlog.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <tuple>

#include "vmm/devices/virtio/chain_buffers.h"
#include "vmm/devices/virtio/device_signals.h"
#include "vmm/mmds/frames.h"

namespace dsec::virtio {

Result<MacAddress> parse_mac(const std::string& text) {
  MacAddress mac{};
  unsigned int b[6];
  char extra = 0;
  if (text.size() != 17 || std::sscanf(text.c_str(), "%2x:%2x:%2x:%2x:%2x:%2x%c", &b[0], &b[1],
                                       &b[2], &b[3], &b[4], &b[5], &extra) != 6) {
    return fail("'" + text + "' is not a MAC address", "write six hex bytes: 52:54:00:12:34:56");
  }
  for (size_t i = 0; i < 6; ++i) {
    mac[i] = static_cast<uint8_t>(b[i]);
  }
  if ((mac[0] & 1) != 0) {
    return fail("MAC address " + text + " is a multicast address",
                "give a unicast one (the first byte even)");
  }
  return mac;
}

std::string format_mac(const MacAddress& mac) {
  char out[18];
  (void)std::snprintf(out, sizeof(out), "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2],
                      mac[3], mac[4], mac[5]);
  return out;
}

unsigned tap_offloads_for(uint64_t guest_features) {
  const auto took = [guest_features](unsigned bit) {
    return (guest_features & feature_bit(bit)) != 0;
  };
  // Segmentation offloads are only meaningful with checksum offload (5.1.3.1).
  if (!took(kNetFeatureGuestCsum)) {
    return 0;
  }
  return TUN_F_CSUM | (took(kNetFeatureGuestTso4) ? TUN_F_TSO4 : 0U) |
         (took(kNetFeatureGuestTso6) ? TUN_F_TSO6 : 0U);
}

VirtioNet::VirtioNet(UniqueFd fd, const MacAddress& mac, GuestMemory& memory, io::EventLoop& loop,
                     FrameFormat format)
    : fd_(std::move(fd)),
      format_(std::move(format)),
      mac_(mac),
      memory_(memory),
      loop_(loop),
      frame_(kReadBufferSize) {}

Result<std::unique_ptr<VirtioNet>> VirtioNet::create(const TapConfig& tap, const MacAddress& mac,
                                                     GuestMemory& memory, io::EventLoop& loop,
                                                     const NetRateLimiters& limiters) {
  auto opened = Tap::open(tap);
  if (!opened) {
    return std::unexpected(opened.error().with_context("virtio-net"));
  }
  spdlog::debug("virtio-net: TAP {}, guest MAC {}, {}", opened->name(), format_mac(mac),
                opened->vnet_header() ? "offloads" : "no virtio_net_hdr on the TAP: no offloads");
  // The Tap's fd moves into the device; the Tap object itself holds nothing else.
  UniqueFd fd(::fcntl(opened->fd(), F_DUPFD_CLOEXEC, 0));
  const int raw = fd.get();
  FrameFormat format{.vnet_header = opened->vnet_header(), .set_offloads = [raw](unsigned flags) {
                       return Tap::set_offloads(raw, flags);
                     }};
  return create_on_fd(std::move(fd), mac, memory, loop, limiters, std::move(format));
}

Result<std::unique_ptr<VirtioNet>> VirtioNet::create_on_fd(UniqueFd fd, const MacAddress& mac,
                                                           GuestMemory& memory, io::EventLoop& loop,
                                                           const NetRateLimiters& limiters,
                                                           FrameFormat format) {
  if (!fd) {
    return fail_errno("virtio-net: the TAP fd", errno);
  }
  std::unique_ptr<VirtioNet> device(
      new VirtioNet(std::move(fd), mac, memory, loop, std::move(format)));
  VirtioNet* self = device.get();
  device->dispatch_ = DSEC_TRY(
      LoopDispatch::create(loop, device->mutex_, [self](uint16_t queue) { self->serve(queue); }));
  device->replace_limiters(limiters);
  // The TAP is watched from activation on (serve(kRxQueue)).
  return device;
}

VirtioNet::~VirtioNet() {
  dispatch_.reset();
  unwatch_tap();
}

uint64_t VirtioNet::features() const {
  // VirtQueue::pop() handles indirect descriptors and event idx.
  uint64_t features = feature_bit(kNetFeatureMac) | feature_bit(kNetFeatureStatus) |
                      feature_bit(kFeatureIndirectDesc) | feature_bit(kFeatureEventIdx);
  if (format_.vnet_header) {
    for (const unsigned bit : {kNetFeatureCsum, kNetFeatureGuestCsum, kNetFeatureGuestTso4,
                               kNetFeatureGuestTso6, kNetFeatureHostTso4, kNetFeatureHostTso6}) {
      features |= feature_bit(bit);
    }
  }
  return features;
}

void VirtioNet::read_config(uint64_t offset, std::span<uint8_t> data) const {
  std::array<uint8_t, kConfigSize> config{};
  std::copy(mac_.begin(), mac_.end(), config.begin());
  const uint16_t status = kNetStatusLinkUp;  // le16 on a little-endian host
  std::memcpy(config.data() + 6, &status, sizeof(status));
  copy_config(config, offset, data);
}

Status VirtioNet::activate(std::span<VirtQueue> queues, uint64_t features,
                           std::shared_ptr<VirtioInterrupt> interrupt) {
  if (queues.size() != 2) {
    return fail("virtio-net: activated with " + std::to_string(queues.size()) +
                " queues instead of 2");
  }
  {
    const std::lock_guard lock(mutex_);
    queues_ = queues;
    interrupt_ = std::move(interrupt);
    frame_pending_ = false;
    if (format_.vnet_header) {
      pending_offloads_ = tap_offloads_for(features);
      rx_header_passes_ = *pending_offloads_ != 0;
    }
    dispatch_->defer(kRxQueue);  // sets the offloads and starts watching the TAP
  }
  return ok();
}

void VirtioNet::reset() {
  const std::lock_guard lock(mutex_);
  queues_ = {};
  interrupt_.reset();
  frame_pending_ = false;
  rx_header_passes_ = false;
  dispatch_->clear();
  // The TAP watch, if any, finds the device inactive and stops itself.
}

void VirtioNet::notify(uint16_t queue) {
  if (queue < 2) {
    dispatch_->notify(queue);
  }
}

void VirtioNet::on_tap_readable() {
  dispatch_->on_loop_thread();
  const std::lock_guard lock(mutex_);
  process_rx();
}

void VirtioNet::replace_limiters(const NetRateLimiters& limiters) {
  for (auto [limiter, config, queue] : {std::tuple{&rx_limiter_, &limiters.rx, kRxQueue},
                                        std::tuple{&tx_limiter_, &limiters.tx, kTxQueue}}) {
    if (config->limits()) {
      limiter->emplace(*config, loop_, [this, queue] { on_tokens(queue); });
    } else {
      limiter->reset();
    }
  }
}

void VirtioNet::set_rate_limiters(const NetRateLimiters& limiters) {
  dispatch_->on_loop_thread();
  const std::lock_guard lock(mutex_);
  replace_limiters(limiters);
  serve(kTxQueue);
  serve(kRxQueue);
}

void VirtioNet::on_tokens(uint16_t queue) {
  dispatch_->on_loop_thread();
  const std::lock_guard lock(mutex_);
  serve(queue);
}

void VirtioNet::serve(uint16_t queue) {
  if (!interrupt_) {
    return;  // not active
  }
  if (queue == kTxQueue) {
    process_tx();
  } else {
    process_rx();
  }
}

void VirtioNet::process_tx() {
  serve_available_chains(
      queues_[kTxQueue], memory_, *interrupt_, {"virtio-net", log_limiter_},
      [this](const DescriptorChain& chain) { return send_frame(chain); },
      [this](const DescriptorChain& chain) {
        // A chain too short for its header costs an op; send_frame() then refuses it.
        const uint64_t readable = chain.readable_bytes();
        if (tx_limiter_ &&
            !tx_limiter_->admit(readable > kHeaderSize ? readable - kHeaderSize : 0)) {
          metrics_->tx_rate_limiter_throttled.inc();
          return false;
        }
        return true;
      });
  if (mmds_ && mmds_->has_frame()) {
    process_rx();  // the MMDS's answers to what the guest just sent
  }
}

Result<bool> VirtioNet::detour_to_mmds(const DescriptorChain& chain) {
  std::array<uint8_t, kHeaderSize> header{};
  DSEC_TRY(read_buffers(memory_, chain.readable, header));
  tx_scratch_.resize(chain.readable_bytes() - kHeaderSize);
  DSEC_TRY(read_buffers(memory_, slice_buffers(chain.readable, kHeaderSize), tx_scratch_));
  // A guest that took checksum offload leaves its TCP checksum to the device.
  constexpr uint8_t kNeedsChecksum = 1;  // VIRTIO_NET_HDR_F_NEEDS_CSUM
  if ((header[0] & kNeedsChecksum) != 0) {
    mmds::complete_partial_checksum(tx_scratch_, header[6] | (size_t{header[7]} << 8),
                                    header[8] | (size_t{header[9]} << 8));
  }
  return mmds_->detour(tx_scratch_, std::chrono::steady_clock::now());
}

Result<uint32_t> VirtioNet::send_frame(const DescriptorChain& chain) {
  const uint64_t readable = chain.readable_bytes();
  if (readable < kHeaderSize || readable - kHeaderSize > kMaxFrameSize) {
    metrics_->tx_malformed_frames.inc();
    return fail(fmt::format(
        "virtio-net: tx chain {} holds {} bytes, not a {}-byte header and a frame of at most {}",
        chain.head, readable, kHeaderSize, kMaxFrameSize));
  }
  if (mmds_ && DSEC_TRY(detour_to_mmds(chain))) {
    return 0;  // the MMDS's, not the TAP's
  }
  // The frame, gathered past the header; with the TAP's own header, the header too.
  const std::vector<iovec> iov = DSEC_TRY(host_iovecs(
      memory_, format_.vnet_header ? chain.readable : slice_buffers(chain.readable, kHeaderSize)));
  if (!iov.empty()) {
    ssize_t n;
    do {
      n = ::writev(fd_.get(), iov.data(), static_cast<int>(iov.size()));
    } while (n < 0 && errno == EINTR);
    if (n < 0 && log_limiter_.allow()) {
      // EAGAIN: the TAP's queue is full; the frame is dropped, as a busy link would.
      // EINVAL: the host's kernel refused the guest's header.
      spdlog::warn("virtio-net: sending a frame: {}; dropped", std::strerror(errno));
    }
    if (n >= 0) {
      metrics_->tx_packets_count.inc();
      metrics_->tx_bytes_count.add(readable - kHeaderSize);
    }
  }
  return 0;
}

void VirtioNet::process_rx() {
  if (!interrupt_) {
    unwatch_tap();  // inactive: frames wait in the TAP until activate()
    return;
  }
  if (!tap_watch_) {
    watch_tap();
  }
  VirtQueue& q = queues_[kRxQueue];
  bool returned = false;
  for (;;) {
    if (!frame_pending_ && !take_frame()) {
      break;
    }
    auto popped = q.pop(memory_);
    if (!popped) {
      report_broken(popped.error());
      unwatch_tap();
      break;
    }
    const std::optional<DescriptorChain>& chain = *popped;
    if (!chain) {
      // No buffer: keep the frame and wait for the guest's rx notification.
      unwatch_tap();
      break;
    }
    const DescriptorChain& c = *chain;
    if (rx_limiter_ && !rx_limiter_->admit(frame_len_)) {
      metrics_->rx_rate_limiter_throttled.inc();
      // Out of tokens: the frame waits, the TAP queues (then drops) what follows, and the
      // limiter's timer calls on_tokens().
      q.undo_pop();
      unwatch_tap();
      break;
    }
    uint32_t written = 0;
    if (c.writable_bytes() >= kHeaderSize + frame_len_) {
      if (write_buffers(memory_, c.writable,
                        std::span<const uint8_t>(frame_.data(), kHeaderSize + frame_len_))) {
        written = static_cast<uint32_t>(kHeaderSize + frame_len_);
        metrics_->rx_packets_count.inc();
        metrics_->rx_bytes_count.add(frame_len_);
      }
    } else if (log_limiter_.allow()) {
      spdlog::warn("virtio-net: a {}-byte frame does not fit rx chain {} ({} bytes); dropped",
                   frame_len_, c.head, c.writable_bytes());
    }
    frame_pending_ = false;
    if (auto added = q.add_used(memory_, c.head, written); !added) {
      report_broken(added.error());
      unwatch_tap();
      break;
    }
    returned = true;
  }
  if (returned) {
    signal_used_if_wanted(q, memory_, *interrupt_);
  }
}

bool VirtioNet::take_frame() {
  if (mmds_) {
    if (auto frame = mmds_->next_frame(); frame && frame->size() <= kMaxFrameSize) {
      // The MMDS's frames carry whole checksums: a zero header.
      std::fill_n(frame_.begin(), kHeaderSize, 0);
      frame_[10] = 1;  // num_buffers (le16)
      std::copy(frame->begin(), frame->end(), frame_.begin() + kHeaderSize);
      frame_len_ = frame->size();
      frame_pending_ = true;
      return true;
    }
  }
  return read_frame();
}

bool VirtioNet::read_frame() {
  apply_pending_offloads();
  // Without the TAP's header, the frame goes past a zeroed one.
  const size_t at = format_.vnet_header ? 0 : kHeaderSize;
  for (;;) {
    ssize_t n;
    do {
      n = ::read(fd_.get(), frame_.data() + at, frame_.size() - at);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && log_limiter_.allow()) {
        spdlog::warn("virtio-net: reading from the TAP: {}", std::strerror(errno));
      }
      return false;
    }
    if (n == 0) {
      // The other end is gone (a socket in tests); stop polling what stays readable.
      unwatch_tap();
      return false;
    }
    const size_t total = at + static_cast<size_t>(n);
    if (total < kHeaderSize || total - kHeaderSize > kMaxFrameSize) {
      if (log_limiter_.allow()) {
        spdlog::warn("virtio-net: a {}-byte read from the TAP is no frame; dropped", n);
      }
      continue;
    }
    if (!rx_header_passes_) {
      // No header from the TAP, or a guest that took no offload: its flags and GSO fields
      // must be zero (5.1.6.4.1), whatever the host's stack marked.
      std::fill_n(frame_.begin(), kHeaderSize, 0);
    }
    frame_[10] = 1;  // num_buffers (le16): one chain holds the frame
    frame_[11] = 0;
    frame_len_ = total - kHeaderSize;
    frame_pending_ = true;
    return true;
  }
}

void VirtioNet::apply_pending_offloads() {
  if (!pending_offloads_) {
    return;
  }
  const unsigned flags = *pending_offloads_;
  pending_offloads_.reset();
  if (!format_.set_offloads) {
    return;
  }
  if (auto set = format_.set_offloads(flags); !set && log_limiter_.allow()) {
    spdlog::warn("virtio-net: {}; the host sends the guest no large frames", set.error().message());
  }
}

void VirtioNet::watch_tap() {
  if (tap_watch_) {
    return;
  }
  auto watch = loop_.add_fd_watch(fd_.get(), [this] { on_tap_readable(); });
  if (!watch) {
    if (log_limiter_.allow()) {
      spdlog::warn("virtio-net: watching the TAP: {}", watch.error().message());
    }
    return;
  }
  tap_watch_ = *watch;
}

void VirtioNet::unwatch_tap() {
  if (tap_watch_) {
    static_cast<void>(loop_.remove_watch(*tap_watch_));
    tap_watch_.reset();
  }
}

void VirtioNet::report_broken(const Error& error) {
  report_broken_queue(*interrupt_, log_limiter_, "virtio-net", error);
}

}  // namespace dsec::virtio
