// The size-class table: every size maps to the smallest class that holds it, alignment is honoured
// and the fragmentation bound stated in size_class.hpp holds.
#include <gtest/gtest.h>

#include "core/core.hpp"

using namespace ak::detail;

TEST(SizeClass, ClassesAreIncreasing) {
  for (unsigned c = 1; c < kClassCount; ++c) EXPECT_LT(class_size(c - 1), class_size(c));
}

TEST(SizeClass, EverySizeGetsSmallestHoldingClass) {
  for (std::size_t size = 1; size <= kMaxPooledSize; ++size) {
    const unsigned c = class_of(size);
    ASSERT_LT(c, kClassCount) << size;
    ASSERT_GE(class_size(c), size) << size;
    if (c > 0) {
      ASSERT_LT(class_size(c - 1), size) << size;
    }
  }
}

TEST(SizeClass, FragmentationBound) {
  for (std::size_t size = 1; size <= kMaxPooledSize; ++size) {
    const std::size_t waste = class_size(class_of(size)) - size;
    if (size <= 128)
      ASSERT_LE(waste, 7u) << size;
    else
      ASSERT_LT(waste * 4, size) << size;  // below 25%
  }
}

// A power of two past 1 KiB plus a header of up to an eighth of it (a size prefix, a page's
// header) wastes at most an eighth: 1,032 bytes take 1,152, not 1,280.
TEST(SizeClass, PowerOfTwoAndAHeaderWasteAnEighthAtMost) {
  for (std::size_t base = kFivesFrom; base < kMaxPooledSize; base *= 2)
    for (std::size_t size = base + 1; size <= base + base / 8; ++size)
      ASSERT_LE((class_size(class_of(size)) - size) * 8, size) << size;
  EXPECT_EQ(class_size(class_of(1032)), 1152u);
  EXPECT_EQ(class_size(class_of(4096 + 272)), 4608u);
}

TEST(SizeClass, MediumClassesAreFourPerDoublingInPages) {
  for (unsigned c = kClassCount; c < kHeapClasses; ++c) {
    EXPECT_EQ(class_size(c) % 4096, 0u) << c;
    EXPECT_GT(class_size(c), class_size(c - 1)) << c;
  }
  for (std::size_t size = kMaxPooledSize + 1; size <= kMaxMediumSize; size += 512) {
    const unsigned c = class_of(size);
    ASSERT_GE(class_size(c), size) << size;
    ASSERT_LT(class_size(c - 1), size) << size;
  }
}

TEST(SizeClass, AlignedRequestsLandOnAlignedClasses) {
  for (std::size_t align = 1; align <= kMaxPooledAlign; align *= 2)
    for (std::size_t size = 1; size <= kMaxPooledSize; size += 7) {
      const unsigned c = class_for(size, align);
      ASSERT_NE(c, kNoClass) << size << " " << align;  // every alignment the pools serve
      ASSERT_EQ(class_size(c) % align, 0u) << size << " " << align;
      ASSERT_GE(class_align(c), align) << size << " " << align;  // what its blocks are aligned to
      ASSERT_GE(class_size(c), size);
      for (unsigned d = 0; d < c; ++d)  // and the smallest such class
        ASSERT_TRUE(class_size(d) < size || class_size(d) % align != 0) << size << " " << d;
    }
}

TEST(SizeClass, OutOfRangeRequestsHaveNoClass) {
  EXPECT_EQ(class_for(kMaxPooledSize + 1, 8), kNoClass);
  EXPECT_EQ(class_for(8, 2 * kMaxPooledAlign), kNoClass);
  EXPECT_EQ(class_size(class_for(8, 128)), 128u);  // an over-aligned small request is pooled
  EXPECT_EQ(class_for(0, 8), class_of(1));
}

TEST(Bits, Helpers) {
  EXPECT_TRUE(is_pow2(1));
  EXPECT_FALSE(is_pow2(0));
  EXPECT_FALSE(is_pow2(12));
  EXPECT_EQ(align_up(13, 8), 16u);
  EXPECT_EQ(natural_alignment(24), 8u);
  std::size_t out = 0;
  EXPECT_FALSE(mul_fits(std::size_t(1) << 40, std::size_t(1) << 40, &out));
  EXPECT_TRUE(mul_fits(3, 5, &out));
  EXPECT_EQ(out, 15u);
}
