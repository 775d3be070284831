// Debug detections: a double, foreign or interior free aborts with a message naming the pool.
// BlockPool checks are a per-pool option, so they are tested in every build; the shared pools'
// checks exist in AK_DEBUG builds only (the ASan/UBSan and TSan variants of `make test`).
#include <gtest/gtest.h>

#include <thread>

#include "allockit/object_pool.hpp"
#include "allockit/pool.hpp"

namespace {
ak::BlockPoolOptions checked(const char* name) {
  ak::BlockPoolOptions o;
  o.name = name;
  o.checked = true;
  return o;
}
}  // namespace

TEST(BlockPoolDeathTest, DoubleFree) {
  ak::BlockPool pool(32, 8, checked("particles"));
  void* p = pool.allocate();
  pool.deallocate(p);
  EXPECT_DEATH(pool.deallocate(p), "double free of 0x[0-9a-f]+ in pool 'particles'");
}

TEST(BlockPoolDeathTest, ForeignPointer) {
  ak::BlockPool pool(32, 8, checked("particles"));
  pool.allocate();
  alignas(8) static char outside[64];
  EXPECT_DEATH(pool.deallocate(outside), "not owned by the pool.*'particles'");
  ak::BlockPool other(32, 8, checked("other"));
  void* q = other.allocate();
  EXPECT_DEATH(pool.deallocate(q), "not owned by the pool.*'particles'");
}

TEST(BlockPoolDeathTest, InteriorPointer) {
  ak::BlockPool pool(32, 8, checked("particles"));
  auto* p = static_cast<char*>(pool.allocate());
  EXPECT_DEATH(pool.deallocate(p + 8), "interior pointer.*'particles'");
}

TEST(BlockPoolDeathTest, NeverAllocatedBlockInsideAPage) {
  ak::BlockPool pool(32, 8, checked("particles"));
  auto* p = static_cast<char*>(pool.allocate());
  pool.allocate();
  pool.deallocate(p);
  // p + 32 * 1 is live, p is free: freeing p again is a double free even though the page is ours.
  EXPECT_DEATH(pool.deallocate(p), "double free");
}

TEST(BlockPoolDeathTest, UncheckedPoolStillCatchesMisalignedFree) {
  ak::BlockPoolOptions o;
  o.checked = false;
  o.name = "fast";
  ak::BlockPool pool(32, 8, o);
  auto* p = static_cast<char*>(pool.allocate());
  EXPECT_DEATH(pool.deallocate(p + 3), "misaligned free.*'fast'");
}

TEST(ObjectPoolDeathTest, DestroyOfForeignObjectIsCaughtBeforeItsDestructorRuns) {
  ak::CheckedObjectPool<int> pool(checked("ints"));
  int* p = pool.create(1);
  ak::CheckedObjectPool<int> other(checked("other-ints"));
  EXPECT_DEATH(other.destroy(p), "not owned by the pool.*'other-ints'");
  pool.destroy(p);
  EXPECT_DEATH(pool.destroy(p), "double free.*'ints'");
}

#if defined(AK_DEBUG) && AK_DEBUG
TEST(SharedPoolDeathTest, DoubleFree) {
  void* p = ak::pool_allocate(48, 8);
  ak::pool_deallocate(p, 48, 8);
  EXPECT_DEATH(ak::pool_deallocate(p, 48, 8), "double free.* of 0x[0-9a-f]+ in shared pool");
}

TEST(SharedPoolDeathTest, InteriorPointer) {
  auto* p = static_cast<char*>(ak::pool_allocate(48, 8));
  EXPECT_DEATH(ak::pool_deallocate(p + 16, 48, 8), "interior pointer.*shared pool");
  ak::pool_deallocate(p, 48, 8);
}

TEST(SharedPoolDeathTest, ForeignPointer) {
  alignas(16) static char outside[64];
  EXPECT_DEATH(ak::pool_deallocate(outside, 48, 8), "shared pools never allocated");
}

TEST(SharedPoolDeathTest, CrossThreadDoubleFree) {
  void* p = ak::pool_allocate(96, 8);
  std::thread([&] { ak::pool_deallocate(p, 96, 8); }).join();
  EXPECT_DEATH(ak::pool_deallocate(p, 96, 8), "double free");
}

TEST(ObjectPoolLeakReport, DebugBuildsReportLiveObjects) {
  testing::internal::CaptureStderr();
  {
    ak::ObjectPool<int> pool(checked("leaky"));
    pool.create(1);
    pool.create(2);
  }
  EXPECT_NE(testing::internal::GetCapturedStderr().find("pool 'leaky' destroyed with 2 live"),
            std::string::npos);
}
#endif
