#include "vmm/common/capped_log_sink.h"

#include <fmt/format.h>

namespace dsec {

void CappedLogSink::sink_it_(const spdlog::details::log_msg& msg) {
  if (capped_) {
    return;
  }
  const uint64_t size = msg.payload.size() + kPrefixBytes;
  const uint64_t limit = limit_;
  if (limit != 0 && written_ + size > limit) {
    capped_ = true;
    const std::string last = fmt::format(
        "log: this VMM's log reached its limit ({} bytes, --log-limit); later lines are dropped",
        limit);
    inner_->log(spdlog::details::log_msg(msg.logger_name, spdlog::level::warn, last));
    inner_->flush();
    return;
  }
  written_ += size;
  inner_->log(msg);
}

}  // namespace dsec
