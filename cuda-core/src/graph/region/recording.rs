//! What a recording is: the operations an execution issued ([`Op`], keyed by
//! [`Key`]), their argument words, attributes and host closures ([`Recording`]), and
//! how two executions compare (same structure: replay, same values: no update).

#[allow(clippy::wildcard_imports)]
use super::*;

/// What one recorded operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Kernel,
    MemsetD8,
    MemsetD32,
    CopyDtoD,
    CopyHtoD,
    CopyDtoH,
    HostFn,
    /// An NCCL call (feature `nccl`): its key holds everything, so a different call is
    /// another structure (NCCL's nodes have no setters).
    #[cfg_attr(not(all(feature = "nccl", unix)), allow(dead_code))]
    Nccl,
}

/// The structure of one operation: what must be equal for a cached node to take the
/// operation's parameters. (Attributes other than one-bit ones are compared besides, in
/// the recording's array, and the parameter sizes, in the operations.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Key {
    pub(super) kind: Kind,
    /// The kernel's `CUfunction` address (kernels only).
    pub(super) func: usize,
    /// Grid x, y, z, block x, y, z, dynamic shared memory (kernels only).
    pub(super) shape: [u32; 7],
    /// Bytes of a memset or copy (0: the operation makes no node).
    pub(super) bytes: usize,
    pub(super) nattrs: u32,
    pub(super) nparams: u32,
    pub(super) nwords: u32,
    /// The launch attributes as one word when they are all one-bit ones
    /// ([`LaunchConfig::one_bit_attributes`]), else [`FULL_ATTRS`]: compared one by one.
    pub(super) attrs: u64,
    /// A host function's closure type.
    pub(super) host: Option<TypeId>,
    /// An NCCL call's send and receive addresses (`func` holds the communicator,
    /// `shape[..4]` the kind, element type, reduction and root or peer, `bytes` the
    /// count).
    pub(super) nccl: [u64; 2],
}

impl Key {
    pub(super) const fn new(kind: Kind) -> Self {
        Self {
            kind,
            func: 0,
            shape: [0; 7],
            bytes: 0,
            nattrs: 0,
            nparams: 0,
            nwords: 0,
            attrs: 0,
            host: None,
            nccl: [0; 2],
        }
    }

    /// Whether the operation adds a node when captured.
    pub(super) fn makes_node(&self) -> bool {
        match self.kind {
            Kind::Kernel | Kind::HostFn => true,
            // NCCL adds nodes of its own (kernels, and more), never updated: none is
            // tracked.
            Kind::Nccl => false,
            _ => self.bytes != 0,
        }
    }

    pub(super) fn hash_into(&self, h: u64) -> u64 {
        let mut h = h;
        let mut mix = |x: u64| h = (h.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        mix(self.kind as u64);
        mix(self.func as u64);
        for s in self.shape {
            mix(u64::from(s));
        }
        mix(self.bytes as u64);
        mix(u64::from(self.nattrs) | u64::from(self.nparams) << 16 | u64::from(self.nwords) << 32);
        mix(self.attrs);
        mix(self.nccl[0]);
        mix(self.nccl[1]);
        h
    }
}

/// [`Key::attrs`] of a launch whose attributes are not all one-bit ones.
pub(super) const FULL_ATTRS: u64 = 1 << 63;

/// One recorded operation: its key and its parameters.
#[derive(Clone, Copy)]
pub(super) struct Op<'a> {
    pub(super) key: Key,
    /// The kernel, borrowed for the region's `'a` (kernels only).
    pub(super) func: Option<&'a Function>,
    /// The kernel's parameter sizes (`key.nparams` of them; each parameter takes whole
    /// argument words).
    pub(super) layout: &'static [ParamSpec],
    /// Where its attributes and argument words start in the recording's arrays
    /// (`key.nattrs` and `key.nwords` of each).
    pub(super) attrs: u32,
    pub(super) words: u32,
    /// Destination and source (device address, or host address of a pinned buffer),
    /// memset value.
    pub(super) dst: CUdeviceptr,
    pub(super) src: u64,
    pub(super) value: u32,
}

impl Op<'_> {
    pub(super) const fn new(kind: Kind) -> Self {
        Self {
            key: Key::new(kind),
            func: None,
            layout: &[],
            attrs: 0,
            words: 0,
            dst: 0,
            src: 0,
            value: 0,
        }
    }

    pub(super) fn attrs(&self) -> Range<usize> {
        self.attrs as usize..self.attrs as usize + self.key.nattrs as usize
    }

    pub(super) fn words(&self) -> Range<usize> {
        self.words as usize..self.words as usize + self.key.nwords as usize
    }
}

