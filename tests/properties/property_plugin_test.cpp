// The same property suite over the C ABI (include/flashcheck/plugin.h), through PluginSubject: the
// example CPU plugin (examples/plugins/cpu_reference_plugin.c). Every run allocates O and LSE with
// poisoned guard margins and checks them afterwards (kernels/plugin/plugin_subject.h), so here every
// property is also a bounds check on real buffers. The teeth of that check: bounds_overrun below, a
// plugin that writes one element past O, must fail the bounds property with the guard message.
#include "tests/properties/property_binding.h"

#include "kernels/plugin/plugin_subject.h"

#ifndef FC_PROPERTY_DEFAULT_RC_PARAMS
#define FC_PROPERTY_DEFAULT_RC_PARAMS "max_success=200 seed=20261129"
#endif

namespace {
const bool fc_defaults = fc::testing_support::set_default_rc_params(FC_PROPERTY_DEFAULT_RC_PARAMS);

fc::testing_support::SubjectSlot make_plugin() {
  fc::testing_support::SubjectSlot slot;
  slot.name = "plugin:example-cpu";
  try {
    slot.subject = fc::PluginSubject::open(FC_EXAMPLE_CPU_PLUGIN);
  } catch (const std::exception& e) {
    slot.unavailable = e.what();
  }
  return slot;
}
}  // namespace

FC_BIND_PROPERTIES(plugin, make_plugin)

#ifdef FC_OVERRUN_PLUGIN
TEST(plugin_property_teeth, bounds_overrun) {
  std::unique_ptr<fc::PluginSubject> subject = fc::PluginSubject::open(FC_OVERRUN_PLUGIN);
  rc::detail::TestParams params;
  params.seed = 0xfc0de5eedull;
  params.maxSuccess = 50;
  const fc::PropertyOutcome o = fc::check_property(*fc::find_property("bounds"), *subject, "teeth/overrun/bounds", params);
  ASSERT_FALSE(o.passed) << "a plugin writing past O passed the bounds property";
  ASSERT_TRUE(o.minimal.has_value());
  std::cout << "[teeth] plugin overrun x bounds: minimal case " << o.minimal->scores() << " scores: "
            << o.minimal->describe() << "\n    " << o.failure << std::endl;
  EXPECT_LE(o.minimal->scores(), 16u);
}
#endif
