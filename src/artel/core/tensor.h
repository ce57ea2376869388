// Tensor: a contiguous, row-major block of elements with a shape and a dtype.
//
// Storage is 64-byte aligned and shared: views along the first dimension
// (micro-batches, shards) and reshapes are free and alias their source.
// Memory can also come from outside (Storage::wrap), e.g. a communication
// backend's registered shared memory, so collectives on it need no copies.
//
//   Tensor x = Tensor::zeros({B, T, C});       // f32 by default
//   Tensor half = x.slice0(0, B / 2);          // (B/2, T, C) view
//   float* p = x.data<float>();
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "artel/core/dtype.h"
#include "artel/core/error.h"

namespace artel {

using Shape = std::vector<int64_t>;

std::string shape_str(const Shape& s);
int64_t shape_numel(const Shape& s);

// Bytes of freed large tensor buffers kept for reuse (Note [Large buffers],
// tensor.cpp): resident, though no tensor holds them.
size_t kept_large_buffer_bytes();

// Freed buffers kept for the next request of the same size. Memory that
// comes and goes in large pieces every step (ZeRO-3's gathered units) then
// reuses the same bytes: glibc would keep a freed 50 MiB block inside its
// heap, split it for smaller tensors, and grow the heap for the next 50 MiB
// (a 48-layer GPT at --zero 3 reached 4.5 GiB resident for 2.6 GiB of tensors).
class BufferCache {
 public:
  explicit BufferCache(size_t max_bytes) : max_bytes_(max_bytes) {}
  ~BufferCache();
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;

  std::byte* take(size_t nbytes);           // a kept buffer of nbytes, or a fresh mapping (page-aligned)
  void give(std::byte* p, size_t nbytes);   // kept while the cache holds under max_bytes, else freed

 private:
  size_t max_bytes_, held_ = 0;
  std::vector<std::pair<size_t, std::byte*>> kept_;  // (bytes, buffer)
};

// Raw bytes, 64-byte aligned. Owns them unless built by wrap().
class Storage {
 public:
  static std::shared_ptr<Storage> allocate(size_t nbytes);
  // Memory owned elsewhere; `release` (may be empty) runs when the last user lets go.
  static std::shared_ptr<Storage> wrap(void* data, size_t nbytes, std::function<void()> release);
  // Bytes that come and go while the Storage stays (FSDP's gathered
  // parameters; PyTorch's storage().resize_(0)): made without bytes; every
  // view of it, and every tensor a graph saved, keeps this Storage and reads
  // the bytes again once reacquire()d. Its owner accounts for them: they are
  // not in live_tensor_bytes(). With a cache, the bytes come from and go back to it.
  static std::shared_ptr<Storage> releasable(size_t nbytes, std::shared_ptr<BufferCache> cache = nullptr);
  void reacquire();  // takes fresh (uninitialised) bytes if it has none
  void release();    // gives the bytes back; data() is null until reacquire()
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  std::byte* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

 private:
  Storage(std::byte* d, size_t n, std::function<void()> r) : data_(d), nbytes_(n), release_(std::move(r)) {}
  std::byte* data_;
  size_t nbytes_;
  std::function<void()> release_;
  bool releasable_ = false;
  std::shared_ptr<BufferCache> cache_;  // releasable only: where the bytes come from and go
};

class Tensor {
 public:
  Tensor() = default;  // undefined: holds nothing

  static Tensor empty(const Shape& shape, DType dtype = DType::f32);  // uninitialised
  static Tensor zeros(const Shape& shape, DType dtype = DType::f32);
  static Tensor full(const Shape& shape, float value);
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);
  static Tensor wrap(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype, size_t offset_bytes = 0);

  bool defined() const { return storage_ != nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t numel() const { return numel_; }
  DType dtype() const { return dtype_; }
  size_t nbytes() const { return static_cast<size_t>(numel_) * dtype_size(dtype_); }

  template <class T> T* data() {
    check_dtype(dtype_of<T>());
    return reinterpret_cast<T*>(raw());
  }
  template <class T> const T* data() const {
    check_dtype(dtype_of<T>());
    return reinterpret_cast<const T*>(raw());
  }
  void* raw() const { return storage_ ? storage_->data() + offset_ : nullptr; }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  size_t offset_bytes() const { return offset_; }

  // Rows [begin, end) of the first dimension; shares storage.
  Tensor slice0(int64_t begin, int64_t end) const;
  // Same elements, new shape (one entry may be -1); shares storage.
  Tensor view(const Shape& shape) const;
  // A new tensor with its own storage and the same contents.
  Tensor clone() const;
  void copy_from(const Tensor& src);  // same numel and dtype
  void fill(float value);             // f32 only
  void zero();
  float item() const;  // a one-element f32 tensor's value
  std::vector<float> to_vector() const;
  bool same_storage(const Tensor& other) const { return storage_ == other.storage_; }

 private:
  void check_dtype(DType want) const;
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  Shape shape_;
  int64_t numel_ = 0;
  DType dtype_ = DType::f32;
};

// Element i of any dtype as a double, and back (rounding to the dtype). For
// checks and tests, not hot loops.
double element(const Tensor& t, int64_t i);
void set_element(Tensor& t, int64_t i, double v);

}  // namespace artel
