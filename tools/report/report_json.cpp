// report.json: the record of a campaign. Doubles are written with round-trip precision (nlohmann
// prints the shortest text that reads back to the same double); non-finite values, which JSON cannot
// spell, are written as the strings "inf", "-inf" and "nan".
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "tools/report/list_options.h"
#include "tools/report/report_writers.h"

namespace fc::report {

using nlohmann::json;

namespace {

json num(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  return x;
}

double get_num(const json& j, const char* field) {
  if (!j.contains(field)) throw UsageError(std::string("report JSON: missing field '") + field + "'");
  const json& v = j.at(field);
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const auto s = v.get<std::string>();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  }
  if (v.is_null()) return std::numeric_limits<double>::quiet_NaN();
  throw UsageError(std::string("report JSON: field '") + field + "' is not a number");
}

template <class T>
T get(const json& j, const char* field) {
  if (!j.contains(field)) throw UsageError(std::string("report JSON: missing field '") + field + "'");
  try {
    return j.at(field).get<T>();
  } catch (const json::exception& e) {
    throw UsageError(std::string("report JSON: field '") + field + "': " + e.what());
  }
}

template <class T>
T get_or(const json& j, const char* field, T fallback) {
  return j.contains(field) ? get<T>(j, field) : fallback;
}

json tiles_json(const std::vector<TileSize>& tiles) {
  json a = json::array();
  for (const auto& t : tiles) a.push_back(tile_name(t));
  return a;
}

}  // namespace

json to_json(const ReportData& r) {
  json j;
  j["flashcheck_report"] = r.schema;
  j["partial"] = r.partial;
  j["planned_cases"] = r.planned_cases;
  j["wall_seconds"] = num(r.wall_seconds);

  const CampaignSpec& s = r.spec;
  j["campaign"] = {{"subjects", s.subjects},
                   {"recipes", recipe_names(s.recipes)},
                   {"n", s.n},
                   {"d", s.d},
                   {"masks", s.masks},
                   {"distributions", distribution_names(s.distributions)},
                   {"tiles", tiles_json(s.tiles)},
                   {"batch", s.batch},
                   {"heads_q", s.heads_q},
                   {"heads_kv", s.heads_kv},
                   {"seed", s.seed},
                   {"cases", s.cases},
                   {"keep_worst", s.keep_worst}};

  const Environment& e = r.env;
  j["environment"] = {{"flashcheck_version", e.flashcheck_version}, {"git_commit", e.git_commit},
                      {"git_describe", e.git_describe},             {"compiler", e.compiler},
                      {"build_type", e.build_type},                 {"cxx_flags", e.cxx_flags},
                      {"cuda_build", e.cuda_build},                 {"host", e.host},
                      {"cpu", e.cpu},                               {"gpu", e.gpu},
                      {"driver", e.driver},                         {"started_utc", e.started_utc},
                      {"jobs", e.jobs},                             {"command_line", e.command_line},
                      {"unrounded_inputs", e.unrounded_inputs},     {"oracle", e.oracle}};

  json recipes = json::array();
  for (const RecipeParams& p : r.recipes)
    recipes.push_back({{"name", p.name},
                       {"input", p.input},
                       {"operand", p.operand},
                       {"p_format", p.p_format},
                       {"output", p.output},
                       {"u_input", num(p.u_input)},
                       {"u_output", num(p.u_output)},
                       {"accumulation", p.accumulation},
                       {"normalisation", p.normalisation},
                       {"l_from_fp32_p", p.l_from_fp32_p},
                       {"two_level_accum", p.two_level_accum}});
  j["recipes"] = recipes;

  json hist = json::array();
  for (int k = 0; k < kHistSize; ++k) hist.push_back(num(k == 0 ? 0.0 : std::pow(10.0, kHistLowExp + (k - 1) * kHistStep)));
  j["ratio_histogram_lower_edges"] = hist;

  json cases = json::array();
  for (const CaseRecord& c : r.cases) {
    json w = json::array();
    for (const WorstRecord& x : c.worst)
      w.push_back({{"where", x.where},
                   {"got", num(x.got)},
                   {"want", num(x.want)},
                   {"error", num(x.error)},
                   {"bound", num(x.bound)},
                   {"ratio", num(x.ratio)},
                   {"scaled_ulps", num(x.scaled_ulps)}});
    cases.push_back({{"subject", c.subject},
                     {"recipe", std::string(recipe_spec(c.recipe).name)},
                     {"batch", c.batch},
                     {"heads_q", c.heads_q},
                     {"heads_kv", c.heads_kv},
                     {"n_q", c.n_q},
                     {"n_k", c.n_k},
                     {"d", c.d},
                     {"dv", c.dv},
                     {"mask", c.mask},
                     {"distribution", std::string(distribution_name(c.distribution))},
                     {"seed", c.seed},
                     {"tile_m", c.tile_m},
                     {"tile_n", c.tile_n},
                     {"budget_tile_n", c.budget_tile_n},
                     {"budget_basis", c.budget_basis},
                     {"l_from_fp32_p", c.l_from_fp32_p},
                     {"two_level_accum", c.two_level_accum},
                     {"num_splits", c.num_splits},
                     {"fa1", c.fa1},
                     {"scale", c.scale ? num(*c.scale) : json(nullptr)},
                     {"key_lengths", c.key_lengths},
                     {"q_descale", num(c.q_descale)},
                     {"k_descale", num(c.k_descale)},
                     {"v_descale", num(c.v_descale)},
                     {"status", c.status},
                     {"message", c.message},
                     {"seconds", num(c.seconds)},
                     {"elements", c.elements},
                     {"violations", c.violations},
                     {"nan_mismatches", c.nan_mismatches},
                     {"max_ratio", num(c.max_ratio)},
                     {"sum_ratio", num(c.sum_ratio)},
                     {"max_ratio_probabilistic", num(c.max_ratio_probabilistic)},
                     {"max_scaled_ulps", num(c.max_scaled_ulps)},
                     {"sum_scaled_ulps", num(c.sum_scaled_ulps)},
                     {"max_abs_error", num(c.max_abs_error)},
                     {"sum_abs_error", num(c.sum_abs_error)},
                     {"sum_sq_error", num(c.sum_sq_error)},
                     {"max_bound", num(c.max_bound)},
                     {"sum_bound", num(c.sum_bound)},
                     {"max_lse_ratio", num(c.max_lse_ratio)},
                     {"sum_sq_error_unrounded", num(c.sum_sq_error_unrounded)},
                     {"ratio_histogram", c.ratio_histogram},
                     {"worst", w}});
  }
  j["cases"] = cases;

  json skipped = json::array();
  for (const SkipNote& n : r.skipped)
    skipped.push_back({{"recipe", n.recipe}, {"subject", n.subject}, {"grid_points", n.grid_points}, {"reasons", n.reasons}});
  j["skipped"] = skipped;
  return j;
}

