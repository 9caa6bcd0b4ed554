// Subjects by name (kernels/subject_registry.h). The CUDA subjects are our CUDA plugins, dlopened from
// where the build (or the install) put them, so the CPU-only build needs nothing from CUDA and the
// plugins (v1, v2, naive), which export the same entry symbol, can live in one process.
#include "kernels/subject_registry.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <type_traits>

#include "kernels/plugin/plugin_subject.h"

#ifdef FLASHCHECK_HAVE_EMULATION
#include "kernels/cpu/emulated_kernel.h"
#endif
#ifdef FLASHCHECK_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace fc {

namespace {

#ifdef FLASHCHECK_HAVE_EMULATION
// parse_bug may return the bug or an optional of it; both spellings are accepted here.
template <class T>
DeliberateBug unwrap_bug(const std::optional<T>& bug, std::string_view name) {
  if (!bug) throw std::invalid_argument("unknown deliberate bug '" + std::string(name) + "' in subject name");
  return *bug;
}
inline DeliberateBug unwrap_bug(DeliberateBug bug, std::string_view) { return bug; }
#endif

// The CUDA subjects' names, in every build (a build without CUDA refuses them by name).
constexpr const char* kCudaSubjectNames[] = {"cuda", "cuda-v2", "cuda-naive"};

#ifdef FLASHCHECK_HAVE_CUDA
// Where our CUDA plugin lives: $FLASHCHECK_<ENV>, the build tree, next to the running executable
// (<prefix>/bin/../lib), or the install prefix's library directory.
std::string find_cuda_plugin(const char* env, const char* build_path, const char* file_name) {
  namespace fs = std::filesystem;
  if (const char* e = std::getenv(env); e && *e) return e;
  std::error_code ec;
  if (fs::exists(build_path, ec)) return build_path;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const char* rel : {"../lib", "../lib64", "."}) {
      const fs::path candidate = exe.parent_path() / rel / file_name;
      if (fs::exists(candidate, ec)) return candidate.lexically_normal().string();
    }
  }
  const fs::path installed = fs::path(FLASHCHECK_INSTALL_LIBDIR) / file_name;
  if (fs::exists(installed, ec)) return installed.string();
  throw SubjectError(std::string("cannot find ") + file_name + " (looked at $" + env + ", " + build_path + ", " +
                     "next to the executable and in " + FLASHCHECK_INSTALL_LIBDIR + ")");
}

// Our CUDA subjects, in kCudaSubjectNames' order: the environment variable that may name the plugin, and
// where the build put it.
struct CudaPlugin {
  const char* name;
  const char* env;
  const char* build_path;
  const char* file_name;
};
constexpr CudaPlugin kCudaPlugins[] = {
    {"cuda", "FLASHCHECK_CUDA_PLUGIN", FLASHCHECK_CUDA_PLUGIN_PATH, FLASHCHECK_CUDA_PLUGIN_FILE},
    {"cuda-v2", "FLASHCHECK_CUDA_V2_PLUGIN", FLASHCHECK_CUDA_V2_PLUGIN_PATH, FLASHCHECK_CUDA_V2_PLUGIN_FILE},
    {"cuda-naive", "FLASHCHECK_CUDA_NAIVE_PLUGIN", FLASHCHECK_CUDA_NAIVE_PLUGIN_PATH, FLASHCHECK_CUDA_NAIVE_PLUGIN_FILE},
};
constexpr bool plugins_follow_names() {
  if (std::size(kCudaPlugins) != std::size(kCudaSubjectNames)) return false;
  for (size_t i = 0; i < std::size(kCudaPlugins); ++i)
    if (std::string_view(kCudaPlugins[i].name) != kCudaSubjectNames[i]) return false;
  return true;
}
static_assert(plugins_follow_names(), "one plugin entry per CUDA subject name, in the same order");

std::unique_ptr<Subject> open_cuda(const CudaPlugin& plugin) {
  if (!gpu_available()) throw SubjectError(std::string(plugin.name) + ": no usable CUDA device in this process");
  return PluginSubject::open(find_cuda_plugin(plugin.env, plugin.build_path, plugin.file_name));
}
#endif

}  // namespace

std::unique_ptr<Subject> make_subject(std::string_view name) {
  constexpr std::string_view plugin_prefix = "plugin:";
  constexpr std::string_view bug_prefix = "emulation+bug:";
  if (name.substr(0, plugin_prefix.size()) == plugin_prefix) {
    const std::string path(name.substr(plugin_prefix.size()));
    if (path.empty()) throw std::invalid_argument("subject 'plugin:' needs a path: plugin:/path/to/libkernel.so");
    return PluginSubject::open(path);
  }
#ifdef FLASHCHECK_HAVE_EMULATION
  if (name == "emulation") return std::make_unique<EmulatedKernel>();
  if (name.substr(0, bug_prefix.size()) == bug_prefix) {
    const std::string bug(name.substr(bug_prefix.size()));
    return std::make_unique<EmulatedKernel>(unwrap_bug(parse_bug(bug), bug));
  }
#else
  if (name == "emulation" || name.substr(0, bug_prefix.size()) == bug_prefix)
    throw SubjectError("subject '" + std::string(name) + "': this flashcheck was built without the CPU emulation");
#endif
  for (const char* cuda_name : kCudaSubjectNames) {
    if (name != cuda_name) continue;
#ifdef FLASHCHECK_HAVE_CUDA
    for (const CudaPlugin& plugin : kCudaPlugins)
      if (name == plugin.name) return open_cuda(plugin);
#endif
    throw SubjectError("subject '" + std::string(name) + "': this flashcheck was built without CUDA");
  }
  std::string known;
  for (const auto& s : available_subjects()) known += (known.empty() ? "" : ", ") + s;
  throw std::invalid_argument("unknown subject '" + std::string(name) + "' (known: " + known +
                              ", emulation+bug:<name>, plugin:<path>)");
}

bool is_cuda_subject(std::string_view name) {
  for (const char* cuda_name : kCudaSubjectNames)
    if (name == cuda_name) return true;
  return false;
}

std::vector<std::string> available_subjects() {
  std::vector<std::string> names;
#ifdef FLASHCHECK_HAVE_EMULATION
  names.push_back("emulation");
#endif
#ifdef FLASHCHECK_HAVE_CUDA
  for (const char* cuda_name : kCudaSubjectNames) names.push_back(cuda_name);
#endif
  return names;
}

bool gpu_available() {
#ifdef FLASHCHECK_HAVE_CUDA
  static const bool available = [] {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no device" error for later callers
      return false;
    }
    return n > 0;
  }();
  return available;
#else
  return false;
#endif
}

std::optional<double> gpu_free_bytes() {
#ifdef FLASHCHECK_HAVE_CUDA
  if (!gpu_available()) return std::nullopt;
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  return double(free_bytes);
#else
  return std::nullopt;
#endif
}

}  // namespace fc
