// The arena of registered memory: its pages are backed as alloc first hands
// them out, whole pages, each once (Note [Each rank backs its own registered
// memory], comm/segment_store.h), and a block whose pages cannot be backed
// leaves the arena as it was.
#include "artel/comm/arena.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "artel/comm/segment_layout.h"
#include "artel/core/error.h"

namespace artel::comm {
namespace {

using Backed = std::vector<std::pair<size_t, size_t>>;

TEST(Arena, BacksWholePagesAsItHandsThemOutAndNothingTwice) {
  constexpr size_t kBytes = 64 << 10;
  std::byte* memory = static_cast<std::byte*>(std::aligned_alloc(4096, kBytes));
  Backed backed;
  auto arena = std::make_shared<Arena>(nullptr, memory, kBytes, [&](size_t off, size_t len) { backed.push_back({off, len}); });
  EXPECT_TRUE(backed.empty()) << "nothing backed before anything is handed out";
  std::optional<Tensor> a = arena->alloc({100}, DType::f32);  // 400 bytes, a 448-byte block: the first page
  EXPECT_EQ(backed, (Backed{{0, 4096}}));
  Tensor b = arena->alloc({2048}, DType::f32);  // 8 KiB from 448 on: up to the third page's end
  EXPECT_EQ(backed, (Backed{{0, 4096}, {4096, 8192}}));
  a.reset();
  Tensor c = arena->alloc({64}, DType::f32);  // in a's freed block: backed already
  EXPECT_EQ(backed.size(), 2u);
  EXPECT_EQ(arena->backed(), 12288u);
  b = Tensor(), c = Tensor();
  arena.reset();
  std::free(memory);
}

TEST(Arena, ABlockWhosePagesCannotBeBackedLeavesTheArenaAsItWas) {
  constexpr size_t kBytes = 64 << 10;
  std::byte* memory = static_cast<std::byte*>(std::aligned_alloc(4096, kBytes));
  bool full = false;
  auto arena = std::make_shared<Arena>(nullptr, memory, kBytes, [&](size_t, size_t len) {
    if (full) throw Error("cannot back " + std::to_string(len) + " bytes: no space left");
  });
  Tensor a = arena->alloc({100}, DType::f32);
  full = true;
  EXPECT_THROW(arena->alloc({4096}, DType::f32), Error);
  EXPECT_EQ(arena->used(), 448u);
  EXPECT_EQ(arena->backed(), 4096u);
  full = false;
  Tensor b = arena->alloc({4096}, DType::f32);  // the same block, once it can be backed
  EXPECT_EQ(static_cast<const std::byte*>(b.raw()), memory + 448);
  EXPECT_EQ(arena->backed(), 20480u);
  a = Tensor(), b = Tensor();
  arena.reset();
  std::free(memory);
}

// Note [Registered memory is address space first] (comm/segment_layout.h).
TEST(Arena, ArenasOfAGroupTakeAtMostAnEighthOfAnAddressSpaceLimit) {
  constexpr size_t kGiB = size_t{1} << 30;
  EXPECT_EQ(arena_within_address_space(8 * kGiB, 4, 0), 8 * kGiB) << "no limit";
  EXPECT_EQ(arena_within_address_space(8 * kGiB, 2, 16 * kGiB), kGiB);
  EXPECT_EQ(arena_within_address_space(64 << 20, 2, 16 * kGiB), size_t{64} << 20) << "a small arena fits as it is";
  const size_t cut = arena_within_address_space(8 * kGiB, 3, 1200000000);
  EXPECT_EQ(cut % 4096, 0u);
  EXPECT_LE(3 * cut, size_t{1200000000} / 8);
  EXPECT_GT(3 * (cut + 4096), size_t{1200000000} / 8);
}

}  // namespace
}  // namespace artel::comm
