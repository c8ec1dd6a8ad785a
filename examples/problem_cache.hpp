// The inputs and CPU reference of an example's problem, built once per
// process for each distinct key and shared, read-only, by every run that
// asks for it: an exploration's runs all multiply the same A and B, so the
// reference (a whole CPU GEMM) is computed once, not after every schedule.
// Thread-safe: the runs of `explore --jobs N` ask from N threads.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace wspipe::examples {

// The last kKeep problems of type T, keyed by a string that names every
// input that determines them ("m=256 n=256 k=256 dtype=0 seed=1").
template <class T>
class ProblemCache {
 public:
  static constexpr std::size_t kKeep = 4;

  // The cached value for `key`, or `make()`'s, cached. `make` runs under
  // the cache's lock: a second thread asking for the same key waits for
  // the first rather than building it again.
  template <class Make>
  std::shared_ptr<const T> get(const std::string& key, Make&& make) {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [k, v] : entries_)
      if (k == key) return v;
    auto value = std::make_shared<const T>(std::forward<Make>(make)());
    if (entries_.size() == kKeep) entries_.erase(entries_.begin());
    entries_.emplace_back(key, value);
    return value;
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<std::string, std::shared_ptr<const T>>> entries_;
};

// A problem's inputs and its reference(), computed on first use: a run
// that stops on a broken rule never needs it, and runs on other threads
// wait for the one computing it.
template <class Problem>
class SharedProblem {
 public:
  explicit SharedProblem(Problem p) : problem(std::move(p)) {}

  const Problem problem;

  const std::vector<float>& reference() const {
    std::call_once(once_, [this] { reference_ = problem.reference(); });
    return reference_;
  }

 private:
  mutable std::once_flag once_;
  mutable std::vector<float> reference_;
};

// One process-wide cache per problem type.
template <class T, class Make>
std::shared_ptr<const T> cached_problem(const std::string& key, Make&& make) {
  static ProblemCache<T> cache;
  return cache.get(key, std::forward<Make>(make));
}

}  // namespace wspipe::examples
