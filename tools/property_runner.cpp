// flashcheck-properties: the property suite and a short fuzz run against one subject (usually a plugin),
// as a GoogleTest executable, so that another project's ctest runs it like any test binary: ctest's
// RESOURCE_GROUPS hand it a GPU, GoogleTest's GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX split it, and
// --gtest_filter picks properties. cmake/flashcheckKernelTests.cmake registers it for a plugin.
//
//   flashcheck-properties --plugin libkernel.so [--recipes fp16,bf16] [--masks none,causal,window,key_lengths,dense]
//                         [--cases 30] [--fuzz-cases 200] [--seed 20240711] [--require-gpu]
//                         [--oracle cpu|gpu|auto] [gtest flags]
//   flashcheck-properties --subject emulation ...   (any name make_subject accepts)
//
// Every property is a test "properties.<name>"; the fuzz run is "fuzz.budget" (the budget property over
// --fuzz-cases generated cases of every distribution, with its own seed). A subject that cannot be
// opened (wrong ABI version, missing library) is one failing test carrying the message. A failure
// prints the shrunk case and the RC_PARAMS line that replays it. --require-gpu: every test is skipped
// (GTEST_SKIP) when this process sees no usable CUDA device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/subject_registry.h"
#include "properties/attention_properties.h"
#include "properties/oracle.h"
#include "properties/rc_binding.h"

namespace {

struct RunnerOptions {
  std::string subject;
  std::vector<std::string> recipes, masks;
  int cases = 30, fuzz_cases = 200;
  uint64_t seed = 20240711;
  bool require_gpu = false;
  std::string oracle = "cpu";  // who judges (properties/oracle.h)
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// The subject with its declared capabilities narrowed to what the caller asked for (recipes, masks), so
// the generators only draw cases from that space.
class Narrowed : public fc::Subject {
 public:
  Narrowed(std::unique_ptr<fc::Subject> inner, const RunnerOptions& o) : inner_(std::move(inner)), caps_(inner_->capabilities()) {
    if (!o.recipes.empty()) {
      std::vector<fc::Recipe> keep;
      for (const auto& name : o.recipes) {
        const auto r = fc::parse_recipe(name);
        if (!r) throw std::invalid_argument("--recipes: unknown recipe '" + name + "'");
        for (fc::Recipe have : caps_.recipes)
          if (have == *r) keep.push_back(*r);
      }
      if (keep.empty()) throw std::invalid_argument("--recipes: the subject declares none of the recipes asked for");
      caps_.recipes = keep;
    }
    if (!o.masks.empty()) {
      auto wants = [&](const std::string& prefix) {
        for (const auto& m : o.masks)
          if (m.rfind(prefix, 0) == 0) return true;
        return false;
      };
      caps_.causal = caps_.causal && wants("causal");
      caps_.window = caps_.window && wants("window");
      caps_.key_lengths = caps_.key_lengths && wants("key_lengths");
      caps_.dense_mask = caps_.dense_mask && wants("dense");
    }
  }
  fc::Capabilities capabilities() const override { return caps_; }
  fc::SubjectOutput run(const fc::Problem& p, const fc::AttentionInputs& in, const fc::RunOptions& o) override {
    return inner_->run(p, in, o);
  }

 private:
  std::unique_ptr<fc::Subject> inner_;
  fc::Capabilities caps_;
};

// ctest --resource-spec-file gives each GPU test CTEST_RESOURCE_GROUP_0_GPUS="id:3,slots:1"; the CUDA
// runtime reads CUDA_VISIBLE_DEVICES, so one maps to the other before any CUDA call.
void map_ctest_gpu() {
  const char* spec = std::getenv("CTEST_RESOURCE_GROUP_0_GPUS");
  if (!spec || std::getenv("CUDA_VISIBLE_DEVICES")) return;
  const std::string s(spec);
  const auto at = s.find("id:");
  if (at == std::string::npos) return;
  const std::string id = s.substr(at + 3, s.find(',', at) - (at + 3));
  setenv("CUDA_VISIBLE_DEVICES", id.c_str(), 1);
}

class PropertyTest : public testing::Test {
 public:
  PropertyTest(std::shared_ptr<fc::Subject> s, const fc::PropertyDef* def, std::string id, rc::detail::TestParams params)
      : subject_(std::move(s)), def_(def), id_(std::move(id)), params_(params) {}
  void TestBody() override {
    const fc::PropertyOutcome outcome = fc::check_property(*def_, *subject_, id_, params_);
    const std::string text = fc::summary(*def_, subject_->capabilities().name, outcome);
    std::cout << text << std::endl;
    if (!outcome.passed) FAIL() << text;
  }

