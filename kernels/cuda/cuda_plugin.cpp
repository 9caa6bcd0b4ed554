// C ABI entry points (plugin.h). Three shared libraries are built from this file: the fused kernel v1
// (no subject macro), kernel v2 (FLASHCHECK_V2_SUBJECT) and the naive baseline (FLASHCHECK_NAIVE_SUBJECT).
// Nothing here may throw across the ABI.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>

#include "flashcheck/plugin.h"
#include "fused_attention.h"

namespace {

#if defined(FLASHCHECK_NAIVE_SUBJECT)
constexpr flashcheck::cuda::Subject kSubject = flashcheck::cuda::Subject::kNaive;
#elif defined(FLASHCHECK_V2_SUBJECT)
constexpr flashcheck::cuda::Subject kSubject = flashcheck::cuda::Subject::kFusedV2;
#else
constexpr flashcheck::cuda::Subject kSubject = flashcheck::cuda::Subject::kFused;
#endif

void write_message(char* out, size_t size, const char* text) {
  if (out && size > 0) std::snprintf(out, size, "%s", text);
}

fc_status capabilities(fc_capabilities* out, char* message, size_t message_size) {
  if (!out) {
    write_message(message, message_size, "capabilities: null output");
    return FC_ERR_INVALID;
  }
  flashcheck::cuda::capabilities(kSubject, out);
  write_message(message, message_size, "");
  return FC_OK;
}

fc_status forward(const fc_problem* problem, const fc_buffers* buffers, char* message, size_t message_size) {
  if (!problem || !buffers) {
    write_message(message, message_size, "forward: null problem or buffers");
    return FC_ERR_INVALID;
  }
  try {
    const flashcheck::cuda::Status st = flashcheck::cuda::forward(kSubject, *problem, *buffers);
    write_message(message, message_size, st.message.c_str());
    return st.code;
  } catch (const std::bad_alloc&) {
    write_message(message, message_size, "host memory ran out (std::bad_alloc)");
    return FC_ERR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    write_message(message, message_size, e.what());
    return FC_ERR_RUNTIME;
  } catch (...) {
    write_message(message, message_size, "unknown exception");
    return FC_ERR_RUNTIME;
  }
}

const fc_plugin kPlugin = {FC_ABI_VERSION, &capabilities, &forward};

}  // namespace

extern "C" __attribute__((visibility("default"))) const fc_plugin* flashcheck_plugin_entry(void) { return &kPlugin; }
