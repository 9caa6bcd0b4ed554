// The subject slot of one of our CUDA subjects for the bound property suite (property_binding.h): the
// registry's subject, or why it is unavailable here (no GPU, a plugin that does not load).
#pragma once

#include <exception>

#include "kernels/subject_registry.h"
#include "tests/properties/property_binding.h"

namespace fc::testing_support {

inline SubjectSlot cuda_slot(const char* registry_name) {
  SubjectSlot slot;
  slot.name = registry_name;
  if (!gpu_available()) {
    slot.unavailable = "no usable CUDA device (fc::gpu_available() is false)";
    return slot;
  }
  try {
    slot.subject = make_subject(registry_name);
  } catch (const std::exception& e) {
    slot.unavailable = e.what();
  }
  return slot;
}

}  // namespace fc::testing_support
