#include "artel/core/tensor.h"

#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "artel/core/memory_limit.h"
#include "artel/core/memory_stats.h"

namespace artel {

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    ARTEL_CHECK(d >= 0, "negative dimension in shape ", shape_str(s));
    n *= d;
  }
  return n;
}

constexpr size_t kAlignment = 64;

// Note [The program's allocator]
// A training step frees and allocates the same activations every step, at
// sizes that differ between forward and backward. glibc's malloc splits the
// freed blocks for other sizes and grows its heap for the next ones: a 50M
// GPT with full recomputation on one worker held 180-286 MiB beyond its
// tensors at its peak (runs differ), a heap 2.8 times its step's
// activations that still grew at step 8. tcmalloc's page heap reuses freed
// spans whole: 43-45 MiB. Its step time, one thread, medians of interleaved
// runs (AMD Zen 5): W2 2.7% faster, GPT-2 fp32 0.8% faster, GPT-2 bf16 1.4%
// slower. What a worker holds is then its tensors and a runtime the planner
// can measure (docs/PLAN.md).
// So the artel program links tcmalloc (CMakeLists.txt). The library does not
// choose for a program built on it, and tunes glibc's malloc for one that
// runs on it, as follows; under tcmalloc these calls do nothing.
//
// Below kLargeBuffer, tensors live on the heap. glibc would serve buffers over
// 128 KiB with fresh mmap()s, paying page faults and zeroing on every step;
// keeping them on the heap reuses warm pages. Nor is the heap's top ever
// trimmed (-1): it would be given back after a step only to be faulted in and
// zeroed again in the next. Like a caching allocator, the heap keeps its peak;
// --memory-per-worker trims it when close to its limit (memory_limit.cpp), and
// a training run when its steps are over (release_freed_memory).
[[maybe_unused]] const bool kAllocatorTuned = [] {
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, -1);
  return true;
}();

namespace {

[[noreturn]] void out_of_memory(size_t nbytes) {
  char what[256];
  std::snprintf(what, sizeof what, "out of memory: allocating %.2f MiB for %s with %.2f MiB of tensors held",
                static_cast<double>(nbytes) / (1 << 20), allocation_purpose(),
                static_cast<double>(live_tensor_bytes()) / (1 << 20));
  throw Error(what, out_of_memory_hint());
}

// A fresh private mapping of nbytes (page-aligned), or nullptr when the kernel refuses.
std::byte* map_anonymous(size_t nbytes) {
  void* p = ::mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<std::byte*>(p);
}

// Note [Large buffers]
// Large buffers are freed and requested again every step at the same sizes
// (GPT-2's 206 MB logits and their gradient). On the heap a freed one is
// split for smaller tensors and the heap grows for the next: a 2-worker
// GPT-2 run grew each worker's heap 196 MiB at a time through its first ten
// steps, faulting in and zeroing fresh pages for 250-500 ms each time, and
// the other worker waited. So a buffer of kLargeBuffer bytes or more is a
// mapping of its own, and a freed one is kept for the next request of the
// same size. The cache never takes the large memory resident (in use + kept)
// past the most that was ever in use at once: a request it cannot serve first
// gives back the oldest kept buffers. Close to --memory-per-worker every kept
// buffer is given back (set_kept_memory_release), and so is every kept buffer
// when a training run's steps are over (release_freed_memory). The price: a kept buffer no
// longer serves smaller tensors, so the peak resident can grow by about one of
// them (GPT-2 124M on 4 x 256 tokens, 12 steps: 3.15 -> 3.33 GiB).
constexpr size_t kLargeBuffer = size_t{16} << 20;

class LargeBuffers {
 public:
  LargeBuffers() { set_kept_memory_release([] { instance().release_kept(); }); }

  static LargeBuffers& instance() {
    static auto* buffers = new LargeBuffers;  // never destroyed: tensors may be freed during exit
    return *buffers;
  }

  std::byte* take(size_t nbytes) {
    {
      std::lock_guard lock(mu_);
      for (size_t i = kept_.size(); i-- > 0;)  // the most recently freed first: its pages are the warmest
        if (kept_[i].first == nbytes) {
          std::byte* p = kept_[i].second;
          kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(i));
          held_ -= nbytes;
          in_use_ += nbytes;
          return p;
        }
      peak_in_use_ = std::max(peak_in_use_, in_use_ + nbytes);
      while (!kept_.empty() && held_ + in_use_ + nbytes > peak_in_use_) {
        ::munmap(kept_.front().second, kept_.front().first);
        held_ -= kept_.front().first;
        kept_.erase(kept_.begin());
      }
    }
    check_memory_limit(nbytes);  // --memory-per-worker: fail here, not by the kernel's OOM kill
    std::byte* p = map_anonymous(nbytes);
    if (!p) {
      release_kept();
      p = map_anonymous(nbytes);
      if (!p) out_of_memory(nbytes);
    }
    // Transparent huge pages where the kernel gives them on request (THP
    // "madvise"): fewer TLB misses in the streaming passes over these buffers.
    // GPT-2 bf16 at 1 thread: 1990-2009 -> 1860-1911 ms/step; fp32 and the
    // peak resident unchanged. Advice only: a kernel without THP ignores it.
    ::madvise(p, nbytes, MADV_HUGEPAGE);
    std::lock_guard lock(mu_);
    in_use_ += nbytes;
    return p;
  }

