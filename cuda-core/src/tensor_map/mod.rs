//! Tensor maps for the Tensor Memory Accelerator (driver API "Tensor Map Object
//! Management"; Programming Guide 4.11.2): [`TiledDesc`] describes a tensor in global
//! memory and the box a `cp.async.bulk.tensor` moves, [`Im2colDesc`] a channels-innermost
//! tensor read as im2col columns (convolutions), [`TensorMap`] is the encoded 128-byte
//! `CUtensorMap` a kernel reads.
//!
//! Every requirement `cuTensorMapEncodeTiled` and `cuTensorMapEncodeIm2col` document is
//! checked before the call, and a broken one is reported as [`Error::TensorMap`] naming
//! the rule and the dimension (the driver itself only answers
//! `CUDA_ERROR_INVALID_VALUE`). On top of the driver's rules, [`TensorMap::tiled`] and
//! [`TensorMap::im2col`] check that every element the map can address lies in the buffer
//! it borrows, so a copy through the map cannot leave the allocation.
//!
//! Dimensions are innermost first, as the driver takes them: a row-major `rows x cols`
//! matrix is `dims = [cols, rows]`, its row pitch `strides = [pitch_bytes]`.
//!
//! ```no_run
//! # fn main() -> cudadrv::Result<()> {
//! use cudadrv::tensor_map::{TensorMap, TiledDesc};
//! use cudadrv::{Context, Device, DeviceBuffer};
//! let ctx = Context::primary(Device::get(0)?)?;
//! let (w, h) = (1000u64, 600u64);
//! let image = DeviceBuffer::<f32>::zeroed(&ctx, (w * h) as usize)?;
//! // 32 x 32 tiles of a dense row-major image.
//! let desc = TiledDesc::new::<f32>(&[w, h], &[32, 32])?;
//! let map = TensorMap::tiled(&desc, &image)?;
//! // A Rust kernel takes a pointer to a copy in global memory.
//! let global = map.upload(&ctx)?;
//! # let _ = global.as_ptr(); Ok(()) }
//! ```
//!
//! # How a kernel gets the map
//! The TMA unit reads the map through a generic address of global, const or parameter
//! memory, 64-byte aligned. From a Rust kernel, upload it ([`TensorMap::upload`]) and
//! pass the pointer: that is the path that works (checked on an H100, `hw_tma`). Passed
//! by value, the map does not work from Rust: rustc declares a kernel parameter at most
//! 16-byte aligned (`.param .align 16`), so its parameter-symbol address is misaligned
//! (`CUDA_ERROR_MISALIGNED_ADDRESS`), and taking `&param` in Rust gives a copy in local
//! memory, which TMA cannot read (`CUDA_ERROR_ILLEGAL_ADDRESS`). By value suits kernels
//! built by nvcc with a `__grid_constant__ const CUtensorMap` parameter, which nvcc
//! declares `.align 64`.

use core::marker::PhantomData;

use cudadrv_sys::{
    CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};

use crate::args::DeviceRepr;
use crate::driver::api;
use crate::driver::context::Context;
use crate::error::{Error, Result, drv};
use crate::memory::{DeviceBuffer, Pod};

/// The most dimensions a tensor map has.
pub const MAX_RANK: usize = 5;
/// The largest box extent in any dimension.
pub const MAX_BOX_DIM: u32 = 256;
/// The largest element stride.
pub const MAX_ELEMENT_STRIDE: u32 = 8;

/// Element types of a tensor map (`CUtensorMapDataType`, the ones sm_90 has).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorDataType {
    /// `UINT8`.
    U8,
    /// `UINT16`.
    U16,
    /// `UINT32`.
    U32,
    /// `INT32`.
    I32,
    /// `UINT64`.
    U64,
    /// `INT64`.
    I64,
    /// `FLOAT16`.
    F16,
    /// `FLOAT32`.
    F32,
    /// `FLOAT64`.
    F64,
    /// `BFLOAT16`.
    Bf16,
    /// `FLOAT32_FTZ`.
    F32Ftz,
    /// `TFLOAT32`.
    Tf32,
    /// `TFLOAT32_FTZ`.
    Tf32Ftz,
}

impl TensorDataType {
    /// Size of one element in bytes.
    #[must_use]
    pub const fn size(self) -> u64 {
        match self {
            Self::U8 => 1,
            Self::U16 | Self::F16 | Self::Bf16 => 2,
            Self::U32 | Self::I32 | Self::F32 | Self::F32Ftz | Self::Tf32 | Self::Tf32Ftz => 4,
            Self::U64 | Self::I64 | Self::F64 => 8,
        }
    }