/// The bytes of an attribute that say what it is: its ID and its 64-byte value.
pub(super) fn attr_eq(a: &CUlaunchAttribute, b: &CUlaunchAttribute) -> bool {
    // SAFETY: `pad` spans the whole value union; every attribute of a `LaunchConfig` is
    // built from an all-zero value with one member written, so every byte is
    // initialized.
    a.id == b.id && {
        // SAFETY: as above; `[c_char; 64]` and `[u64; 8]` have the same size, and
        // `read_unaligned` needs no alignment.
        let (x, y) = unsafe {
            (
                ptr::from_ref(&a.value.pad)
                    .cast::<[u64; 8]>()
                    .read_unaligned(),
                ptr::from_ref(&b.value.pad)
                    .cast::<[u64; 8]>()
                    .read_unaligned(),
            )
        };
        same(&x, &y)
    }
}

/// Whether two kernels' parameters take the same argument words (the same static list,
/// or the same sizes).
#[inline]
pub(super) fn same_layout(a: &[ParamSpec], b: &[ParamSpec]) -> bool {
    ptr::eq(a, b) || (a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.size == y.size))
}

/// `a == b` for the short slices of a recording, inline (a call to `memcmp` for a few
/// words cost more than the comparison).
#[inline]
pub(super) fn same<
    T: Copy + Eq + core::ops::BitXor<Output = T> + core::ops::BitOr<Output = T> + Default,
>(
    a: &[T],
    b: &[T],
) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .fold(T::default(), |acc, (&x, &y)| acc | (x ^ y))
            == T::default()
}

pub(super) type HostClosure = Box<dyn Fn() + Send + Sync + 'static>;

/// A recording: the operations and their attributes and argument words (each kernel
/// parameter zero-padded to whole 8-byte words), and the host closures
/// of the operations that have one. Buffers are reused (cleared, never shrunk).
pub(super) struct Recording<'a> {
    pub(super) ops: Vec<Op<'a>>,
    pub(super) words: Vec<u64>,
    pub(super) attrs: Vec<CUlaunchAttribute>,
    /// (operation index, closure), for host functions not yet captured.
    pub(super) hosts: Vec<(u32, HostClosure)>,
    /// Hash of the keys of `ops`.
    pub(super) hash: u64,
}

pub(super) const HASH_SEED: u64 = 0xcbf2_9ce4_8422_2325;

impl<'a> Recording<'a> {
    pub(super) fn new() -> Self {
        Self {
            ops: Vec::new(),
            words: Vec::new(),
            attrs: Vec::new(),
            hosts: Vec::new(),
            hash: HASH_SEED,
        }
    }

    pub(super) fn clear(&mut self) {
        self.ops.clear();
        self.words.clear();
        self.attrs.clear();
        self.hosts.clear();
        self.hash = HASH_SEED;
    }

    /// Appends `op`, its argument words, and `cfg`'s attributes.
    pub(super) fn push(&mut self, mut op: Op<'a>, words: &[u64], cfg: Option<&LaunchConfig<'_>>) {
        op.words = self.words.len() as u32;
        op.attrs = self.attrs.len() as u32;
        self.words.extend_from_slice(words);
        if let Some(cfg) = cfg {
            self.attrs
                .extend((0..op.key.nattrs as usize).filter_map(|k| cfg.attribute(k)));
        }
        self.ops.push(op);
    }

    /// Copies the first `n` operations of `src` (with their arrays) into this empty
    /// recording.
    pub(super) fn extend_prefix(&mut self, src: &Recording<'a>, n: usize) {
        let (w, a) = match src.ops.get(n) {
            Some(op) => (op.words as usize, op.attrs as usize),
            None => (src.words.len(), src.attrs.len()),
        };
        self.ops.extend_from_slice(src.ops.get(..n).unwrap_or(&[]));
        self.words
            .extend_from_slice(src.words.get(..w).unwrap_or(&[]));
        self.attrs
            .extend_from_slice(src.attrs.get(..a).unwrap_or(&[]));
    }

    /// Room for `n` (called at capture time only, so that replays find room).
    pub(super) fn reserve_like(&mut self, n: &Sizes) {
        self.ops.reserve(n.ops.saturating_sub(self.ops.len()));
        self.words.reserve(n.words.saturating_sub(self.words.len()));
        self.attrs.reserve(n.attrs.saturating_sub(self.attrs.len()));
        self.hosts.reserve(n.hosts.saturating_sub(self.hosts.len()));
    }

    pub(super) fn sizes(&self) -> Sizes {
        Sizes {
            ops: self.ops.len(),
            words: self.words.len(),
            attrs: self.attrs.len(),
            hosts: self
                .ops
                .iter()
                .filter(|o| o.key.kind == Kind::HostFn)
                .count(),
        }
    }

    /// Whether `self` (a cached recording) and `new` have the same structure.
    pub(super) fn same_structure(&self, new: &Recording<'_>) -> bool {
        self.hash == new.hash
            && self.ops.len() == new.ops.len()
            && self.ops.iter().zip(&new.ops).all(|(a, b)| {
                a.key == b.key
                    && same_layout(a.layout, b.layout)
                    && match (self.attrs.get(a.attrs()), new.attrs.get(b.attrs())) {
                        (Some(x), Some(y)) => x.iter().zip(y).all(|(p, q)| attr_eq(p, q)),
                        _ => false,
                    }
            })
    }
}