  void give(std::byte* p, size_t nbytes) {
    std::lock_guard lock(mu_);
    in_use_ -= nbytes;
    kept_.emplace_back(nbytes, p);
    held_ += nbytes;
  }

  void release_kept() {
    std::lock_guard lock(mu_);
    for (auto& [n, p] : kept_) ::munmap(p, n);
    kept_.clear();
    held_ = 0;
  }

  size_t held() {
    std::lock_guard lock(mu_);
    return held_;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<size_t, std::byte*>> kept_;  // (bytes, buffer), oldest first
  size_t held_ = 0, in_use_ = 0, peak_in_use_ = 0;
};

// 64-byte aligned bytes, or the one-line out-of-memory error.
void* aligned_bytes(size_t nbytes) {
  check_memory_limit(nbytes);  // --memory-per-worker: fail here, not by the kernel's OOM kill
  size_t rounded = (nbytes + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded ? rounded : kAlignment);
  if (!p) out_of_memory(nbytes);
  return p;
}

}  // namespace

size_t kept_large_buffer_bytes() { return LargeBuffers::instance().held(); }

std::shared_ptr<Storage> Storage::allocate(size_t nbytes) {
  // Counted here and in the release, so wrapped (foreign) memory never is.
  const auto counted = static_cast<int64_t>(nbytes);
  if (nbytes >= kLargeBuffer) {
    std::byte* p = LargeBuffers::instance().take(nbytes);
    detail::note_tensor_alloc(counted);
    return std::shared_ptr<Storage>(new Storage(p, nbytes, [p, nbytes, counted] {
      LargeBuffers::instance().give(p, nbytes);
      detail::note_tensor_free(counted);
    }));
  }
  void* p = aligned_bytes(nbytes);
  detail::note_tensor_alloc(counted);
  return std::shared_ptr<Storage>(new Storage(static_cast<std::byte*>(p), nbytes, [p, counted] {
    std::free(p);
    detail::note_tensor_free(counted);
  }));
}

std::shared_ptr<Storage> Storage::wrap(void* data, size_t nbytes, std::function<void()> release) {
  return std::shared_ptr<Storage>(new Storage(static_cast<std::byte*>(data), nbytes, std::move(release)));
}

std::shared_ptr<Storage> Storage::releasable(size_t nbytes, std::shared_ptr<BufferCache> cache) {
  std::shared_ptr<Storage> s(new Storage(nullptr, nbytes, {}));
  s->releasable_ = true;
  s->cache_ = std::move(cache);
  return s;
}

void Storage::reacquire() {
  ARTEL_CHECK(releasable_, "reacquire() of a storage that is not releasable");
  if (!data_) data_ = cache_ ? cache_->take(nbytes_) : static_cast<std::byte*>(aligned_bytes(nbytes_));
}

void Storage::release() {
  ARTEL_CHECK(releasable_, "release() of a storage that is not releasable");
  if (cache_ && data_) cache_->give(data_, nbytes_);
  else std::free(data_);
  data_ = nullptr;
}

Storage::~Storage() {
  if (releasable_) release();
  if (release_) release_();
}

// The cache's buffers are mappings of their own, outside malloc's heap, so
// one given back for good leaves no hole there (Note [Reused unit memory]).
BufferCache::~BufferCache() {
  for (auto& [n, p] : kept_) ::munmap(p, n);
}

std::byte* BufferCache::take(size_t nbytes) {
  for (size_t i = 0; i < kept_.size(); ++i)
    if (kept_[i].first == nbytes) {
      std::byte* p = kept_[i].second;
      kept_.erase(kept_.begin() + static_cast<std::ptrdiff_t>(i));
      held_ -= nbytes;
      return p;
    }
  check_memory_limit(nbytes);
  std::byte* p = map_anonymous(nbytes);
  if (!p) out_of_memory(nbytes);
  return p;
}

