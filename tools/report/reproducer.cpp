#include "tools/report/reproducer.h"

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/report/list_options.h"

namespace fc::report {

namespace {

// A problem file: the same fields as the flags (all optional), e.g.
//   {"subject": "emulation", "recipe": "bf16", "n_q": 127, "n_k": 300, "d": 64, "mask": "causal",
//    "distribution": "sinks", "seed": 7, "tile": "64x32"}
// Unknown fields are an error, so a typo does not silently run the default.
void apply_problem_file(CheckFlags& f, const std::string& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("--problem: cannot read " + path);
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError("--problem: " + path + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw UsageError("--problem: " + path + " must hold a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const auto& v = it.value();
    try {
      if (k == "subject") f.subject = v.get<std::string>();
      else if (k == "recipe") f.recipe = v.get<std::string>();
      else if (k == "mask") f.mask = v.get<std::string>();
      else if (k == "distribution") f.dist = v.get<std::string>();
      else if (k == "tile") f.tile = v.get<std::string>();
      else if (k == "n" || k == "n_q") f.n = v.get<int64_t>();
      else if (k == "n_k") f.nk = v.get<int64_t>();
      else if (k == "d") f.d = v.get<int>();
      else if (k == "dv") f.dv = v.get<int>();
      else if (k == "batch") f.batch = v.get<int>();
      else if (k == "heads_q") f.heads_q = v.get<int>();
      else if (k == "heads_kv") f.heads_kv = v.get<int>();
      else if (k == "seed") f.seed = v.get<uint64_t>();
      else if (k == "l_from_fp32_p") f.l_from_fp32_p = v.get<bool>();
      else if (k == "two_level_accum") f.two_level = v.get<bool>();
      else if (k == "fa1") f.fa1 = v.get<bool>();
      else if (k == "num_splits") f.num_splits = v.get<int>();
      else if (k == "scale") f.scale = v.get<double>();
      else if (k == "key_lengths") f.key_lengths = v.get<std::vector<int64_t>>();
      else throw UsageError("--problem: " + path + ": unknown field '" + k + "'");
    } catch (const nlohmann::json::exception& e) {
      throw UsageError("--problem: " + path + ": field '" + k + "' has the wrong type: " + e.what());
    }
  }
}

// Numbers as the shortest text that reads back to the same double.
std::string exact(double x) { return fmt::format("{}", x); }

std::vector<std::string> check_arguments(const CaseRecord& c) {
  std::vector<std::string> a = {"check",     "--subject", c.subject, "--recipe", std::string(recipe_spec(c.recipe).name),
                                "--batch",   std::to_string(c.batch), "--heads-q", std::to_string(c.heads_q),
                                "--heads-kv", std::to_string(c.heads_kv), "--n", std::to_string(c.n_q)};
  auto add = [&](std::initializer_list<std::string> words) { a.insert(a.end(), words); };
  if (c.n_k != c.n_q) add({"--nk", std::to_string(c.n_k)});
  add({"--d", std::to_string(c.d)});
  if (c.dv != c.d) add({"--dv", std::to_string(c.dv)});
  add({"--mask", c.mask, "--dist", std::string(distribution_name(c.distribution)), "--seed", std::to_string(c.seed)});
  if (c.tile_m || c.tile_n) add({"--tile", tile_name({c.tile_m, c.tile_n})});
  if (c.num_splits != 1) add({"--num-splits", std::to_string(c.num_splits)});
  if (c.l_from_fp32_p) add({"--l-from-fp32-p"});
  if (c.two_level_accum) add({"--two-level"});
  if (c.fa1) add({"--fa1"});
  if (c.scale) add({"--scale=" + exact(*c.scale)});  // "=": a negative value is not read as a flag
  if (!c.key_lengths.empty()) {
    std::vector<std::string> l;
    for (int64_t x : c.key_lengths) l.push_back(std::to_string(x));
    add({"--key-lengths", join(l)});
  }
  return a;
}

std::vector<std::string> compare_arguments(const CompareFlags& f) {
  std::vector<std::string> a = {"compare", "--q", f.in.q, "--k", f.in.k, "--v", f.in.v};
  auto add = [&](std::initializer_list<std::string> words) { a.insert(a.end(), words); };
  if (!f.in.format.empty()) add({"--format", f.in.format});
  if (f.in.scale) add({"--scale=" + exact(*f.in.scale)});
  add({"--mask", f.in.mask});
  if (!f.in.key_lengths.empty()) add({"--key-lengths", f.in.key_lengths});
  if (f.in.q_descale != 1) add({"--q-descale=" + exact(f.in.q_descale)});
  if (f.in.k_descale != 1) add({"--k-descale=" + exact(f.in.k_descale)});
  if (f.in.v_descale != 1) add({"--v-descale=" + exact(f.in.v_descale)});
  add({"--candidate", f.candidate});
  if (!f.candidate_lse.empty()) add({"--candidate-lse", f.candidate_lse});
  add({"--recipe", f.recipe});
  if (f.tile_n) add({"--tile-n", std::to_string(f.tile_n)});
  if (f.num_splits) add({"--num-splits", std::to_string(f.num_splits)});
  add({"--l-convention", f.l_convention, "--accumulation", f.accumulation});
  if (!f.subject.empty()) add({"--subject", f.subject});
  return a;
}

std::vector<std::string> fuzz_arguments(const FuzzReproducer& r) {
  std::vector<std::string> a = {"fuzz", "--explain", r.file, "--run", "--subject", r.subject, "--limits", r.limits};
  if (!r.score_guard) a.push_back("--no-score-guard");
  if (!r.output_headroom) a.push_back("--no-output-headroom");
  return a;
}

std::string quoted(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=:,./@%") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

void add_check_flags(CLI::App* cmd, const std::shared_ptr<CheckFlags>& f) {
  auto* subject = cmd->add_option("--subject,-s", f->subject, "Subject (default emulation)");
  cmd->add_option_function<std::string>(
         "--plugin", [f](const std::string& path) { f->subject = "plugin:" + path; },
         "Kernel plugin behind include/flashcheck/plugin.h (= --subject plugin:<path>)")
      ->check(CLI::ExistingFile)
      ->excludes(subject);
  cmd->add_option("--recipe,-r", f->recipe, "Recipe: " + all_recipe_names() + " (default fp16)");
  cmd->add_option("--n", f->n, "Query length n_q (default 128)");
  cmd->add_option("--nk", f->nk, "Key length n_k (default: = n)");
  cmd->add_option("--d", f->d, "Head dim (default 64)");
  cmd->add_option("--dv", f->dv, "V head dim (default: = d)");
  cmd->add_option("--batch", f->batch, "Batch (default 1)");
  cmd->add_option("--heads-q", f->heads_q, "Query heads (default 1)");
  cmd->add_option("--heads-kv", f->heads_kv, "Key/value heads (default 1)");
  cmd->add_option("--mask,-m", f->mask, "none, causal, causal-top-left, window:L,R, window-top-left:L,R");
  cmd->add_option("--key-lengths", f->key_lengths, "Key lengths, one per batch, comma separated (keys at or past "
                                                   "a length are masked)")
      ->delimiter(',');
  cmd->add_option("--scale", f->scale, "Softmax scale (default 1/sqrt(d))");
  cmd->add_option("--dist", f->dist, "Input distribution: " + all_distribution_names() + " (default normal)");
  cmd->add_option("--seed", f->seed, "Input seed (default 1)");
  cmd->add_option("--tile,-t", f->tile, "Tile BrxBc (default: the subject's)");
  cmd->add_option("--num-splits", f->num_splits, "Split-KV chunks (default 1: none; 0: the subject decides)");
  cmd->add_flag("--l-from-fp32-p", f->l_from_fp32_p,
                "Sum l from the fp32 p, not from the rounded P (the FA-2 convention; the budget follows)");
  cmd->add_flag("--two-level", f->two_level,
                "fp8: promote the P.V accumulator to fp32 every key tile (the budget follows)");
  cmd->add_flag("--fa1", f->fa1, "FA-1 normalisation (rescale O at every tile; the budget follows)");
  cmd->add_option("--problem", f->problem_file,
                  "JSON file with any of: subject recipe n_q n_k d dv batch heads_q heads_kv mask key_lengths scale "
                  "distribution seed tile num_splits l_from_fp32_p two_level_accum fa1 (flags are read first, the "
                  "file overrides)")
      ->check(CLI::ExistingFile);
}

CaseRecord case_from_flags(CheckFlags f) {
  if (!f.problem_file.empty()) apply_problem_file(f, f.problem_file);
  CaseRecord c;
  c.subject = f.subject;
  c.recipe = parse_recipes("--recipe", {f.recipe}).front();
  c.distribution = parse_distributions("--dist", {f.dist}).front();
  c.mask = parse_masks("--mask", {f.mask}).front();
  c.batch = f.batch;
  c.heads_q = f.heads_q;
  c.heads_kv = f.heads_kv;
  c.n_q = f.n;
  c.n_k = f.nk > 0 ? f.nk : f.n;
  c.d = f.d;
  c.dv = f.dv > 0 ? f.dv : f.d;
  c.seed = f.seed;
  c.l_from_fp32_p = f.l_from_fp32_p;
  c.two_level_accum = f.two_level;
  c.fa1 = f.fa1;
  if (f.num_splits < 0) throw UsageError("--num-splits must be >= 0 (0: the subject decides)");
  c.num_splits = f.num_splits;
  c.scale = f.scale;
  c.key_lengths = f.key_lengths;
  if (!f.tile.empty()) {
    const TileSize t = parse_tile("--tile", f.tile);
    c.tile_m = t.m;
    c.tile_n = t.n;
  }
  return c;
}

void add_compare_flags(CLI::App* cmd, CompareFlags& f) {
  npy::add_input_options(cmd, f.in);
  cmd->add_option("--candidate", f.candidate, "the candidate O as NPY, shape (B, Hq, Nq, dv)")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--candidate-lse", f.candidate_lse, "the candidate LSE (natural log), shape (B, Hq, Nq)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--recipe", f.recipe, "fp32 | tf32 | fp16 | bf16 | fp8_e4m3 | fp8_e5m2")->required();
  cmd->add_option("--tile-n", f.tile_n,
                  "the candidate's online-softmax step (its key tile width), when known (default: any)");
  cmd->add_option("--num-splits", f.num_splits,
                  "the candidate's split-KV chunk count, when known (default: possibly split, the conservative side)");
  cmd->add_option("--l-convention", f.l_convention,
                  "how the candidate sums l: rounded-p (l from the P that multiplies V), fp32-p (FlashAttention-2/3), "
                  "or unknown (default: the bound covers both)")
      ->check(CLI::IsMember({"unknown", "rounded-p", "fp32-p"}));
  cmd->add_option("--accumulation", f.accumulation,
                  "how the candidate accumulates Q.K^T and P.V: tensor-core (block FMA), sequential (fp32 fma one "
                  "product at a time) or unknown (default: the tensor-core bound, which covers both)")
      ->check(CLI::IsMember({"unknown", "tensor-core", "sequential"}));
  cmd->add_option("--subject", f.subject, "also run this subject (e.g. cuda, emulation) on the same inputs");
}

std::vector<std::string> command_arguments(const Reproducible& c) {
  return std::visit(
      [](const auto& x) -> std::vector<std::string> {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, CaseRecord>) return check_arguments(x);
        else if constexpr (std::is_same_v<T, CompareFlags>) return compare_arguments(x);
        else return fuzz_arguments(x);
      },
      c);
}

std::string render_command(const Reproducible& c) {
  std::string line = "flashcheck";
  for (const std::string& a : command_arguments(c)) line += " " + quoted(a);
  return line;
}

std::vector<std::string> split_command(const std::string& line) {
  std::vector<std::string> words;
  std::string w;
  bool in_word = false, in_quote = false, escaped = false;
  for (char ch : line) {
    if (escaped) {
      w += ch;
      escaped = false;
    } else if (in_quote) {
      if (ch == '\'') in_quote = false;
      else w += ch;
    } else if (ch == '\'') {
      in_quote = in_word = true;
    } else if (ch == '\\') {
      escaped = in_word = true;
    } else if (ch == ' ') {
      if (in_word) words.push_back(w);
      w.clear();
      in_word = false;
    } else {
      w += ch;
      in_word = true;
    }
  }
  if (in_word) words.push_back(w);
  return words;
}

}  // namespace fc::report
