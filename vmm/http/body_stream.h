// A response body written piece by piece while it is sent (HttpResponse::stream): a
// producer (any thread: a request's worker, or the server's own loop) appends bytes as they
// come, and the server sends each batch to the client as a chunk (HTTP/1.1 chunked transfer
// encoding), then the end once the producer finished.
//
// Bounded both ways: a producer that outruns the client waits in write() while more than
// max_buffered bytes wait to be sent (the server's own output is bounded by HttpLimits), so
// a slow reader slows the producer down; a client that stalls is closed by the server's
// send deadline, and one that goes away ends the stream: write() then returns false at
// once, and the producer stops. The server tells of new bytes through an eventfd it
// watches; nothing here touches a socket.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "vmm/common/error.h"
#include "vmm/common/unique_fd.h"
#include "vmm/http/message.h"

namespace dsec::http {

class BodyStream {
 public:
  struct Options {
    // Bytes a producer may have waiting before write() waits.
    size_t max_buffered = size_t{256} * 1024;
    // Sent by the server when the stream stayed quiet this long (nothing written, nothing
    // waiting), so that a client with an idle timeout of its own (a stream's keepalive
    // event, an SSE comment) knows the stream is alive; zero or empty bytes: never.
    std::chrono::milliseconds heartbeat_interval{0};
    std::string heartbeat;
  };
  static Result<std::shared_ptr<BodyStream>> create(Options options);
  static Result<std::shared_ptr<BodyStream>> create() { return create(Options{}); }

  // The producer's side, from any thread.
  // Appends `bytes` (written whole, never interleaved with another write), after waiting
  // while the buffer is full; false when the client is gone or the stream ended (nothing
  // appended). `wait: false` appends at once even past max_buffered: for a small last
  // message, and for the server's loop thread, which must never wait for itself.
  bool write(std::string_view bytes, bool wait = true);
  // No more bytes: the body ends once what waits is sent. Idempotent.
  void finish();
  // write(bytes, false), then finish().
  void finish_with(std::string_view bytes);
  // Whether the client went away (or the server stopped): the producer can stop.
  bool gone() const;
  // The same as a ClientPresence, marked gone with the stream: work done for the client
  // alone registers what stops it (ClientPresence::on_gone).
  const std::shared_ptr<ClientPresence>& presence() const { return presence_; }

  // The server's side, on its loop thread.
  // Readable (POLLIN) while bytes or the end wait to be taken.
  int fd() const { return event_.get(); }
  // Up to `max` waiting bytes; the rest stays.
  std::string take(size_t max);
  // Everything was taken and the producer finished (or the client is gone).
  bool drained() const;
  // Something waits to be taken (bytes, or the end): the eventfd is readable.
  bool ready() const;
  // The client went away: write() returns false from now on, a waiting one at once.
  void close_reader();
  const Options& options() const { return options_; }

  BodyStream(const BodyStream&) = delete;
  BodyStream& operator=(const BodyStream&) = delete;

 private:
  BodyStream(Options options, UniqueFd event)
      : options_(std::move(options)), event_(std::move(event)) {}
  // Whether there is something for the server (bytes, or the end not yet seen); keeps the
  // eventfd readable exactly then. Under the lock.
  void update_signal();

  const Options options_;
  UniqueFd event_;
  mutable std::mutex mutex_;
  std::condition_variable room_;
  std::string buffer_;
  bool finished_ = false;
  bool gone_ = false;
  bool signalled_ = false;
  std::shared_ptr<ClientPresence> presence_ = std::make_shared<ClientPresence>();
};

}  // namespace dsec::http
