// The multiprecision scalar of the exact reference: MPFR through Boost.Multiprecision.
//
// 50 decimal digits (166 bits) is more than the 113 the suite promises, so that a product of two
// doubles (106 bits) and a d-term sum of them lose nothing that matters, and MPFR's exp and log are
// correctly rounded at that precision.
#pragma once

#include <boost/multiprecision/mpfr.hpp>

#include "reference/formats.h"

namespace fc {

using mp_real = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<50>,
                                              boost::multiprecision::et_off>;

// One round-to-nearest-even rounding from the multiprecision value to f (not through double: a value
// between two doubles could otherwise be rounded twice).
double round_to(Format f, const mp_real& x, Overflow overflow = Overflow::ieee);

}  // namespace fc
