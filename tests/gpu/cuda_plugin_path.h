// Where the GPU tests find our CUDA plugin: $FLASHCHECK_CUDA_PLUGIN, else its place in the build tree
// relative to the test binary (FLASHCHECK_CUDA_PLUGIN_REL, set by tests/gpu/CMakeLists.txt), which holds
// wherever the tree is moved.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace fc::gpu_test {

inline std::string cuda_plugin_path() {
  if (const char* env = std::getenv("FLASHCHECK_CUDA_PLUGIN")) return env;
  char exe[4096] = {0};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  const std::string path(exe, n > 0 ? size_t(n) : 0);
  return path.substr(0, path.rfind('/') + 1) + FLASHCHECK_CUDA_PLUGIN_REL;
}

}  // namespace fc::gpu_test
