// The rescaling invariant in exact (multiprecision) arithmetic: the yardstick the subject-level
// "rescaling" property is measured against. Absorbing the keys of a row in any tiling, or splitting
// them into chunks whose states are merged in any order, gives the same state to 1e-30 relative; merge
// is associative and commutative with identity (-inf, 0, 0). These hold for fc::SoftmaxState<mp_real>
// whatever subject is under test, so they run once (tests/properties/algebra_property_test.cpp).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <rapidcheck.h>

#include "properties/attention_properties.h"

namespace fc {

// One attention row: n scores (-inf = masked) and n x dv values, exact doubles; plus cut points.
struct ScoreRow {
  std::vector<double> scores;
  std::vector<double> values;
  int dv = 1;
  std::vector<int> cuts;  // sorted chunk boundaries in (0, n)
  int tile = 1;           // a tile width for the tiling check
  std::string describe() const;
};
std::ostream& operator<<(std::ostream& os, const ScoreRow& r);

rc::Gen<ScoreRow> gen_score_row();

PropertyResult tiling_invariance_mp(const ScoreRow& r);  // any tile width == one pass
PropertyResult chunk_merge_mp(const ScoreRow& r);        // chunks merged left-to-right and as a tree == one pass
PropertyResult merge_laws_mp(const ScoreRow& r);         // associativity, commutativity, identity
PropertyResult fa1_equals_fa2_mp(const ScoreRow& r);     // the two normalisation forms, exactly

}  // namespace fc
