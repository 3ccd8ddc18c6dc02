// Error words read back without waiting (EngineOptions.deferred_errors): after a run's launches,
// its words are copied into page-locked host memory on the run's stream, with an event behind
// the copy; a later call takes the words of every copy that has completed. A few slots are
// enough: a slot is reused once its copy is read, and when all are in flight the oldest is
// waited for (the readback never grows without bound).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace kiln {

class ErrorReadback {
 public:
  explicit ErrorReadback(size_t bytes) : bytes_(bytes) {}  // an executor's error words
  ~ErrorReadback();  // waits for copies in flight: their host memory is freed here
  ErrorReadback(const ErrorReadback&) = delete;
  ErrorReadback& operator=(const ErrorReadback&) = delete;

  // Queues the copy of the error words at `words` on `stream`. Needs the context entered.
  // Returns the words of a copy it had to wait for (all slots in flight), else empty.
  std::vector<uint32_t> queue(uint64_t words, void* stream);
  // The words of every completed copy, OR-ed (empty when none completed or none was queued);
  // `wait`: every queued copy first completes. Needs the context entered.
  std::vector<uint32_t> take(bool wait);

 private:
  static constexpr size_t kSlots = 4;
  struct Slot {
    void* event = nullptr;
    uint32_t* host = nullptr;  // bytes_ of page-locked memory
    uint64_t order = 0;
    bool busy = false;
  };
  void merge(const Slot& s, std::vector<uint32_t>* out) const;
  const size_t bytes_;
  std::mutex mu_;
  std::vector<Slot> slots_;
  uint64_t next_order_ = 0;
};

}  // namespace kiln