    /// Whether the type is a floating-point type (NaN out-of-bounds fill is allowed).
    #[must_use]
    pub const fn is_float(self) -> bool {
        matches!(
            self,
            Self::F16
                | Self::F32
                | Self::F64
                | Self::Bf16
                | Self::F32Ftz
                | Self::Tf32
                | Self::Tf32Ftz
        )
    }

    /// The raw `CUtensorMapDataType`.
    #[must_use]
    pub const fn as_raw(self) -> CUtensorMapDataType {
        type D = CUtensorMapDataType;
        match self {
            Self::U8 => D::CU_TENSOR_MAP_DATA_TYPE_UINT8,
            Self::U16 => D::CU_TENSOR_MAP_DATA_TYPE_UINT16,
            Self::U32 => D::CU_TENSOR_MAP_DATA_TYPE_UINT32,
            Self::I32 => D::CU_TENSOR_MAP_DATA_TYPE_INT32,
            Self::U64 => D::CU_TENSOR_MAP_DATA_TYPE_UINT64,
            Self::I64 => D::CU_TENSOR_MAP_DATA_TYPE_INT64,
            Self::F16 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            Self::F32 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            Self::F64 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
            Self::Bf16 => D::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            Self::F32Ftz => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
            Self::Tf32 => D::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
            Self::Tf32Ftz => D::CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
        }
    }
}

mod sealed {
    /// Keeps [`TensorElement`](super::TensorElement) to the numbers listed here.
    pub trait Sealed {}
}

/// Host types with a tensor-map element type of the same size.
///
/// Sealed: the element size the driver encodes must be the host type's, or a map over a
/// buffer would reach past its end; the implementations are this crate's.
pub trait TensorElement: Pod + sealed::Sealed {
    /// The element type the map is encoded with.
    const DATA_TYPE: TensorDataType;
}

macro_rules! tensor_element {
    ($($t:ty => $d:ident),* $(,)?) => {
        $(impl sealed::Sealed for $t {}
        impl TensorElement for $t {
            const DATA_TYPE: TensorDataType = TensorDataType::$d;
        })*
    };
}
tensor_element!(u8 => U8, u16 => U16, u32 => U32, i32 => I32, u64 => U64, i64 => I64,
    f32 => F32, f64 => F64);

/// Interleaved layouts (`CUtensorMapInterleave`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Interleave {
    /// `NONE`: plain layout.
    #[default]
    None,
    /// `16B`: NC/8HWC8-style, 16-byte channel groups.
    B16,
    /// `32B`: NC/16HWC16-style, 32-byte channel groups (needs [`Swizzle::B32`]).
    B32,
}

/// Shared-memory bank swizzle of the box (`CUtensorMapSwizzle`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Swizzle {
    /// `NONE`: the box lands row-major.
    #[default]
    None,
    /// `32B`: 16-byte chunks swizzled within 32 bytes.
    B32,
    /// `64B`: 16-byte chunks swizzled within 64 bytes.
    B64,
    /// `128B`: 16-byte chunks swizzled within 128 bytes.
    B128,
}

impl Swizzle {
    /// The swizzle span in bytes (the largest inner box extent it allows), `None` for no
    /// swizzle.
    #[must_use]
    pub const fn span(self) -> Option<u64> {
        match self {
            Self::None => None,
            Self::B32 => Some(32),
            Self::B64 => Some(64),
            Self::B128 => Some(128),
        }
    }
}

/// L2 fetch size (`CUtensorMapL2promotion`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum L2Promotion {
    /// `NONE`.
    #[default]
    None,
    /// `L2_64B`.
    B64,
    /// `L2_128B`.
    B128,
    /// `L2_256B`.
    B256,
}

/// What out-of-bounds elements of a box read as (`CUtensorMapFloatOOBfill`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OobFill {
    /// `NONE`: zero.
    #[default]
    Zero,
    /// `NAN_REQUEST_ZERO_FMA`: a NaN that FMA treats as zero (floating-point types only).
    NanRequestZeroFma,
}

