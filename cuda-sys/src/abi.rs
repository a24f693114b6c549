//! Compile-time layout checks of the structs cudadrv (cuda-core/) builds (x86_64/aarch64 Linux).
//!
//! The numbers are those of the C compiler for these headers; tests/abi.rs compares the
//! same structs (and more fields) against a C probe compiled with `cc`.

use core::mem::{align_of, offset_of, size_of};

use static_assertions::const_assert_eq;

use crate::*;

const_assert_eq!(size_of::<CUlaunchAttributeValue>(), 64);
const_assert_eq!(size_of::<CUlaunchAttribute>(), 72);
const_assert_eq!(offset_of!(CUlaunchAttribute, value), 8);
const_assert_eq!(size_of::<CUlaunchConfig>(), 56);
const_assert_eq!(offset_of!(CUlaunchConfig, sharedMemBytes), 24);
const_assert_eq!(offset_of!(CUlaunchConfig, hStream), 32);
const_assert_eq!(offset_of!(CUlaunchConfig, attrs), 40);
const_assert_eq!(offset_of!(CUlaunchConfig, numAttrs), 48);
const_assert_eq!(size_of::<CUgraphEdgeData>(), 8);
const_assert_eq!(offset_of!(CUgraphEdgeData, from_port), 0);
const_assert_eq!(offset_of!(CUgraphEdgeData, to_port), 1);
const_assert_eq!(offset_of!(CUgraphEdgeData, type_), 2);
const_assert_eq!(size_of::<CUDA_KERNEL_NODE_PARAMS>(), 72);
const_assert_eq!(offset_of!(CUDA_KERNEL_NODE_PARAMS, ctx), 64);
const_assert_eq!(offset_of!(CUDA_KERNEL_NODE_PARAMS, kernelParams), 40);
const_assert_eq!(offset_of!(CUDA_KERNEL_NODE_PARAMS, kern), 56);
const_assert_eq!(size_of::<CUgraphNodeParams>(), 256);
const_assert_eq!(align_of::<CUgraphNodeParams>(), 8);
const_assert_eq!(size_of::<CUmemPoolProps>(), 88);
const_assert_eq!(size_of::<CUaccessPolicyWindow>(), 32);
const_assert_eq!(size_of::<CUdeviceptr>(), 8);
const_assert_eq!(size_of::<CUresult>(), 4);
const_assert_eq!(size_of::<cudaError_t>(), 4);
