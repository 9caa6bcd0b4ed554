// FC_HOST_DEVICE marks a function of the exact side that the GPU oracle (reference/cuda/) calls too: one
// definition, compiled for the host by the C++ compiler and for both by nvcc, so that the CPU and the GPU
// cannot drift apart. Such functions use only scalars and <cmath>.
#pragma once

#if defined(__CUDACC__)
#define FC_HOST_DEVICE __host__ __device__
#else
#define FC_HOST_DEVICE
#endif