/// A tiled tensor map's parameters (`cuTensorMapEncodeTiled` without the address):
/// build with [`new`](Self::new), adjust with the setters, encode with
/// [`TensorMap::tiled`]. [`validate`](Self::validate) checks the driver's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiledDesc {
    data_type: TensorDataType,
    rank: usize,
    dims: [u64; MAX_RANK],
    strides: [u64; MAX_RANK - 1],
    box_dims: [u32; MAX_RANK],
    element_strides: [u32; MAX_RANK],
    interleave: Interleave,
    swizzle: Swizzle,
    l2_promotion: L2Promotion,
    oob_fill: OobFill,
}

/// Builds an [`Error::TensorMap`].
const fn rule(rule: &'static str, dim: Option<usize>) -> Error {
    Error::TensorMap {
        rule,
        dim: match dim {
            Some(d) => Some(d as u8),
            None => None,
        },
    }
}

impl TiledDesc {
    /// A dense tensor of `T` with extents `dims` (elements, innermost first) moved in
    /// boxes of `box_dims` (one per dimension): strides packed
    /// (`strides[i] = dims[0] * .. * dims[i] * size`), element strides 1, no
    /// interleave, no swizzle, no L2 promotion, zero fill.
    ///
    /// # Errors
    /// [`Error::TensorMap`] when `dims` is empty or longer than [`MAX_RANK`], or
    /// `box_dims` has another length. The other rules are checked by
    /// [`validate`](Self::validate).
    pub fn new<T: TensorElement>(dims: &[u64], box_dims: &[u32]) -> Result<Self> {
        Self::with_type(T::DATA_TYPE, dims, box_dims)
    }

    /// As [`new`](Self::new) with an explicit element type (for types without a Rust
    /// counterpart: `F16`, `Bf16`, `Tf32`).
    ///
    /// # Errors
    /// As [`new`](Self::new).
    pub fn with_type(data_type: TensorDataType, dims: &[u64], box_dims: &[u32]) -> Result<Self> {
        let rank = dims.len();
        if rank == 0 || rank > MAX_RANK {
            return Err(rule("the rank must be 1..=5", None));
        }
        if box_dims.len() != rank {
            return Err(rule("box_dims needs one extent per dimension", None));
        }
        let mut d = Self {
            data_type,
            rank,
            dims: [1; MAX_RANK],
            strides: [0; MAX_RANK - 1],
            box_dims: [1; MAX_RANK],
            element_strides: [1; MAX_RANK],
            interleave: Interleave::None,
            swizzle: Swizzle::None,
            l2_promotion: L2Promotion::None,
            oob_fill: OobFill::Zero,
        };
        d.dims[..rank].copy_from_slice(dims);
        d.box_dims[..rank].copy_from_slice(box_dims);
        let mut stride = data_type.size();
        for (slot, &dim) in d.strides.iter_mut().zip(&dims[..rank - 1]) {
            stride = stride.saturating_mul(dim);
            *slot = stride;
        }
        Ok(d)
    }

    /// Byte strides of dimensions `1..rank` (`strides[i]` is the distance between
    /// consecutive indices of dimension `i + 1`), for padded rows or sub-tensors.
    ///
    /// # Errors
    /// [`Error::TensorMap`] unless `strides.len() == rank - 1`.
    pub fn strides(mut self, strides: &[u64]) -> Result<Self> {
        if strides.len() != self.rank - 1 {
            return Err(rule("strides needs rank - 1 byte strides", None));
        }
        self.strides[..self.rank - 1].copy_from_slice(strides);
        Ok(self)
    }

    /// Traversal steps per dimension (1..=8; the first is ignored without interleave).
    ///
    /// # Errors
    /// [`Error::TensorMap`] unless `element_strides.len() == rank`.
    pub fn element_strides(mut self, element_strides: &[u32]) -> Result<Self> {
        if element_strides.len() != self.rank {
            return Err(rule("element_strides needs one step per dimension", None));
        }
        self.element_strides[..self.rank].copy_from_slice(element_strides);
        Ok(self)
    }

    /// Sets the interleave.
    #[must_use]
    pub const fn interleave(mut self, interleave: Interleave) -> Self {
        self.interleave = interleave;
        self
    }

    /// Sets the swizzle.
    #[must_use]
    pub const fn swizzle(mut self, swizzle: Swizzle) -> Self {
        self.swizzle = swizzle;
        self
    }

    /// Sets the L2 promotion.
    #[must_use]
    pub const fn l2_promotion(mut self, l2: L2Promotion) -> Self {
        self.l2_promotion = l2;
        self
    }

