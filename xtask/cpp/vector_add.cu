// The C++ twin of ptx/src/vector_add.rs, for examples/vector_add.rs (--cpp-ptx): the
// kernel is vector_add in kernels.cuh.
// On a machine with CUDA:  nvcc -arch=sm_90 -ptx vector_add.cu -o vector_add.ptx
// (the GPU bundle's run.sh does this, then runs bin/vector_add --cpp-ptx vector_add.ptx).
#include "kernels.cuh"
