// flashcheck's libraries from a downstream test: load our plugin through flashcheck's subject registry,
// run one problem, and hold it to the error budget against the exact reference.
#include <cstdio>
#include <string>

#include "kernels/subject_registry.h"
#include "reference/error_budget.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  auto kernel = fc::make_subject(std::string("plugin:") + argv[1]);
  fc::Problem p;
  p.n_q = 37;
  p.n_k = 53;
  p.d = p.dv = 16;
  p.window = fc::Window::causal(fc::Align::bottom_right);
  fc::AttentionInputs in;
  in.q.resize(p.q_size());
  in.k.resize(p.k_size());
  in.v.resize(p.v_size());
  unsigned x = 12345;
  for (auto* t : {&in.q, &in.k, &in.v})
    for (double& e : *t) e = fc::round_to(fc::Format::fp32, double(int((x = x * 1103515245u + 12345u) >> 16) % 2001 - 1000) / 500.0);
  fc::RunOptions o;
  o.recipe = fc::Recipe::fp32;
  const auto out = kernel->run(p, in, o);
  const auto ref = fc::exact_attention_f64(p, in);
  const auto budget = fc::error_budget(p, in, o, /*tile_n=*/1, ref);
  const auto v = fc::check_against_budget(p, out.o, out.lse, ref, budget, fc::Format::fp32);
  std::printf("%s: %zu elements, %zu violations, max error/bound %.3g\n", kernel->capabilities().name.c_str(),
              v.elements, v.violations, v.max_ratio);
  return v.violations == 0 ? 0 : 1;
}