    /// Sets the out-of-bounds fill.
    #[must_use]
    pub const fn oob_fill(mut self, fill: OobFill) -> Self {
        self.oob_fill = fill;
        self
    }

    /// The element type.
    #[must_use]
    pub const fn data_type(&self) -> TensorDataType {
        self.data_type
    }

    /// The number of dimensions.
    #[must_use]
    pub const fn rank(&self) -> usize {
        self.rank
    }

    /// The extents, innermost first.
    #[must_use]
    pub fn dims(&self) -> &[u64] {
        &self.dims[..self.rank]
    }

    /// The box extents, innermost first.
    #[must_use]
    pub fn box_dims(&self) -> &[u32] {
        &self.box_dims[..self.rank]
    }

    /// Bytes one box occupies in shared memory (what a load's mbarrier must expect:
    /// out-of-bounds elements count, they are filled), with element strides applied.
    #[must_use]
    pub fn box_bytes(&self) -> u64 {
        let mut n = self.data_type.size();
        let steps = self.box_dims.iter().zip(&self.element_strides);
        for (i, (&extent, &step)) in steps.take(self.rank).enumerate() {
            let steps = if i == 0 && self.interleave == Interleave::None {
                u64::from(extent)
            } else {
                u64::from(extent).div_ceil(u64::from(step.max(1)))
            };
            n = n.saturating_mul(steps);
        }
        n
    }

    /// One past the last byte the map can address, relative to its base address: the
    /// bytes the tensor spans in global memory.
    #[must_use]
    pub fn span_bytes(&self) -> u64 {
        let size = self.data_type.size();
        let mut last = (self.dims[0].saturating_sub(1)).saturating_mul(size);
        let outer = self.dims.iter().skip(1).zip(&self.strides);
        for (&dim, &stride) in outer.take(self.rank.saturating_sub(1)) {
            last = last.saturating_add(dim.saturating_sub(1).saturating_mul(stride));
        }
        last.saturating_add(size)
    }

    /// Checks every rule `cuTensorMapEncodeTiled` documents for these parameters and a
    /// base address `global_address`. It makes no driver call, and no field value makes
    /// it panic: a rank outside 1..=5 is a broken rule like the others.
    ///
    /// # Errors
    /// [`Error::TensorMap`] naming the first rule broken (and the dimension, where one).
    pub fn validate(&self, global_address: u64) -> Result<()> {
        let size = self.data_type.size();
        let rank = self.rank;
        if !(1..=MAX_RANK).contains(&rank) {
            return Err(rule("the rank must be 1..=5", None));
        }
        let il32 = self.interleave == Interleave::B32;
        if self.interleave != Interleave::None && rank < 3 {
            return Err(rule("an interleaved layout needs rank 3..=5", None));
        }
        if global_address % 16 != 0 {
            return Err(rule("the global address must be 16-byte aligned", None));
        }
        if il32 && global_address % 32 != 0 {
            return Err(rule(
                "with 32-byte interleave the global address must be 32-byte aligned",
                None,
            ));
        }
        // `rank` is 1..=MAX_RANK from here: the slices below are in bounds.
        let dims = &self.dims[..rank];
        let extents = self.box_dims[..rank]
            .iter()
            .zip(&self.element_strides[..rank]);
        for (i, (&dim, (&extent, &step))) in dims.iter().zip(extents).enumerate() {
            if dim == 0 || dim > 1 << 32 {
                return Err(rule("each global dimension must be 1..=2^32", Some(i)));
            }
            if extent == 0 || extent > MAX_BOX_DIM {
                return Err(rule("each box extent must be 1..=256", Some(i)));
            }
            if step == 0 || step > MAX_ELEMENT_STRIDE {
                return Err(rule("each element stride must be 1..=8", Some(i)));
            }
        }
        // The bytes the dimensions below `i + 1` span; saturated, a product past u64 is
        // more than any stride (each is below 2^40) can cover.
        let mut prev = dims[0].saturating_mul(size);
        let outer = self.strides[..rank - 1].iter().zip(&dims[1..]);
        for (i, (&s, &dim)) in outer.enumerate() {
            if s % 16 != 0 {
                return Err(rule(
                    "each stride must be a multiple of 16 bytes",
                    Some(i + 1),
                ));
            }
            if il32 && s % 32 != 0 {
                return Err(rule(
                    "with 32-byte interleave each stride must be a multiple of 32 bytes",
                    Some(i + 1),
                ));
            }
            if s >= 1 << 40 {
                return Err(rule("each stride must be below 2^40 bytes", Some(i + 1)));
            }
            if s < prev {
                return Err(rule(
                    "each stride must cover the previous dimension (dims overlap)",
                    Some(i + 1),
                ));
            }
            prev = s.saturating_mul(dim);
        }
        // At most 256 * 8 (both checked above).
        let inner_bytes = u64::from(self.box_dims[0])
            .checked_mul(size)
            .ok_or(rule("the inner box extent in bytes overflows", Some(0)))?;
        if self.interleave == Interleave::None && inner_bytes % 16 != 0 {
            return Err(rule(
                "the inner box extent in bytes (box_dims[0] * element size) must be a multiple \
                 of 16",
                Some(0),
            ));
        }
        if il32 && self.swizzle != Swizzle::B32 {
            return Err(rule("32-byte interleave needs the 32-byte swizzle", None));
        }
        let span = match self.interleave {
            Interleave::None => self.swizzle.span(),
            _ => None,
        };
        if span.is_some_and(|span| inner_bytes > span) {
            return Err(rule(
                "with a swizzle the inner box extent in bytes must not exceed the swizzle span",
                Some(0),
            ));
        }
        if self.oob_fill == OobFill::NanRequestZeroFma && !self.data_type.is_float() {
            return Err(rule(
                "the NaN out-of-bounds fill needs a floating-point element type",
                None,
            ));
        }
        Ok(())
    }

