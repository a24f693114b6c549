//! [`Shared`]: the reference count behind the handles that others keep alive
//! ([`Context`](crate::Context), [`Module`](crate::Module)).
//!
//! With `alloc` it is an `Arc`. Without `alloc` it is a slot in a fixed static pool
//! (`Slot`s in a `static` array) with the same counting rules, so a `no_std` program without a heap gets the
//! same ownership model (clone to share, the last drop destroys) up to the pool's
//! capacity; a full pool is an error at creation, never a panic.
//!
//! # Unsafe policy
//! The pool hands out `&'static Slot<T>`; a slot's value is written once while the slot
//! is reserved (`BUSY` with no references), read only while references exist, and
//! dropped by the thread that takes the count from 1 to 0, after which the slot is
//! free again. The orderings are those of `Arc` (release on decrement, acquire before
//! the drop) plus acquire/release on the slot state.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::ops::Deref;
use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering, fence};

/// A value kept alive by reference counting: `Arc<T>` with `alloc`, a static pool slot
/// without.
pub(crate) struct Shared<T: Pooled> {
    #[cfg(feature = "alloc")]
    inner: alloc::sync::Arc<T>,
    #[cfg(not(feature = "alloc"))]
    slot: &'static Slot<T>,
}

/// A type that can live in a [`Shared`]: without `alloc`, it names its static pool.
pub(crate) trait Pooled: Sized + Send + Sync + 'static {
    /// The pool for this type (used only without `alloc`).
    #[cfg_attr(feature = "alloc", allow(dead_code))]
    fn pool() -> &'static [Slot<Self>];
}

impl<T: Pooled> Shared<T> {
    /// Shares `value`; gives it back when the pool (without `alloc`) is full.
    pub(crate) fn new(value: T) -> Result<Self, T> {
        #[cfg(feature = "alloc")]
        {
            Ok(Self {
                inner: alloc::sync::Arc::new(value),
            })
        }
        #[cfg(not(feature = "alloc"))]
        {
            acquire(T::pool(), value).map(|slot| Self { slot })
        }
    }

    /// Whether both point at the same value.
    pub(crate) fn ptr_eq(a: &Self, b: &Self) -> bool {
        core::ptr::eq::<T>(&**a, &**b)
    }
}

impl<T: Pooled + core::fmt::Debug> core::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(&**self, f)
    }
}

impl<T: Pooled> Clone for Shared<T> {
    fn clone(&self) -> Self {
        #[cfg(feature = "alloc")]
        {
            Self {
                inner: alloc::sync::Arc::clone(&self.inner),
            }
        }
        #[cfg(not(feature = "alloc"))]
        {
            self.slot.retain();
            Self { slot: self.slot }
        }
    }
}

impl<T: Pooled> Deref for Shared<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        #[cfg(feature = "alloc")]
        {
            &self.inner
        }
        #[cfg(not(feature = "alloc"))]
        {
            // SAFETY: `self` holds one reference, so the slot's value is initialized and
            // not dropped until that reference is released.
            unsafe { self.slot.get() }
        }
    }
}

#[cfg(not(feature = "alloc"))]
impl<T: Pooled> Drop for Shared<T> {
    fn drop(&mut self) {
        // SAFETY: `self` owns one reference and gives it up here, once.
        unsafe { self.slot.release() };
    }
}

/// Implements [`Pooled`] for `$t` with a static pool of `$n` slots (used without
/// `alloc`): `pooled!(CtxInner, MAX_CONTEXTS);`.
macro_rules! pooled {
    ($t:ty, $n:expr) => {
        impl $crate::driver::refcount::Pooled for $t {
            fn pool() -> &'static [$crate::driver::refcount::Slot<Self>] {
                #[cfg(not(feature = "alloc"))]
                {
                    static POOL: [$crate::driver::refcount::Slot<$t>; $n] =
                        [const { $crate::driver::refcount::Slot::new() }; $n];
                    &POOL
                }
                #[cfg(feature = "alloc")]
                {
                    &[]
                }
            }
        }
    };
}
pub(crate) use pooled;

/// Slot states.
const FREE: u8 = 0;
const BUSY: u8 = 1;

