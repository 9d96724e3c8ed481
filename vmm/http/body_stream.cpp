#include "vmm/http/body_stream.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace dsec::http {

Result<std::shared_ptr<BodyStream>> BodyStream::create(Options options) {
  UniqueFd event(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!event) {
    return fail_errno("a streamed response's eventfd", errno);
  }
  return std::shared_ptr<BodyStream>(new BodyStream(std::move(options), std::move(event)));
}

void BodyStream::update_signal() {
  const bool wanted = !buffer_.empty() || finished_ || gone_;
  if (wanted == signalled_) {
    return;
  }
  if (wanted) {
    const uint64_t one = 1;
    // Cannot fail short of a bad descriptor: the counter stays far below its limit.
    static_cast<void>(::write(event_.get(), &one, sizeof one));
  } else {
    uint64_t count = 0;
    static_cast<void>(::read(event_.get(), &count, sizeof count));
  }
  signalled_ = wanted;
}

bool BodyStream::write(std::string_view bytes, bool wait) {
  std::unique_lock lock(mutex_);
  if (wait) {
    room_.wait(lock, [&] {
      return gone_ || finished_ || buffer_.empty() ||
             buffer_.size() + bytes.size() <= options_.max_buffered;
    });
  }
  if (gone_ || finished_) {
    return false;
  }
  buffer_.append(bytes);
  update_signal();
  return true;
}

void BodyStream::finish() {
  const std::lock_guard lock(mutex_);
  finished_ = true;
  update_signal();
  room_.notify_all();
}

void BodyStream::finish_with(std::string_view bytes) {
  write(bytes, /*wait=*/false);
  finish();
}

bool BodyStream::gone() const {
  const std::lock_guard lock(mutex_);
  return gone_;
}

std::string BodyStream::take(size_t max) {
  const std::lock_guard lock(mutex_);
  std::string out;
  if (max >= buffer_.size()) {
    out.swap(buffer_);
  } else {
    out = buffer_.substr(0, max);
    buffer_.erase(0, max);
  }
  // The end stays readable until the server saw it (drained()), and it ends the watch.
  update_signal();
  room_.notify_all();
  return out;
}

bool BodyStream::drained() const {
  const std::lock_guard lock(mutex_);
  return gone_ || (finished_ && buffer_.empty());
}

bool BodyStream::ready() const {
  const std::lock_guard lock(mutex_);
  return signalled_;
}

void BodyStream::close_reader() {
  {
    const std::lock_guard lock(mutex_);
    gone_ = true;
    buffer_.clear();
    update_signal();
    room_.notify_all();
  }
  presence_->mark_gone();  // outside the lock: what it stops may write to the stream
}

}  // namespace dsec::http