    /// Whether `buf` holds this tensor: the same element size, and the span inside it.
    fn fits<T: Pod>(&self, buf: &DeviceBuffer<T>) -> Result<()> {
        if core::mem::size_of::<T>() as u64 != self.data_type.size() {
            return Err(rule(
                "the buffer's element size differs from the map's element type",
                None,
            ));
        }
        if self.span_bytes() > buf.size_bytes() as u64 {
            return Err(rule(
                "the tensor spans more bytes than the buffer holds",
                None,
            ));
        }
        Ok(())
    }

    fn raw_interleave(&self) -> CUtensorMapInterleave {
        type I = CUtensorMapInterleave;
        match self.interleave {
            Interleave::None => I::CU_TENSOR_MAP_INTERLEAVE_NONE,
            Interleave::B16 => I::CU_TENSOR_MAP_INTERLEAVE_16B,
            Interleave::B32 => I::CU_TENSOR_MAP_INTERLEAVE_32B,
        }
    }

    fn raw_swizzle(&self) -> CUtensorMapSwizzle {
        type S = CUtensorMapSwizzle;
        match self.swizzle {
            Swizzle::None => S::CU_TENSOR_MAP_SWIZZLE_NONE,
            Swizzle::B32 => S::CU_TENSOR_MAP_SWIZZLE_32B,
            Swizzle::B64 => S::CU_TENSOR_MAP_SWIZZLE_64B,
            Swizzle::B128 => S::CU_TENSOR_MAP_SWIZZLE_128B,
        }
    }

    fn raw_l2(&self) -> CUtensorMapL2promotion {
        type L = CUtensorMapL2promotion;
        match self.l2_promotion {
            L2Promotion::None => L::CU_TENSOR_MAP_L2_PROMOTION_NONE,
            L2Promotion::B64 => L::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
            L2Promotion::B128 => L::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            L2Promotion::B256 => L::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        }
    }

    fn raw_oob(&self) -> CUtensorMapFloatOOBfill {
        type F = CUtensorMapFloatOOBfill;
        match self.oob_fill {
            OobFill::Zero => F::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            OobFill::NanRequestZeroFma => F::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
        }
    }
}

/// The largest `pixels_per_column` of an im2col map.
pub const MAX_IM2COL_PIXELS: u32 = 1024;

/// An im2col tensor map's parameters (`cuTensorMapEncodeIm2col` without the address):
/// a tensor of rank 3..=5 laid out channels innermost (NWC, NHWC, NDHWC: `dims[0]` is
/// C, the last is N, the ones between are the spatial W, H, D) from which each load
/// gathers `pixels_per_column` pixels of `channels_per_pixel` channels.
///
/// The spatial *bounding box* of dimension `d` (W, H, D) spans coordinates
/// `lower[d] ..= dims[d] - 1 + upper[d]` (for a convolution with padding `p` and a
/// kernel of extent `k`: `lower = -p`, `upper = p - (k - 1)`, so that the box holds the
/// kernel's first tap for every output pixel). A load names a starting pixel inside
/// the box and per-dimension offsets (the kernel tap); the pixels are taken in box order
/// (W fastest, then H, D, then the next N), each read at its coordinates plus the
/// offsets, out-of-bounds reads filled. Build with [`new`](Self::new), encode with
/// [`TensorMap::im2col`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Im2colDesc {
    base: TiledDesc,
    lower: [i32; MAX_RANK - 2],
    upper: [i32; MAX_RANK - 2],
    pixels_per_column: u32,
}

