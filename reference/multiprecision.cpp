#include "reference/multiprecision.h"

#include <cmath>
#include <limits>

namespace fc {

double round_to(Format f, const mp_real& x, Overflow overflow) {
  const FormatSpec& s = spec(f);
  mpfr_srcptr src = x.backend().data();
  if (mpfr_nan_p(src) || mpfr_inf_p(src) || mpfr_zero_p(src)) return round_to(f, mpfr_get_d(src, MPFR_RNDN), overflow);
  // mpfr_get_exp gives e with x = 0.1xxx * 2^e, so the leading bit's exponent is e - 1.
  const long lead = mpfr_get_exp(src) - 1;
  const long quantum_exp = std::max<long>(lead, s.emin) - (s.precision - 1);
  mpfr_t scaled;
  mpfr_init2(scaled, mpfr_get_prec(src));
  mpfr_mul_2si(scaled, src, -quantum_exp, MPFR_RNDN);  // exact: power-of-two scaling
  mpfr_rint(scaled, scaled, MPFR_RNDN);                // the single rounding, ties to even
  mpfr_mul_2si(scaled, scaled, quantum_exp, MPFR_RNDN);
  // The rounded value has at most p <= 53 significant bits (or is 2^(emax+1) on overflow), so this
  // conversion to double is exact; round_to(double) then only applies the overflow rule.
  const double r = mpfr_get_d(scaled, MPFR_RNDN);
  mpfr_clear(scaled);
  return round_to(f, r, overflow);
}

}  // namespace fc
