// The rescaling invariant in multiprecision (fc::SoftmaxState<mp_real>): any tiling, any chunking with
// merged states, merge associative and commutative with identity (-inf, 0, 0), FA-1 == FA-2; to 1e-30
// relative. RapidCheck generates the rows (scores in exact eighths, huge scores, masked keys) and
// shrinks a failure to the shortest row.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "properties/algebra_properties.h"

namespace {

void hold(const fc::PropertyResult& r) {
  if (r.failed()) RC_FAIL(r.message);
}

}  // namespace

RC_GTEST_PROP(algebra_property, tiling_mp, ()) { hold(fc::tiling_invariance_mp(*fc::gen_score_row())); }
RC_GTEST_PROP(algebra_property, chunk_merge_mp, ()) { hold(fc::chunk_merge_mp(*fc::gen_score_row())); }
RC_GTEST_PROP(algebra_property, merge_laws_mp, ()) { hold(fc::merge_laws_mp(*fc::gen_score_row())); }
RC_GTEST_PROP(algebra_property, fa1_equals_fa2_mp, ()) { hold(fc::fa1_equals_fa2_mp(*fc::gen_score_row())); }
