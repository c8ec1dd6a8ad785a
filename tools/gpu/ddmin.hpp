// ddmin (Zeller and Hildebrandt's delta debugging, "Simplifying and
// Isolating Failure-Inducing Input"): a 1-minimal sub-list of a failing
// list, each item removed alone leaving a list that no longer fails. The
// silicon harness's `explore` shrinks a delay configuration's sites with it
// (docs/delays.md). Host C++ with no CUDA: the CPU tests run it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace wspipe::gpu {

// `fails(list)` must be true for `items`; the caller has seen it false for
// the empty list (ddmin never asks for it). Returns a sub-list (in the
// items' order) on which `fails` was true and from which removing any one
// item made it false; `tests` (if given) gets how many times `fails` ran.
// Partitions into n chunks (from 2): a failing chunk becomes the list (n
// back to 2), else a failing complement (n - 1), else n doubles until the
// chunks are single items.
template <class T, class Fails>
std::vector<T> ddmin(std::vector<T> items, Fails&& fails, std::size_t* tests = nullptr) {
  std::size_t n = 2, ran = 0;
  const auto test = [&](const std::vector<T>& v) {
    ++ran;
    return fails(v);
  };
  while (items.size() >= 2) {
    n = std::min(n, items.size());
    std::vector<std::vector<T>> chunks(n);
    for (std::size_t i = 0; i < items.size(); ++i) chunks[i * n / items.size()].push_back(items[i]);
    bool reduced = false;
    for (std::size_t c = 0; c < n && !reduced; ++c) {
      if (test(chunks[c])) {
        items = chunks[c];
        n = 2;
        reduced = true;
      }
    }
    // With two chunks each complement is the other chunk, tested already.
    for (std::size_t c = 0; c < n && !reduced && n > 2; ++c) {
      std::vector<T> rest;
      for (std::size_t d = 0; d < n; ++d) {
        if (d != c) rest.insert(rest.end(), chunks[d].begin(), chunks[d].end());
      }
      if (test(rest)) {
        items = std::move(rest);
        n = std::max<std::size_t>(n - 1, 2);
        reduced = true;
      }
    }
    if (reduced) continue;
    if (n >= items.size()) break;
    n = std::min(2 * n, items.size());
  }
  if (tests != nullptr) *tests = ran;
  return items;
}

}  // namespace wspipe::gpu
