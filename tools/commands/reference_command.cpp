// flashcheck reference: the exact attention output of inputs given as NPY files, written as NPY, so
// that any framework can compare its kernel against it (docs/integration.md).
//
//   flashcheck reference --q Q.npy --k K.npy --v V.npy [--format F] [--scale S] [--mask M]
//                        [--key-lengths L.npy] [--precision float64|multiprecision] --out O.npy [--lse LSE.npy]
//
// O is written as float64 (B, Hq, Nq, dv), the LSE as float64 (B, Hq, Nq) in natural log (-inf for a row
// that sees no key). float64 is the certified float64 reference (its own error bound is printed);
// multiprecision is MPFR, rounded once to float64.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "reference/exact_attention_mp.h"
#include "tools/command_registry.h"
#include "tools/npy/attention_npy.h"
#include "tools/report/atomic_file.h"
#include "tools/report/resources.h"

namespace {

struct ReferenceOptions {
  fc::npy::InputOptions in;
  std::string precision = "float64";
  std::string out, lse;
};

int run_reference(const ReferenceOptions& o) {
  // Unwritable outputs are refused before any work.
  fc::report::check_can_create(o.out);
  if (!o.lse.empty()) fc::report::check_can_create(o.lse);
  const fc::npy::LoadedProblem lp = fc::npy::load_problem(o.in, std::nullopt, [](const fc::Problem& p) {
    fc::report::require_host_memory(fc::report::host_bytes_for_case(p), "these inputs (" + p.describe() + ")");
  });
  const fc::Problem& p = lp.problem;
  std::vector<double> out, lse;
  double o_bound = 0, lse_bound = 0;
  if (o.precision == "multiprecision") {
    const auto r = fc::exact_attention_mp(p, lp.inputs);
    out.reserve(r.o.size());
    for (const auto& x : r.o) out.push_back(fc::round_to(fc::Format::fp64, x));
    for (const auto& x : r.lse) lse.push_back(fc::round_to(fc::Format::fp64, x));
  } else {
    auto r = fc::exact_attention_f64(p, lp.inputs);
    out = std::move(r.out.o);
    lse = std::move(r.out.lse);
    for (double b : r.o_error_bound) o_bound = std::max(o_bound, b);
    for (double b : r.lse_error_bound) lse_bound = std::max(lse_bound, b);
  }
  // O and the LSE are written together, or neither (an unwritable --lse leaves no O behind).
  fc::report::StagedFiles files;
  files.stage(o.out, fc::npy::f8_bytes({p.batch, p.heads_q, p.n_q, p.dv}, out));
  if (!o.lse.empty()) files.stage(o.lse, fc::npy::f8_bytes({p.batch, p.heads_q, p.n_q}, lse));
  files.commit();
  std::cout << fmt::format("flashcheck reference: {} inputs ({}), {} -> {}{}\n", fc::spec(lp.format).name, p.describe(),
                           o.precision, o.out, o.lse.empty() ? "" : ", " + o.lse);
  if (o.precision == "float64")
    std::cout << fmt::format("  certified error of the float64 reference: |O| <= {:.3g}, |LSE| <= {:.3g}\n", o_bound,
                             lse_bound);
  return 0;
}

void add_reference_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<ReferenceOptions>();
  CLI::App* cmd = app.add_subcommand("reference", "Exact attention of NPY inputs, written as NPY (float64)");
  fc::npy::add_input_options(cmd, opts->in);
  cmd->add_option("--precision", opts->precision, "float64 (certified, fast) or multiprecision (MPFR)")
      ->check(CLI::IsMember({"float64", "multiprecision"}));
  cmd->add_option("--out", opts->out, "where to write O (float64, shape (B, Hq, Nq, dv))")->required();
  cmd->add_option("--lse", opts->lse, "where to write the LSE (float64, shape (B, Hq, Nq), natural log)");
  cmd->callback([opts, &exit_code] { exit_code = fc::cli::run_command("reference", [&] { return run_reference(*opts); }); });
}

}  // namespace

FC_REGISTER_COMMAND(reference, add_reference_command);
