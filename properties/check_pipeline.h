// The one check pipeline: run a subject on a problem, compute the exact reference, derive the error
// budget for the plan the subject actually ran, and judge its output against it. The property suite,
// the fuzzer, `flashcheck report`, `check` and `compare` all call this, so a case gets the same bound
// and the same verdict whichever command checks it (tests/cli/same_case_test.cpp shows it).
//
// The budget depends on choices the subject makes (the softmax step width, the split count, how l is
// summed, how products are accumulated). The subject reports them (SubjectOutput::plan); a choice it
// does not report is taken from the request where the request binds it, and otherwise budgeted on its
// conservative side: any step width, possibly split, both l conventions.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>

#include "kernels/subject.h"
#include "reference/error_budget.h"

namespace fc {

// What a budget is derived for: the run options with every choice resolved (or marked unknown).
struct BudgetBasis {
  RunOptions options;  // recipe, descales, normalisation as asked; num_splits (0 = unknown, possibly
                       // split), l_from_fp32_p, two_level_accum and accumulation as they ran
  int tile_n = 0;      // the softmax step width the budget assumes (0 = unknown: any step width)
  bool both_l_conventions = false;  // l's convention unknown: the elementwise max over both
  bool both_accumulations = false;  // the accumulation unknown: the elementwise max over both models
  std::string describe() const;     // e.g. "Bc=64, 1 split, l from the rounded P, tensor-core accumulation"
  bool operator==(const BudgetBasis&) const;
};

// The basis for a run: what the subject reported (`ran`), else what the request binds (an explicit tile
// of a subject that steps by its tile, an explicit split count, a convention flag the subject accepted),
// else the conservative side. Neither l convention nor either accumulation model bounds the other (the
// tensor-core bound falls below the sequential one for some tf32 inputs), so an unknown one is budgeted
// for both.
BudgetBasis budget_basis(const Capabilities& caps, const RunOptions& asked, const RunPlan& ran);

// The error budget for a basis: one error_budget, or the elementwise max over the l conventions and
// accumulation models it leaves open.
ErrorBudget budget_for(const Problem& p, const AttentionInputs& in, const BudgetBasis& basis, const Float64Attention& ref,
                       const BudgetTerms& terms = {});

struct Judgement {
  BudgetBasis basis;
  ErrorBudget budget;
  BudgetVerdict verdict;
};

// Judges an output that is already there (a subject's, or a candidate read from files by `compare`), by
// the process's oracle (properties/oracle.h): on the CPU against `ref`, or on the GPU, which computes
// its own reference with the same certificate.
Judgement judge_output(const Problem& p, const AttentionInputs& in, const RunOptions& asked, const Capabilities& caps,
                       const SubjectOutput& out, const Float64Attention& ref, size_t keep_worst = 8);

struct CheckSettings {
  size_t keep_worst = 8;            // worst elements kept in the verdict
  std::mutex* run_lock = nullptr;   // held around the subject's run (a GPU subject shared by threads)
};

struct CheckedRun {
  SubjectOutput out;
  Judgement judged;
};

// Runs the subject and checks its output's sizes. Throws SubjectRefused when the subject declines
// (outside its capabilities, or refused by the subject itself: a skip), SubjectError when it fails or
// returns outputs of the wrong size (a failed run, never a pass).
SubjectOutput run_subject(Subject& s, const Capabilities& caps, const Problem& p, const AttentionInputs& in,
                          const RunOptions& o, std::mutex* run_lock = nullptr);

// run_subject, then judge_output against `ref` (the caller's exact reference of (p, in)).
CheckedRun check_run(Subject& s, const Capabilities& caps, const Problem& p, const AttentionInputs& in,
                     const RunOptions& o, const Float64Attention& ref, const CheckSettings& settings = {});

}  // namespace fc
