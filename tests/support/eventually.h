// For tests: waiting on a condition with a deadline, never sleep-and-hope.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace dsec::test {

// Polls `done` every 100 ms until it holds (true) or `within` passed (false).
inline bool eventually(const std::function<bool()>& done, std::chrono::seconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return true;
}

}  // namespace dsec::test
