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

void ErrorReadback::merge(const Slot& s, std::vector<uint32_t>* out) {
  const size_t n = s.used / 4;
  if (out->size() < n) out->resize(n, 0);
  for (size_t i = 0; i < n; ++i) (*out)[i] |= s.host[i];
}

std::vector<uint32_t> ErrorReadback::queue(uint64_t words, size_t bytes, void* stream) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint32_t> waited;
  Slot* slot = nullptr;
  for (Slot& s : slots_)
    if (!s.busy && s.bytes >= bytes) slot = &s;
  if (!slot && slots_.size() < kSlots) {
    slots_.emplace_back();
    slot = &slots_.back();
    slot->event = cuda::event_create();
  }
  if (!slot) {  // a free slot too small (grown below), else wait for the oldest, keep its words
    slot = &*std::min_element(slots_.begin(), slots_.end(), [](const Slot& a, const Slot& b) {
      return a.busy != b.busy ? !a.busy : a.order < b.order;
    });
    if (slot->busy) {
      cuda::event_synchronize(slot->event);
      merge(*slot, &waited);
      slot->busy = false;
    }
  }
  if (slot->bytes < bytes) {
    cuda::host_free_pinned(slot->host);
    slot->host = nullptr;
    slot->bytes = 0;
    slot->host = static_cast<uint32_t*>(cuda::host_alloc_pinned(bytes));
    slot->bytes = bytes;
  }
  cuda::memcpy_dtoh_async(slot->host, words, bytes, stream);
  cuda::event_record(slot->event, stream);
  slot->used = bytes;
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