void BufferCache::give(std::byte* p, size_t nbytes) {
  if (held_ + nbytes > max_bytes_) {
    ::munmap(p, nbytes);
    return;
  }
  kept_.emplace_back(nbytes, p);
  held_ += nbytes;
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  int64_t n = shape_numel(shape);
  return wrap(Storage::allocate(static_cast<size_t>(n) * dtype_size(dtype)), shape, dtype, 0);
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  t.zero();
  return t;
}

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = empty(shape);
  t.fill(value);
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape) {
  Tensor t = empty(shape);
  ARTEL_CHECK(static_cast<int64_t>(values.size()) == t.numel(), "from_vector: ", values.size(),
              " values do not fill shape ", shape_str(shape));
  std::memcpy(t.raw(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::wrap(std::shared_ptr<Storage> storage, const Shape& shape, DType dtype, size_t offset_bytes) {
  Tensor t;
  t.numel_ = shape_numel(shape);
  ARTEL_CHECK(offset_bytes + static_cast<size_t>(t.numel_) * dtype_size(dtype) <= storage->nbytes(),
              "tensor of shape ", shape_str(shape), " does not fit its storage");
  t.storage_ = std::move(storage);
  t.offset_ = offset_bytes;
  t.shape_ = shape;
  t.dtype_ = dtype;
  return t;
}

int64_t Tensor::size(int64_t d) const {
  int64_t n = dim();
  if (d < 0) d += n;
  ARTEL_CHECK(d >= 0 && d < n, "dimension ", d, " out of range for shape ", shape_str(shape_));
  return shape_[static_cast<size_t>(d)];
}

Tensor Tensor::slice0(int64_t begin, int64_t end) const {
  ARTEL_CHECK(dim() >= 1, "slice0 of a scalar");
  ARTEL_CHECK(0 <= begin && begin <= end && end <= shape_[0], "slice0 [", begin, ", ", end,
              ") out of range for shape ", shape_str(shape_));
  Shape s = shape_;
  s[0] = end - begin;
  size_t row_bytes = shape_[0] ? nbytes() / static_cast<size_t>(shape_[0]) : 0;
  return wrap(storage_, s, dtype_, offset_ + static_cast<size_t>(begin) * row_bytes);
}

Tensor Tensor::view(const Shape& shape) const {
  Shape s = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      ARTEL_CHECK(infer < 0, "view: more than one -1 in ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    ARTEL_CHECK(known > 0 && numel_ % known == 0, "view: cannot infer ", shape_str(shape), " from ",
                shape_str(shape_));
    s[static_cast<size_t>(infer)] = numel_ / known;
  }
  ARTEL_CHECK(shape_numel(s) == numel_, "view: shape ", shape_str(shape), " does not match ", shape_str(shape_));
  return wrap(storage_, s, dtype_, offset_);
}

Tensor Tensor::clone() const {
  Tensor t = empty(shape_, dtype_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  ARTEL_CHECK(src.numel() == numel_ && src.dtype() == dtype_, "copy_from: ", shape_str(src.shape()), " ",
              dtype_name(src.dtype()), " into ", shape_str(shape_), " ", dtype_name(dtype_));
  if (nbytes() && raw() != src.raw()) std::memmove(raw(), src.raw(), nbytes());
}

void Tensor::fill(float value) {
  float* p = data<float>();
  for (int64_t i = 0; i < numel_; ++i) p[i] = value;
}

void Tensor::zero() {
  if (nbytes()) std::memset(raw(), 0, nbytes());
}

float Tensor::item() const {
  ARTEL_CHECK(numel_ == 1, "item() of a tensor with ", numel_, " elements");
  return data<float>()[0];
}

std::vector<float> Tensor::to_vector() const {
  const float* p = data<float>();
  return std::vector<float>(p, p + numel_);
}

void Tensor::check_dtype(DType want) const {
  ARTEL_CHECK(storage_, "use of an undefined tensor");
  ARTEL_CHECK(want == dtype_, "tensor holds ", dtype_name(dtype_), ", accessed as ", dtype_name(want));
}

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::f32: return t.data<float>()[i];
    case DType::f64: return t.data<double>()[i];
    case DType::i32: return t.data<int32_t>()[i];
    case DType::i64: return static_cast<double>(t.data<int64_t>()[i]);
    case DType::bf16: return static_cast<float>(t.data<bf16>()[i]);
  }
  return 0;
}

void set_element(Tensor& t, int64_t i, double v) {
  switch (t.dtype()) {
    case DType::f32: t.data<float>()[i] = static_cast<float>(v); return;
    case DType::f64: t.data<double>()[i] = v; return;
    case DType::i32: t.data<int32_t>()[i] = static_cast<int32_t>(v); return;
    case DType::i64: t.data<int64_t>()[i] = static_cast<int64_t>(v); return;
    case DType::bf16: t.data<bf16>()[i] = bf16(static_cast<float>(v)); return;
  }
}

}  // namespace artel