 private:
  std::shared_ptr<fc::Subject> subject_;
  const fc::PropertyDef* def_;
  std::string id_;
  rc::detail::TestParams params_;
};

class NoGpu : public testing::Test {
 public:
  void TestBody() override { GTEST_SKIP() << "no usable CUDA device (--require-gpu)"; }
};

class OpenFailure : public testing::Test {
 public:
  explicit OpenFailure(std::string why) : why_(std::move(why)) {}
  void TestBody() override { FAIL() << why_; }

 private:
  std::string why_;
};

int usage(const char* what) {
  std::cerr << "flashcheck-properties: " << what << "\n"
            << "usage: flashcheck-properties (--plugin PATH | --subject NAME) [--recipes a,b] [--masks none,causal,window,"
               "key_lengths,dense] [--cases N] [--fuzz-cases N] [--seed S] [--require-gpu] [--oracle cpu|gpu|auto] [gtest flags]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  map_ctest_gpu();
  testing::InitGoogleTest(&argc, argv);
  RunnerOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "--plugin") o.subject = "plugin:" + value();
      else if (a == "--subject") o.subject = value();
      else if (a == "--recipes") o.recipes = split(value());
      else if (a == "--masks") o.masks = split(value());
      else if (a == "--cases") o.cases = std::stoi(value());
      else if (a == "--fuzz-cases") o.fuzz_cases = std::stoi(value());
      else if (a == "--seed") o.seed = std::stoull(value());
      else if (a == "--require-gpu") o.require_gpu = true;
      else if (a == "--oracle") o.oracle = value();
      else return usage(("unknown argument " + a).c_str());
    } catch (const std::exception& e) {
      return usage(e.what());
    }
  }
  if (o.subject.empty()) return usage("--plugin or --subject is required");
  try {
    fc::use_oracle(fc::parse_oracle(o.oracle));
  } catch (const std::exception& e) {
    return usage(e.what());
  }

  if (o.require_gpu && !fc::gpu_available()) {
    // A GPU plugin on a machine without a GPU: skipped, visibly (ctest SKIP_REGULAR_EXPRESSION).
    for (const char* suite : {"properties", "fuzz"})
      testing::RegisterTest(suite, "needs_gpu", nullptr, nullptr, __FILE__, __LINE__,
                            []() -> testing::Test* { return new NoGpu(); });
    return RUN_ALL_TESTS();
  }
  std::shared_ptr<fc::Subject> subject;
  try {
    subject = std::make_shared<Narrowed>(fc::make_subject(o.subject), o);
  } catch (const std::exception& e) {
    const std::string why = "cannot open subject " + o.subject + ": " + e.what();
    // In both suites, so that whatever --gtest_filter ctest uses runs it.
    for (const char* suite : {"properties", "fuzz"})
      testing::RegisterTest(suite, "subject_opens", nullptr, nullptr, __FILE__, __LINE__,
                            [why]() -> testing::Test* { return new OpenFailure(why); });
    return RUN_ALL_TESTS();
  }
  const std::string name = subject->capabilities().name;
  for (const fc::PropertyDef& def : fc::subject_properties()) {
    rc::detail::TestParams params;
    params.seed = o.seed;
    params.maxSuccess = o.cases;
    params.maxSize = 100;
    testing::RegisterTest("properties", def.name.c_str(), nullptr, name.c_str(), __FILE__, __LINE__,
                          [=]() -> testing::Test* { return new PropertyTest(subject, &def, name + "/" + def.name, params); });
  }
  if (const fc::PropertyDef* budget = fc::find_property("budget"); budget && o.fuzz_cases > 0) {
    rc::detail::TestParams params;
    params.seed = o.seed ^ 0x9E3779B97F4A7C15ull;
    params.maxSuccess = o.fuzz_cases;
    params.maxSize = 100;
    testing::RegisterTest("fuzz", "budget", nullptr, name.c_str(), __FILE__, __LINE__,
                          [=]() -> testing::Test* { return new PropertyTest(subject, budget, name + "/fuzz", params); });
  }
  const int rc = RUN_ALL_TESTS();
  std::cout << "oracle: " << fc::describe_oracle_use() << std::endl;
  return rc;
}
