// Writes the seed corpus (tests/fuzz/seed_cases.h) into a directory:
//   fuzz_seed_corpus tests/corpus
// Each file is the decoder's byte encoding of one seed, for the CPU emulation's capabilities and the
// cpu limits (what the libFuzzer target decodes with).
#include <cstdio>
#include <fstream>
#include <string>

#include "kernels/cpu/emulated_kernel.h"
#include "seed_cases.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seed_corpus <dir>\n");
    return 2;
  }
  const fc::Capabilities caps = fc::EmulatedKernel().capabilities();
  const fc::fuzz::FuzzLimits lim = fc::fuzz::FuzzLimits::cpu();
  for (const auto& seed : fc::fuzz::seeds::all()) {
    const auto bytes = fc::fuzz::encode_case(seed.fields, seed.values, caps, lim);
    const std::string path = std::string(argv[1]) + "/" + seed.name;
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!f) {
      std::fprintf(stderr, "fuzz_seed_corpus: cannot write %s\n", path.c_str());
      return 1;
    }
    const auto c = fc::fuzz::decode_case(bytes, caps, lim);
    std::printf("%-40s %5zu bytes  %s\n", seed.name.c_str(), bytes.size(), c.problem.describe().c_str());
  }
  return 0;
}
