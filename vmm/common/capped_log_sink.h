// A log sink that passes lines on to another one up to a limit in bytes, then one line
// that says so, then nothing: a VMM whose stderr is a file on the host (a pool clone's
// sandboxes/ID.log) keeps that file bounded whatever its guest makes it log.
#pragma once

#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace dsec {

// Used as a sink of a distributing sink (spdlog's dist_sink), whose lock serializes its
// lines; the limit may be set from any thread.
class CappedLogSink final : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  // Each line counts as its message plus this much for the prefix (time, level) and
  // newline that the inner sink's pattern adds.
  static constexpr uint64_t kPrefixBytes = 36;

  explicit CappedLogSink(spdlog::sink_ptr inner) : inner_(std::move(inner)) {}
  // 0: no limit. Counts from what was written so far.
  void set_limit(uint64_t bytes) { limit_ = bytes; }
  bool capped() const { return capped_; }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override;
  void flush_() override { inner_->flush(); }
  void set_pattern_(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter_(std::unique_ptr<spdlog::formatter> formatter) override {
    inner_->set_formatter(std::move(formatter));
  }

 private:
  spdlog::sink_ptr inner_;
  std::atomic<uint64_t> limit_ = 0;
  uint64_t written_ = 0;
  std::atomic<bool> capped_ = false;
};

}  // namespace dsec
