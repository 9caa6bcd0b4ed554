// Kernel v2's order of work tiles (kernels/work_tile_order.h), on the host: every order is a bijection of
// the ids onto (row block, head); with sections of one head the row block is the fastest index; with larger
// sections each section's heads are contiguous and all of them have row block r drawn before any has r + 1;
// a section always divides the heads.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/work_tile_order.h"

namespace {

using fc::tiles::work_tile_at;
using fc::tiles::work_tile_section;

struct Shape {
  unsigned rows, heads, section;
};

TEST(WorkTileOrder, EveryOrderDrawsEachTileOnce) {
  for (const Shape s : {Shape{4, 1024, 1}, Shape{4, 1024, 256}, Shape{32, 32, 8}, Shape{32, 30, 6}, Shape{7, 5, 1},
                        Shape{7, 5, 5}, Shape{7, 6, 3}, Shape{1, 9, 3}, Shape{128, 16, 4}, Shape{3, 1, 1}}) {
    std::vector<int> seen(s.rows * s.heads, 0);
    for (unsigned id = 0; id < s.rows * s.heads; ++id) {
      const auto at = work_tile_at(id, s.rows, s.section);
      ASSERT_LT(at.row_block, s.rows) << id;
      ASSERT_LT(at.head, s.heads) << id;
      ++seen[at.head * s.rows + at.row_block];
    }
    for (int n : seen) ASSERT_EQ(n, 1) << s.rows << " x " << s.heads << ", section " << s.section;
  }
}

TEST(WorkTileOrder, WithoutSectionsTheRowBlockIsFastest) {
  const unsigned rows = 6, heads = 5;
  for (unsigned id = 0; id < rows * heads; ++id) {
    const auto at = work_tile_at(id, rows, 1);
    EXPECT_EQ(at.row_block, id % rows);
    EXPECT_EQ(at.head, id / rows);
  }
}

TEST(WorkTileOrder, EachSectionDrawsEveryHeadsLongestTileFirst) {
  for (const Shape s : {Shape{32, 30, 6}, Shape{7, 6, 3}, Shape{128, 16, 4}, Shape{4, 1024, 256}}) {
    unsigned prev_first = 0, prev_rb = 0;
    for (unsigned id = 0; id < s.rows * s.heads; ++id) {
      const auto at = work_tile_at(id, s.rows, s.section);
      const unsigned first = at.head / s.section * s.section;  // the section's first head
      EXPECT_EQ(first, id / (s.section * s.rows) * s.section) << "sections are contiguous runs of ids";
      if (id > 0 && first == prev_first) {
        EXPECT_GE(at.row_block, prev_rb) << "row block " << id;
      }
      prev_first = first;
      prev_rb = at.row_block;
    }
    // The last tile drawn is a last row block (the shortest under a causal mask).
    EXPECT_EQ(work_tile_at(s.rows * s.heads - 1, s.rows, s.section).row_block, s.rows - 1);
  }
}

TEST(WorkTileOrder, SectionsHoldWhatFitsInL2) {
  EXPECT_EQ(work_tile_section(false, 4096, 256, 32), 1);
  EXPECT_EQ(work_tile_section(true, 4096, 256, 32), 8);      // 4 MiB of K and V a head
  EXPECT_EQ(work_tile_section(true, 16384, 128, 16), 4);     // 8 MiB
  EXPECT_EQ(work_tile_section(true, 512, 64, 1024), 256);    // 128 KiB
  EXPECT_EQ(work_tile_section(true, 512, 64, 100), 100);     // never more than there are
  EXPECT_EQ(work_tile_section(true, 4096, 256, 30), 6);      // the largest divisor of the heads within 8
  EXPECT_EQ(work_tile_section(true, 4096, 256, 31), 1);      // a prime count: the row block fastest
  EXPECT_EQ(work_tile_section(true, 1 << 20, 256, 4), 1);    // one head's K and V beyond the budget
  EXPECT_EQ(work_tile_section(true, 0, 64, 7), 7);           // no keys
  for (long long heads = 1; heads <= 300; ++heads)
    for (long long n_k : {512ll, 4096ll, 16384ll, 131072ll})
      EXPECT_EQ(heads % work_tile_section(true, n_k, 128, heads), 0) << heads << " heads, " << n_k << " keys";
}

}  // namespace
