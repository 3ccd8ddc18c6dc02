#include "runtime/error_readback.hpp"

#include <algorithm>

#include "kiln/error.hpp"
#include "runtime/cuda_driver.hpp"

namespace kiln {

ErrorReadback::~ErrorReadback() {
  for (Slot& s : slots_) {
    try {
      if (s.busy) cuda::event_synchronize(s.event);
    } catch (const Error&) {
      // the context is gone (process exit): nothing is in flight any more
    }
    cuda::event_destroy(s.event);
    cuda::host_free_pinned(s.host);
  }
}

void ErrorReadback::merge(const Slot& s, std::vector<uint32_t>* out) const {
  out->resize(bytes_ / 4, 0);
  for (size_t i = 0; i < out->size(); ++i) (*out)[i] |= s.host[i];
}

std::vector<uint32_t> ErrorReadback::queue(uint64_t words, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint32_t> waited;
  auto free = std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return !s.busy; });
  Slot* slot = free != slots_.end() ? &*free : nullptr;
  if (!slot && slots_.size() < kSlots) {
    Slot fresh;
    fresh.event = cuda::event_create();
    try {
      fresh.host = static_cast<uint32_t*>(cuda::host_alloc_pinned(bytes_));
    } catch (...) {
      cuda::event_destroy(fresh.event);
      throw;
    }
    slot = &slots_.emplace_back(fresh);
  }
  if (!slot) {  // every slot in flight: wait for the oldest, keep its words
    slot = &*std::min_element(slots_.begin(), slots_.end(),
                              [](const Slot& a, const Slot& b) { return a.order < b.order; });
    cuda::event_synchronize(slot->event);
    merge(*slot, &waited);
  }
  cuda::memcpy_dtoh_async(slot->host, words, bytes_, stream);
  cuda::event_record(slot->event, stream);
  slot->order = next_order_++;
  slot->busy = true;
  return waited;
}

std::vector<uint32_t> ErrorReadback::take(bool wait) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint32_t> out;
  for (Slot& s : slots_) {
    if (!s.busy) continue;
    if (wait)
      cuda::event_synchronize(s.event);
    else if (!cuda::event_done(s.event))
      continue;
    merge(s, &out);
    s.busy = false;
  }
  return out;
}

}  // namespace kiln
