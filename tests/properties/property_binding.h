// Binds the property library (properties/attention_properties.h) to a concrete subject as gtest cases:
// one test per property, named "<subject>/property.holds/<property>", so that ctest can select a
// subject's suite (-R property) and a single property (-R budget). A test prints its case count, what
// it skipped and its time; a failure prints the shrunk case and the RC_PARAMS="reproduce=..." line.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <iostream>
#include <memory>
#include <string>

#include "kernels/subject.h"
#include "properties/attention_properties.h"
#include "properties/rc_binding.h"

namespace fc::testing_support {

// RC_PARAMS wins; without it the CI default below applies (set before RapidCheck reads its
// configuration, which it does on first use).
inline bool set_default_rc_params(const char* params) {
  setenv("RC_PARAMS", params, /*overwrite=*/0);
  return true;
}

// The subject under test: made once per process, or an explanation of why there is none (GTEST_SKIP).
struct SubjectSlot {
  std::unique_ptr<Subject> subject;
  std::string name;
  std::string unavailable;
};

inline void run_bound_property(const std::string& suite, const std::string& property, SubjectSlot& slot) {
  if (!slot.subject) GTEST_SKIP() << "subject " << slot.name << " unavailable: " << slot.unavailable;
  const PropertyDef* def = find_property(property);
  ASSERT_NE(def, nullptr) << "unknown property " << property;
  const PropertyOutcome outcome = check_property(*def, *slot.subject, suite + "/" + property);
  const std::string text = summary(*def, slot.name, outcome);
  std::cout << text << std::endl;
  if (!outcome.passed) FAIL() << text << "\n" << outcome.rapidcheck_message;
}

inline std::vector<std::string> property_names() {
  std::vector<std::string> names;
  for (const PropertyDef& d : subject_properties()) names.push_back(d.name);
  return names;
}

}  // namespace fc::testing_support

// Defines the test suite `property` for one subject: FC_BIND_PROPERTIES(emulation, make_slot) where
// make_slot() returns a SubjectSlot.
#define FC_BIND_PROPERTIES(SUBJECT, MAKE_SLOT)                                                        \
  namespace {                                                                                         \
  ::fc::testing_support::SubjectSlot& fc_slot_##SUBJECT() {                                           \
    static ::fc::testing_support::SubjectSlot slot = MAKE_SLOT();                                     \
    return slot;                                                                                      \
  }                                                                                                   \
  class property : public ::testing::TestWithParam<std::string> {};                                   \
  TEST_P(property, holds) { ::fc::testing_support::run_bound_property(#SUBJECT, GetParam(), fc_slot_##SUBJECT()); } \
  INSTANTIATE_TEST_SUITE_P(SUBJECT, property, ::testing::ValuesIn(::fc::testing_support::property_names()), \
                           [](const ::testing::TestParamInfo<std::string>& info) { return info.param; }); \
  }