impl Im2colDesc {
    /// A dense channels-innermost tensor of `T` with extents `dims` (C first, N last),
    /// bounding-box corners `lower` and `upper` (one per spatial dimension), loads of
    /// `channels_per_pixel` x `pixels_per_column`; strides packed, element strides 1,
    /// no interleave, no swizzle, no L2 promotion, zero fill (setters as on
    /// [`TiledDesc`] through [`map`](Self::map)).
    ///
    /// # Errors
    /// [`Error::TensorMap`] unless the rank is 3..=5 and `lower` and `upper` have
    /// `rank - 2` entries. The other rules are checked by [`validate`](Self::validate).
    pub fn new<T: TensorElement>(
        dims: &[u64],
        lower: &[i32],
        upper: &[i32],
        channels_per_pixel: u32,
        pixels_per_column: u32,
    ) -> Result<Self> {
        let rank = dims.len();
        if !(3..=MAX_RANK).contains(&rank) {
            return Err(rule("an im2col map needs rank 3..=5", None));
        }
        if lower.len() != rank - 2 || upper.len() != rank - 2 {
            return Err(rule(
                "the im2col corners need one entry per spatial dimension (rank - 2)",
                None,
            ));
        }
        let mut box_dims = [1u32; MAX_RANK];
        box_dims[0] = channels_per_pixel;
        let base = TiledDesc::new::<T>(dims, &box_dims[..rank])?;
        let mut d = Self {
            base,
            lower: [0; MAX_RANK - 2],
            upper: [0; MAX_RANK - 2],
            pixels_per_column,
        };
        d.lower[..rank - 2].copy_from_slice(lower);
        d.upper[..rank - 2].copy_from_slice(upper);
        Ok(d)
    }

    /// Adjusts the layout parameters shared with tiled maps (strides, element strides,
    /// interleave, swizzle, L2 promotion, fill); the box extents are this map's, and the
    /// rank must stay (the corners have one entry per spatial dimension).
    ///
    /// # Errors
    /// What `f` returns; [`Error::TensorMap`] when the descriptor it returns has another
    /// rank.
    pub fn map(mut self, f: impl FnOnce(TiledDesc) -> Result<TiledDesc>) -> Result<Self> {
        let (rank, box_dims) = (self.base.rank, self.base.box_dims);
        self.base = f(self.base)?;
        if self.base.rank != rank {
            return Err(rule(
                "the closure of Im2colDesc::map must keep the rank",
                None,
            ));
        }
        self.base.box_dims = box_dims;
        Ok(self)
    }

    /// The layout parameters shared with tiled maps.
    #[must_use]
    pub const fn layout(&self) -> &TiledDesc {
        &self.base
    }

    /// Channels per pixel of one load.
    #[must_use]
    pub const fn channels_per_pixel(&self) -> u32 {
        self.base.box_dims[0]
    }

    /// Pixels of one load.
    #[must_use]
    pub const fn pixels_per_column(&self) -> u32 {
        self.pixels_per_column
    }

    /// Bytes one load puts in shared memory (what its mbarrier must expect):
    /// `pixels_per_column * channels_per_pixel * element size`.
    #[must_use]
    pub fn box_bytes(&self) -> u64 {
        u64::from(self.pixels_per_column)
            .saturating_mul(u64::from(self.channels_per_pixel()))
            .saturating_mul(self.base.data_type.size())
    }

    /// The range each bounding-box corner must lie in for this rank: `-2^15 ..
    /// 2^15` (rank 3), `-2^7 .. 2^7` (rank 4), `-2^4 .. 2^4` (rank 5).
    #[must_use]
    pub const fn corner_range(&self) -> (i32, i32) {
        let bits = match self.base.rank {
            3 => 15,
            4 => 7,
            _ => 4,
        };
        (-(1 << bits), (1 << bits) - 1)
    }

