// Runner layer: TMA descriptors for kernel v2 (tensor_map.h).
#include "tensor_map.h"

#include <cudaTypedefs.h>

#include <cstdio>

namespace flashcheck::cuda {

namespace {

// cuTensorMapEncodeTiled lives in the driver library; the runtime hands out its entry point, so the
// plugin links no libcuda of its own (it must load into foreign processes).
PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

std::string make_tile_map(CUtensorMap* out, const void* base, int elem_bytes, int d, long long rows, int heads,
                          int batch, const int64_t* strides, int box_rows) {
  if (elem_bytes != 2) return "TMA tiles of 16-bit elements only";
  const auto encode = encoder();
  if (!encode) return "the driver has no cuTensorMapEncodeTiled";
  // The copy engine wants 16-byte aligned addresses and strides; each stride below 2^40 bytes.
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(d), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(heads), static_cast<cuuint64_t>(batch)};
  const cuuint64_t byte_strides[3] = {static_cast<cuuint64_t>(strides[2]) * elem_bytes,
                                      static_cast<cuuint64_t>(strides[1]) * elem_bytes,
                                      static_cast<cuuint64_t>(strides[0]) * elem_bytes};
  for (int i = 0; i < 3; ++i)
    if (strides[2 - i] <= 0 || byte_strides[i] % 16 != 0 || byte_strides[i] >= (cuuint64_t{1} << 40))
      return "a stride the copy engine cannot take (zero, negative, not a multiple of 16 bytes, or >= 2^40 bytes)";
  if (reinterpret_cast<uintptr_t>(base) % 16 != 0) return "a base address not aligned to 16 bytes";
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(box_rows), 1, 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r =
      encode(out, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, const_cast<void*>(base), dims, byte_strides, box, elem_strides,
             CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
             CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "cuTensorMapEncodeTiled failed (CUresult %d)", static_cast<int>(r));
    return buf;
  }
  return {};
}

}  // namespace flashcheck::cuda
