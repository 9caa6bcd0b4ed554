// Subjects by name, as the command line and tests spell them:
//   emulation                 the CPU emulation of the fused kernel
//   emulation+bug:<name>      the emulation with one deliberate bug (the properties' teeth)
//   cuda                      our CUDA fused kernel, v1 (needs a GPU)
//   cuda-v2                   our Hopper kernel, v2 (TMA, wgmma; fp16/bf16 at d = 64, 128, 256)
//   cuda-naive                the CUDA baseline that materialises S and P
//   plugin:<path>             any kernel behind the C ABI in include/flashcheck/plugin.h
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/subject.h"

namespace fc {

// Throws std::invalid_argument for an unknown name, and SubjectError when the subject exists but
// cannot be opened (no GPU, a plugin that fails to load or has the wrong ABI version).
std::unique_ptr<Subject> make_subject(std::string_view name);

// The names make_subject accepts in this build, for --help and for "every subject" defaults.
std::vector<std::string> available_subjects();

// True when a CUDA device is usable from this process (false in a build without CUDA).
bool gpu_available();

// True for the names of our CUDA subjects (cuda, cuda-v2, cuda-naive), in any build.
bool is_cuda_subject(std::string_view name);

// Free memory on the current CUDA device, in bytes; nullopt without a usable GPU.
std::optional<double> gpu_free_bytes();

}  // namespace fc
