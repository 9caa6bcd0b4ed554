// The subject interface: anything the suite can put under test. The CPU emulation, our CUDA kernel
// and external plugins all sit behind it, so properties, the fuzzer and reports are written once.
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/exact_attention.h"
#include "reference/problem.h"
#include "reference/recipe.h"

struct fc_plugin;  // include/flashcheck/plugin.h

namespace fc {

struct TileSize {
  int m = 0;  // Br
  int n = 0;  // Bc
  bool operator==(const TileSize&) const = default;
};

struct Capabilities {
  std::string name;
  std::vector<Recipe> recipes;
  std::vector<int> head_dims;   // empty: any d >= 1
  bool dv_may_differ = false;   // false: dv must equal d
  bool any_tile = false;        // true: any Br, Bc >= 1 (the emulation)
  std::vector<TileSize> tiles;  // otherwise the selectable set; empty = the default only
  std::vector<Recipe> tile_recipes;  // the recipes the set applies to; empty = every recipe
  bool causal = false;          // both alignments
  bool window = false;
  bool dense_mask = false;
  bool key_lengths = false;
  bool gqa = false;
  bool lse = false;
  bool split_kv = false;
  bool fa1 = false;             // FA-1 normalisation selectable
  bool l_from_fp32_p = false;   // the FA-2 convention selectable
  bool two_level_accum = false;
  bool subtile_steps = false;   // the online softmax may step in parts of a tile (FC_CAP_SUBTILE_STEPS)
  bool deliberate_bugs = false; // the emulation's switchable bugs (properties' teeth)
  bool concurrent_runs = false; // run() may be called from several threads at once on one instance
};

// Whether a subject offers its tile list (or any tile) for recipe r; otherwise r runs one tiling.
bool takes_tiles(const Capabilities& caps, Recipe r);

// Why a subject cannot run a (problem, options) pair; nullopt = supported. Properties skip such cases
// and count them, so a report can say what was skipped.
std::optional<std::string> unsupported(const Capabilities& caps, const Problem& p, const RunOptions& o);


// What a subject actually ran, as far as it says. The error budget is built from it
// (properties/check_pipeline.h), and from the conservative side of every field left unknown: a kernel
// that says nothing gets the bound that holds whatever it did.
struct RunPlan {
  TileSize tile;     // the tile that ran ({0, 0}: not reported)
  int step_n = 0;    // keys per online-softmax step: the narrowest step the run took, every step starting
                     // on a multiple of it (0: unknown). More, narrower steps mean more running-max raises.
  int num_splits = 0;                         // split-KV chunks merged at the end (0: unknown)
  std::optional<bool> l_from_fp32_p;          // l summed from the fp32 p (true) or the rounded P (false)
  std::optional<Accumulation> accumulation;   // how S and P.V were accumulated
  std::optional<bool> two_level_accum;        // fp8: P.V promoted to fp32 every tile
  bool operator==(const RunPlan&) const = default;
};

// One line, e.g. "tile 128x64, steps of 64 keys, 1 split, l from the rounded P, tensor-core accumulation".
std::string describe_plan(const RunPlan& plan);

struct SubjectOutput {
  std::vector<double> o;    // [B, Hq, Nq, dv], the exact values of the output format
  std::vector<double> lse;  // [B, Hq, Nq]; empty if the subject has no LSE
  std::vector<double> o_unrounded;  // optional: O just before the rounding to the output format (the CPU
                                    // emulation fills it; empty for other subjects)
  RunPlan plan;             // what ran; fields the subject does not report stay unknown
};

// A subject reports failure (a CUDA error, a plugin's error code) by throwing SubjectError: it is a
// failed run, never a pass.
struct SubjectError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A subject declines a (problem, options) pair that is valid but outside what it runs (a plugin's
// FC_ERR_UNSUPPORTED: our CUDA kernel declares the union of its tiles over head dims and declines a tile
// not compiled for this d). Callers count it as a skip, never as a pass or a failure.
struct SubjectRefused : SubjectError {
  explicit SubjectRefused(std::string reason_)
      : SubjectError("refused as unsupported: " + reason_), reason(std::move(reason_)) {}
  std::string reason;  // the subject's own words, without the problem (skip counts group by it)
};

// The subject could not get the memory (host or device) a run needs: a resource error of the machine,
// never a verdict on the kernel (a plugin's FC_ERR_OUT_OF_MEMORY, std::bad_alloc in a subject).
struct SubjectOutOfMemory : SubjectError {
  using SubjectError::SubjectError;
};

// The run failed and left the process unusable for later runs (a plugin's FC_ERR_STICKY: a sticky CUDA
// error such as an illegal address poisons the context). A failed run; a worker process that sees it
// exits, and the next case gets a fresh one.
struct SubjectSticky : SubjectError {
  using SubjectError::SubjectError;
};

// A subject run in a worker process (tools/report/worker_subject.h) that died (a signal, an exit) or did
// not answer within its time limit. Both are findings against the kernel, with the case's reproducer.
struct SubjectCrashed : SubjectError {
  using SubjectError::SubjectError;
};
struct SubjectTimedOut : SubjectError {
  using SubjectError::SubjectError;
};

class Subject {
 public:
  virtual ~Subject() = default;
  virtual Capabilities capabilities() const = 0;
  // Inputs hold true values; for fp8 the stored values are in / descale, exactly representable.
  virtual SubjectOutput run(const Problem& p, const AttentionInputs& in, const RunOptions& o) = 0;
  // The C ABI table of a subject that is a plugin in this process, else null: what the large-shape mode
  // runs on device buffers (properties/large_case_run.h), where host arrays would not fit.
  virtual const fc_plugin* plugin_table() const { return nullptr; }
};

}  // namespace fc