/// One entry of a static pool: a reference count and room for a value.
pub(crate) struct Slot<T> {
    state: AtomicU8,
    refs: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value is shared between threads only through `&T` (`T: Sync`) and dropped
// by whichever thread releases the last reference (`T: Send`).
unsafe impl<T: Send + Sync> Sync for Slot<T> {}

impl<T> Slot<T> {
    /// A free slot.
    #[cfg_attr(feature = "alloc", allow(dead_code))]
    pub(crate) const fn new() -> Self {
        Self {
            state: AtomicU8::new(FREE),
            refs: AtomicUsize::new(0),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// The value.
    ///
    /// # Safety
    /// The caller holds a reference to the slot.
    #[cfg_attr(feature = "alloc", allow(dead_code))]
    unsafe fn get(&self) -> &T {
        // SAFETY: a held reference means the value was written (and published by the
        // release store of `refs` in `acquire`) and is not yet dropped.
        unsafe { (*self.value.get()).assume_init_ref() }
    }

    /// Adds a reference (the caller holds one).
    #[cfg_attr(feature = "alloc", allow(dead_code))]
    fn retain(&self) {
        // Relaxed as in `Arc::clone`: the caller's reference keeps the value alive. An
        // overflow would need more references than fit in memory.
        self.refs.fetch_add(1, Ordering::Relaxed);
    }

    /// Gives up a reference; the last one drops the value and frees the slot.
    ///
    /// # Safety
    /// The caller holds a reference and does not use it afterwards.
    #[cfg_attr(feature = "alloc", allow(dead_code))]
    unsafe fn release(&self) {
        if self.refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        fence(Ordering::Acquire);
        // SAFETY: the count went from 1 to 0: no other reference exists and the slot
        // stays BUSY, so no other thread reads or writes the value.
        unsafe { (*self.value.get()).assume_init_drop() };
        self.state.store(FREE, Ordering::Release);
    }
}

/// Moves `value` into a free slot of `pool` with one reference; gives it back when every
/// slot is taken.
#[cfg_attr(feature = "alloc", allow(dead_code))]
pub(crate) fn acquire<T>(pool: &'static [Slot<T>], value: T) -> Result<&'static Slot<T>, T> {
    for slot in pool {
        if slot
            .state
            .compare_exchange(FREE, BUSY, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            // SAFETY: this thread reserved the slot (FREE -> BUSY) and no reference
            // exists, so nothing else touches the value.
            unsafe { (*slot.value.get()).write(value) };
            slot.refs.store(1, Ordering::Release);
            return Ok(slot);
        }
    }
    Err(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicUsize;

    static DROPS: AtomicUsize = AtomicUsize::new(0);

    struct Counted(u32);
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }

    static POOL: [Slot<Counted>; 2] = [const { Slot::new() }; 2];

    #[test]
    fn pool_counts_references_and_reuses_slots() {
        let a = acquire(&POOL, Counted(1)).ok().unwrap();
        let b = acquire(&POOL, Counted(2)).ok().unwrap();
        // Full: the value comes back, nothing is dropped.
        let back = acquire(&POOL, Counted(3)).err().unwrap();
        assert_eq!(back.0, 3);
        drop(back);
        assert_eq!(DROPS.swap(0, Ordering::SeqCst), 1);
        a.retain();
        // SAFETY: two references held on `a`.
        unsafe {
            assert_eq!(a.get().0, 1);
            a.release();
        }
        assert_eq!(DROPS.load(Ordering::SeqCst), 0);
        // SAFETY: the last reference on `a`, and one on `b`.
        unsafe {
            a.release();
            b.release();
        }
        assert_eq!(DROPS.swap(0, Ordering::SeqCst), 2);
        // Both slots are free again.
        let c = acquire(&POOL, Counted(4)).ok().unwrap();
        let d = acquire(&POOL, Counted(5)).ok().unwrap();
        // SAFETY: one reference each.
        unsafe {
            assert_eq!(c.get().0 + d.get().0, 9);
            c.release();
            d.release();
        }
        assert_eq!(DROPS.swap(0, Ordering::SeqCst), 2);
    }

    static THREAD_POOL: [Slot<AtomicUsize>; 1] = [const { Slot::new() }];

    #[test]
    fn last_release_from_any_thread() {
        let s = acquire(&THREAD_POOL, AtomicUsize::new(0)).ok().unwrap();
        for _ in 0..3 {
            s.retain();
        }
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    // SAFETY: each thread gives up one of the four references.
                    unsafe {
                        s.get().fetch_add(1, Ordering::Relaxed);
                        s.release();
                    }
                });
            }
        });
        // Freed: the slot can be taken again.
        let again = acquire(&THREAD_POOL, AtomicUsize::new(7)).ok().unwrap();
        // SAFETY: one reference held.
        unsafe {
            assert_eq!(again.get().load(Ordering::Relaxed), 7);
            again.release();
        }
    }
}