    /// Checks the rank (3..=5), the rules of [`TiledDesc::validate`] (with
    /// `channels_per_pixel` as the inner box extent) and those of im2col maps:
    /// `pixels_per_column` 1..=1024 and the corners in
    /// [`corner_range`](Self::corner_range). Like [`TiledDesc::validate`], it makes no
    /// driver call and no field value makes it panic.
    ///
    /// # Errors
    /// [`Error::TensorMap`] naming the first rule broken.
    pub fn validate(&self, global_address: u64) -> Result<()> {
        let rank = self.base.rank;
        if !(3..=MAX_RANK).contains(&rank) {
            return Err(rule("an im2col map needs rank 3..=5", None));
        }
        self.base.validate(global_address)?;
        if self.pixels_per_column == 0 || self.pixels_per_column > MAX_IM2COL_PIXELS {
            return Err(rule("pixels_per_column must be 1..=1024", None));
        }
        let (lo, hi) = self.corner_range();
        // `rank` is 3..=MAX_RANK: `rank - 2` corners are in bounds.
        let corners = self.lower[..rank - 2].iter().zip(&self.upper[..rank - 2]);
        for (d, (&lower, &upper)) in corners.enumerate() {
            for c in [lower, upper] {
                if c < lo || c > hi {
                    return Err(rule(
                        "each im2col corner must fit the rank's range (rank 3: 16 bits, \
                         rank 4: 8 bits, rank 5: 5 bits, signed)",
                        Some(d + 1),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// An encoded tiled tensor map (`CUtensorMap`, 128 bytes) over memory borrowed for `'a`.
///
/// Passed to a kernel by value it is a 64-byte aligned 128-byte parameter (for nvcc
/// kernels taking a `__grid_constant__ const CUtensorMap`); Rust kernels take a pointer
/// to the copy [`upload`](Self::upload) puts in global memory (see the module docs).
#[derive(Clone, Copy)]
#[repr(C)]
pub struct TensorMap<'a> {
    raw: CUtensorMap,
    _mem: PhantomData<&'a [u8]>,
}

impl core::fmt::Debug for TensorMap<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TensorMap").finish_non_exhaustive()
    }
}

// SAFETY: a `CUtensorMap` is 128 plain bytes (no padding: `[u64; 16]`); the device
// parameter is `.param .align 64 .b8 [128]`, and 64 divides 128. The phantom field is
// zero-sized.
unsafe impl DeviceRepr for TensorMap<'_> {
    const DEVICE_SIZE: usize = 128;
    const DEVICE_ALIGN: usize = 64;
}

const _: () = assert!(core::mem::size_of::<TensorMap<'static>>() == 128);

impl<'a> TensorMap<'a> {
    /// `cuTensorMapEncodeTiled` over `buf` after [`TiledDesc::validate`], also checking
    /// that the element types match and that the tensor's span
    /// ([`TiledDesc::span_bytes`]) fits in the buffer.
    ///
    /// # Errors
    /// [`Error::TensorMap`] for a broken rule; driver errors (`CUDA_ERROR_INVALID_VALUE`
    /// for anything the checks above do not know).
    #[doc(alias = "cuTensorMapEncodeTiled")]
    pub fn tiled<T: Pod>(desc: &TiledDesc, buf: &'a DeviceBuffer<T>) -> Result<Self> {
        // Every check before the first driver call (entering the context).
        desc.validate(buf.as_raw())?;
        desc.fits(buf)?;
        let _g = buf.context().enter()?;
        // SAFETY: the span fits in `buf`, which `'a` keeps alive.
        unsafe { Self::tiled_raw(desc, buf.as_raw()) }
    }

    /// `cuTensorMapEncodeTiled` at a raw device address, after
    /// [`TiledDesc::validate`].
    ///
    /// # Safety
    /// `global_address..global_address + desc.span_bytes()` must stay allocated for `'a`
    /// (kernels that use the map access it).
    ///
    /// # Errors
    /// As [`tiled`](Self::tiled).
    #[doc(alias = "cuTensorMapEncodeTiled")]
    pub unsafe fn tiled_raw(desc: &TiledDesc, global_address: u64) -> Result<Self> {
        desc.validate(global_address)?;
        let cu = api()?;
        let mut raw = CUtensorMap { opaque: [0; 16] };
        // SAFETY: the arrays hold `rank` (strides: `rank - 1`) valid entries; `raw` is a
        // 128-byte aligned out-parameter (bindgen gives `CUtensorMap` that alignment);
        // the encode only writes `raw`.
        unsafe {
            drv!(
                cu,
                cuTensorMapEncodeTiled(
                    &mut raw,
                    desc.data_type.as_raw(),
                    desc.rank as u32,
                    global_address as *mut core::ffi::c_void,
                    desc.dims.as_ptr(),
                    desc.strides.as_ptr(),
                    desc.box_dims.as_ptr(),
                    desc.element_strides.as_ptr(),
                    desc.raw_interleave(),
                    desc.raw_swizzle(),
                    desc.raw_l2(),
                    desc.raw_oob()
                )
            )?;
        }
        Ok(Self {
            raw,
            _mem: PhantomData,
        })
    }

    /// `cuTensorMapEncodeIm2col` over `buf` after [`Im2colDesc::validate`], also
    /// checking that the element types match and that the tensor fits in the buffer.
    ///
    /// # Errors
    /// As [`tiled`](Self::tiled).
    #[doc(alias = "cuTensorMapEncodeIm2col")]
    pub fn im2col<T: Pod>(desc: &Im2colDesc, buf: &'a DeviceBuffer<T>) -> Result<Self> {
        // Every check before the first driver call (entering the context).
        desc.validate(buf.as_raw())?;
        desc.base.fits(buf)?;
        let _g = buf.context().enter()?;
        // SAFETY: the span fits in `buf`, which `'a` keeps alive.
        unsafe { Self::im2col_raw(desc, buf.as_raw()) }
    }

    /// `cuTensorMapEncodeIm2col` at a raw device address, after
    /// [`Im2colDesc::validate`].
    ///
    /// # Safety
    /// As [`tiled_raw`](Self::tiled_raw), with `desc.layout().span_bytes()`.
    ///
    /// # Errors
    /// As [`tiled`](Self::tiled).
    #[doc(alias = "cuTensorMapEncodeIm2col")]
    pub unsafe fn im2col_raw(desc: &Im2colDesc, global_address: u64) -> Result<Self> {
        desc.validate(global_address)?;
        let b = &desc.base;
        let cu = api()?;
        let mut raw = CUtensorMap { opaque: [0; 16] };
        // SAFETY: the arrays hold `rank` (strides: `rank - 1`, corners: `rank - 2`) valid
        // entries; `raw` is an aligned out-parameter; the encode only writes `raw`.
        unsafe {
            drv!(
                cu,
                cuTensorMapEncodeIm2col(
                    &mut raw,
                    b.data_type.as_raw(),
                    b.rank as u32,
                    global_address as *mut core::ffi::c_void,
                    b.dims.as_ptr(),
                    b.strides.as_ptr(),
                    desc.lower.as_ptr(),
                    desc.upper.as_ptr(),
                    desc.channels_per_pixel(),
                    desc.pixels_per_column,
                    b.element_strides.as_ptr(),
                    b.raw_interleave(),
                    b.raw_swizzle(),
                    b.raw_l2(),
                    b.raw_oob()
                )
            )?;
        }
        Ok(Self {
            raw,
            _mem: PhantomData,
        })
    }

    /// The raw `CUtensorMap`.
    #[must_use]
    pub const fn as_raw(&self) -> &CUtensorMap {
        &self.raw
    }

    /// Copies the map into global memory of `ctx` (for kernels that take a pointer to
    /// it); the copy borrows the same memory.
    ///
    /// # Errors
    /// Driver errors.
    pub fn upload(&self, ctx: &Context) -> Result<GlobalTensorMap<'a>> {
        Ok(GlobalTensorMap {
            buf: DeviceBuffer::from_slice(ctx, &self.raw.opaque)?,
            _mem: PhantomData,
        })
    }
}

/// A [`TensorMap`] copied into global memory (see [`TensorMap::upload`]): pass
/// [`as_ptr`](Self::as_ptr) to the kernel.
#[derive(Debug)]
pub struct GlobalTensorMap<'a> {
    buf: DeviceBuffer<u64>,
    _mem: PhantomData<&'a [u8]>,
}

impl GlobalTensorMap<'_> {
    /// The device address of the 128-byte map (256-byte aligned: a `cuMemAlloc`
    /// allocation).
    #[must_use]
    pub fn as_ptr(&self) -> u64 {
        self.buf.as_raw()
    }
}

#[cfg(test)]
mod tests;