ReportData report_from_json(const json& j) {
  if (!j.is_object() || !j.contains("flashcheck_report"))
    throw UsageError("not a flashcheck report: no 'flashcheck_report' field");
  ReportData r;
  r.schema = get<int>(j, "flashcheck_report");
  if (r.schema != kReportSchemaVersion)
    throw UsageError("report JSON has schema " + std::to_string(r.schema) + ", this flashcheck reads " +
                     std::to_string(kReportSchemaVersion));
  r.partial = get<bool>(j, "partial");
  r.planned_cases = get<uint64_t>(j, "planned_cases");
  r.wall_seconds = get_num(j, "wall_seconds");

  const json& c = j.at("campaign");
  CampaignSpec& s = r.spec;
  s.subjects = get<std::vector<std::string>>(c, "subjects");
  s.recipes = parse_recipes("campaign.recipes", get<std::vector<std::string>>(c, "recipes"));
  s.n = get<std::vector<int64_t>>(c, "n");
  s.d = get<std::vector<int>>(c, "d");
  s.masks = get<std::vector<std::string>>(c, "masks");
  s.distributions = parse_distributions("campaign.distributions", get<std::vector<std::string>>(c, "distributions"));
  const auto tiles = get<std::vector<std::string>>(c, "tiles");
  s.tiles.clear();
  for (const auto& t : tiles)
    if (t != "default") s.tiles.push_back(parse_tile("campaign.tiles", t));
  s.batch = get<int>(c, "batch");
  s.heads_q = get<int>(c, "heads_q");
  s.heads_kv = get<int>(c, "heads_kv");
  s.seed = get<uint64_t>(c, "seed");
  s.cases = get<int>(c, "cases");
  s.keep_worst = get_or<int>(c, "keep_worst", 3);

  const json& e = j.at("environment");
  Environment& env = r.env;
  env.flashcheck_version = get_or<std::string>(e, "flashcheck_version", "");
  env.git_commit = get_or<std::string>(e, "git_commit", "");
  env.git_describe = get_or<std::string>(e, "git_describe", "");
  env.compiler = get_or<std::string>(e, "compiler", "");
  env.build_type = get_or<std::string>(e, "build_type", "");
  env.cxx_flags = get_or<std::string>(e, "cxx_flags", "");
  env.cuda_build = get_or<std::string>(e, "cuda_build", "");
  env.host = get_or<std::string>(e, "host", "");
  env.cpu = get_or<std::string>(e, "cpu", "");
  env.gpu = get_or<std::string>(e, "gpu", "");
  env.driver = get_or<std::string>(e, "driver", "");
  env.started_utc = get_or<std::string>(e, "started_utc", "");
  env.jobs = get_or<int>(e, "jobs", 1);
  env.command_line = get_or<std::string>(e, "command_line", "");
  env.unrounded_inputs = get_or<std::string>(e, "unrounded_inputs", "");
  env.oracle = get_or<std::string>(e, "oracle", "cpu");  // reports before the GPU oracle were judged on the CPU

  for (const json& p : j.value("recipes", json::array())) {
    RecipeParams q;
    q.name = get<std::string>(p, "name");
    q.input = get<std::string>(p, "input");
    q.operand = get<std::string>(p, "operand");
    q.p_format = get<std::string>(p, "p_format");
    q.output = get<std::string>(p, "output");
    q.u_input = get_num(p, "u_input");
    q.u_output = get_num(p, "u_output");
    q.accumulation = get<std::string>(p, "accumulation");
    q.normalisation = get<std::string>(p, "normalisation");
    q.l_from_fp32_p = get<bool>(p, "l_from_fp32_p");
    q.two_level_accum = get<bool>(p, "two_level_accum");
    r.recipes.push_back(q);
  }

  for (const json& x : j.at("cases")) {
    CaseRecord k;
    k.subject = get<std::string>(x, "subject");
    const auto recipe = get<std::string>(x, "recipe");
    k.recipe = parse_recipes("cases[].recipe", {recipe}).front();
    k.batch = get<int>(x, "batch");
    k.heads_q = get<int>(x, "heads_q");
    k.heads_kv = get<int>(x, "heads_kv");
    k.n_q = get<int64_t>(x, "n_q");
    k.n_k = get<int64_t>(x, "n_k");
    k.d = get<int>(x, "d");
    k.dv = get<int>(x, "dv");
    k.mask = get<std::string>(x, "mask");
    k.distribution = parse_distributions("cases[].distribution", {get<std::string>(x, "distribution")}).front();
    k.seed = get<uint64_t>(x, "seed");
    k.tile_m = get<int>(x, "tile_m");
    k.tile_n = get<int>(x, "tile_n");
    k.budget_tile_n = get<int>(x, "budget_tile_n");
    k.budget_basis = get_or<std::string>(x, "budget_basis", "");
    // Options came later: a report without them ran with the defaults.
    k.l_from_fp32_p = x.contains("l_from_fp32_p") && get<bool>(x, "l_from_fp32_p");
    k.two_level_accum = x.contains("two_level_accum") && get<bool>(x, "two_level_accum");
    k.num_splits = get_or<int>(x, "num_splits", 1);
    k.fa1 = x.contains("fa1") && get<bool>(x, "fa1");
    if (x.contains("scale") && !x.at("scale").is_null()) k.scale = get_num(x, "scale");
    if (x.contains("key_lengths")) k.key_lengths = get<std::vector<int64_t>>(x, "key_lengths");
    k.q_descale = get_num(x, "q_descale");
    k.k_descale = get_num(x, "k_descale");
    k.v_descale = get_num(x, "v_descale");
    k.status = get<std::string>(x, "status");
    k.message = get<std::string>(x, "message");
    k.seconds = get_num(x, "seconds");
    k.elements = get<uint64_t>(x, "elements");
    k.violations = get<uint64_t>(x, "violations");
    k.nan_mismatches = get<uint64_t>(x, "nan_mismatches");
    k.max_ratio = get_num(x, "max_ratio");
    k.sum_ratio = get_num(x, "sum_ratio");
    k.max_ratio_probabilistic = get_num(x, "max_ratio_probabilistic");
    k.max_scaled_ulps = get_num(x, "max_scaled_ulps");
    k.sum_scaled_ulps = get_num(x, "sum_scaled_ulps");
    k.max_abs_error = get_num(x, "max_abs_error");
    k.sum_abs_error = get_num(x, "sum_abs_error");
    k.sum_sq_error = get_num(x, "sum_sq_error");
    k.max_bound = get_num(x, "max_bound");
    k.sum_bound = get_num(x, "sum_bound");
    k.max_lse_ratio = get_num(x, "max_lse_ratio");
    k.sum_sq_error_unrounded = get_num(x, "sum_sq_error_unrounded");
    k.ratio_histogram = get<std::vector<uint64_t>>(x, "ratio_histogram");
    for (const json& w : x.at("worst"))
      k.worst.push_back({get<std::string>(w, "where"), get_num(w, "got"), get_num(w, "want"), get_num(w, "error"),
                         get_num(w, "bound"), get_num(w, "ratio"), get_num(w, "scaled_ulps")});
    r.cases.push_back(std::move(k));
  }
  for (const json& n : j.value("skipped", json::array()))
    r.skipped.push_back({get<std::string>(n, "recipe"), get<std::string>(n, "subject"),
                         get<uint64_t>(n, "grid_points"), get<std::vector<std::string>>(n, "reasons")});
  return r;
}

ReportData read_report(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw UsageError("cannot read " + path.string());
  json j;
  try {
    in >> j;
  } catch (const json::exception& e) {
    throw UsageError(path.string() + " is not valid JSON: " + e.what());
  }
  try {
    return report_from_json(j);
  } catch (const json::exception& e) {
    throw UsageError(path.string() + ": " + e.what());
  }
}

}  // namespace fc::report
