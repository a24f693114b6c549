//! The agreement of the ranks of one communicator that live in this process: each rank's
//! operations are numbered, per channel (the collectives; each ordered pair of ranks for
//! point-to-point), and an operation is compared with the one another in-process rank
//! recorded at the same number before NCCL is called.
//!
//! Ranks of one communicator in this process share a [`Clique`]: the ranks
//! [`Comm::init_all`](super::Comm::init_all) makes, the ranks that join through one
//! [`UniqueId`](super::UniqueId) ([`Comm::init_rank`](super::Comm::init_rank), found in
//! a process-wide registry), the ranks of one split. A rank registers before NCCL's
//! initialisation starts, so no peer's operation can complete (or be issued after its
//! own initialisation returned) before it is known.

use std::boxed::Box;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::vec;
use std::vec::Vec;

/// How far (in operations of one channel) an in-process rank may run ahead of another
/// before its calls are refused: the size of each channel's record.
pub(crate) const WINDOW: u64 = 256;

/// What must agree between the ranks for one operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Sig {
    /// The operation (`ops::Kind` as a number; send and receive are one kind).
    pub kind: u8,
    /// `ncclDataType_t`.
    pub dtype: u32,
    /// `ncclRedOp_t` (0 where there is none).
    pub op: u32,
    /// The root (-1 where there is none).
    pub root: i32,
    /// The element count every rank must give (per rank for gathers and scatters).
    pub count: usize,
}

impl Sig {
    /// What differs between two signatures, for the error.
    fn differs(&self, other: &Sig) -> Option<&'static str> {
        if self.kind != other.kind {
            Some("the operation")
        } else if self.count != other.count {
            Some("the element count")
        } else if self.dtype != other.dtype {
            Some("the element type")
        } else if self.op != other.op {
            Some("the reduction")
        } else if self.root != other.root {
            Some("the root")
        } else {
            None
        }
    }
}

/// A channel: the collectives (`COLLECTIVE`), or point-to-point from one rank to another.
pub(crate) type ChannelKey = (u32, u32);

/// The collective channel's key.
pub(crate) const COLLECTIVE: ChannelKey = (u32::MAX, u32::MAX);

struct Channel {
    key: ChannelKey,
    /// Each participating in-process rank and the number of its next operation here.
    next: Vec<(u32, u64)>,
    /// Operation `n`'s signature at `n % WINDOW`, with `n`.
    slots: Box<[(u64, Sig)]>,
    /// One past the highest operation number recorded.
    head: u64,
}

impl Channel {
    fn new(key: ChannelKey) -> Self {
        Self {
            key,
            next: Vec::new(),
            slots: vec![(u64::MAX, Sig::default()); WINDOW as usize].into_boxed_slice(),
            head: 0,
        }
    }

    fn next_of(&mut self, rank: u32) -> u64 {
        match self.next.iter().find(|(r, _)| *r == rank) {
            Some((_, n)) => *n,
            None => {
                self.next.push((rank, 0));
                0
            }
        }
    }

    /// Checks `rank`'s next operation against what another rank recorded at its number
    /// (or records it, first), with `participants` the in-process ranks that must issue
    /// the same operation here.
    fn check(&mut self, rank: u32, sig: Sig, participants: &[u32]) -> Result<(), &'static str> {
        let n = self.next_of(rank);
        let slot = (n % WINDOW) as usize;
        if n < self.head {
            let (seq, recorded) = self.slots[slot];
            if seq != n {
                return Err("the operation's position (ranks more than 256 operations apart)");
            }
            if let Some(what) = sig.differs(&recorded) {
                return Err(what);
            }
        } else {
            for &p in participants {
                if p != rank && self.next_of(p) + WINDOW <= n {
                    return Err("the operation's position (ranks more than 256 operations apart)");
                }
            }
            self.slots[slot] = (n, sig);
            self.head = n + 1;
        }
        if let Some(e) = self.next.iter_mut().find(|(r, _)| *r == rank) {
            e.1 = n + 1;
        }
        Ok(())
    }
}

struct Local {
    /// The in-process ranks.
    members: Vec<u32>,
    channels: Vec<Channel>,
}

/// The ranks of one communicator in this process and their agreement record.
pub(crate) struct Clique {
    local: Mutex<Local>,
}

impl Clique {
    /// A clique of `members` (registered nowhere: [`Comm::init_all`](super::Comm::init_all)).
    pub(crate) fn new(members: &[u32]) -> Arc<Self> {
        Arc::new(Self {
            local: Mutex::new(Local {
                members: members.to_vec(),
                channels: Vec::new(),
            }),
        })
    }

    /// The clique registered under `key`, made if there is none, with `rank` added.
    pub(crate) fn join(key: Key, rank: u32) -> Arc<Self> {
        static REGISTRY: Mutex<Vec<(Key, Weak<Clique>)>> = Mutex::new(Vec::new());
        let mut reg = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
        reg.retain(|(_, w)| w.strong_count() > 0);
        let found = reg
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, w)| w.upgrade());
        let clique = match found {
            Some(c) => c,
            None => {
                let c = Self::new(&[]);
                reg.push((key, Arc::downgrade(&c)));
                c
            }
        };
        clique.add(rank);
        clique
    }

    fn add(&self, rank: u32) {
        let mut l = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        if !l.members.contains(&rank) {
            l.members.push(rank);
        }
    }

    /// Removes `rank` (its communicator is gone, or its initialisation failed).
    pub(crate) fn leave(&self, rank: u32) {
        let mut l = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        l.members.retain(|&r| r != rank);
        for c in &mut l.channels {
            c.next.retain(|&(r, _)| r != rank);
        }
    }

    /// The clique's identity, for the keys of the cliques of its splits.
    pub(crate) fn id(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize
    }

    /// Checks `rank`'s next operation on `channel` (see the module docs): `peer` is the
    /// other side of a point-to-point channel (`None` for collectives). Nothing is
    /// checked (or recorded) when no other rank of the channel is in this process.
    pub(crate) fn check(
        &self,
        rank: u32,
        channel: ChannelKey,
        sig: Sig,
    ) -> Result<(), &'static str> {
        let mut l = self.local.lock().unwrap_or_else(PoisonError::into_inner);
        let Local { members, channels } = &mut *l;
        let pair;
        let participants: &[u32] = if channel == COLLECTIVE {
            members
        } else {
            pair = [channel.0, channel.1];
            if !members.contains(&channel.0) || !members.contains(&channel.1) {
                return Ok(());
            }
            &pair
        };
        if participants.len() < 2 {
            return Ok(());
        }
        let i = match channels.iter().position(|c| c.key == channel) {
            Some(i) => i,
            None => {
                channels.push(Channel::new(channel));
                channels.len() - 1
            }
        };
        channels[i].check(rank, sig, participants)
    }
}

/// Where in-process ranks of one communicator find each other's clique.
#[derive(Clone, PartialEq, Eq)]
pub(crate) enum Key {
    /// Ranks joining through one unique id.
    Id([u8; super::ID_BYTES]),
    /// Ranks of a split: the parent clique, the split's position in the parent's
    /// collective sequence, the color.
    Split(usize, u64, i32),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sig(count: usize) -> Sig {
        Sig {
            kind: 1,
            dtype: 7,
            op: 0,
            root: -1,
            count,
        }
    }

    #[test]
    fn matching_operations_pass_and_a_different_count_is_refused() {
        let c = Clique::new(&[0, 1]);
        for n in 0..1000 {
            assert_eq!(c.check(0, COLLECTIVE, sig(n)), Ok(()));
            assert_eq!(c.check(1, COLLECTIVE, sig(n)), Ok(()));
        }
        assert_eq!(c.check(1, COLLECTIVE, sig(5)), Ok(()));
        assert_eq!(c.check(0, COLLECTIVE, sig(6)), Err("the element count"));
        let mut other = sig(5);
        other.root = 1;
        assert_eq!(c.check(0, COLLECTIVE, other), Err("the root"));
        assert_eq!(c.check(0, COLLECTIVE, sig(5)), Ok(()));
    }

    #[test]
    fn a_rank_far_ahead_is_refused() {
        let c = Clique::new(&[0, 1]);
        for n in 0..WINDOW as usize {
            assert_eq!(c.check(0, COLLECTIVE, sig(n)), Ok(()));
        }
        assert!(c.check(0, COLLECTIVE, sig(0)).is_err());
        assert_eq!(c.check(1, COLLECTIVE, sig(0)), Ok(()));
        assert_eq!(c.check(0, COLLECTIVE, sig(99)), Ok(()));
    }

    #[test]
    fn point_to_point_pairs_and_single_ranks() {
        let c = Clique::new(&[0, 1]);
        assert_eq!(c.check(0, (0, 1), sig(10)), Ok(()));
        assert_eq!(c.check(1, (0, 1), sig(11)), Err("the element count"));
        assert_eq!(c.check(1, (0, 1), sig(10)), Ok(()));
        // A peer in another process: nothing to compare with.
        assert_eq!(c.check(0, (0, 2), sig(1)), Ok(()));
        let alone = Clique::join(Key::Id([3; super::super::ID_BYTES]), 4);
        assert_eq!(alone.check(4, COLLECTIVE, sig(1)), Ok(()));
        let again = Clique::join(Key::Id([3; super::super::ID_BYTES]), 5);
        assert!(Arc::ptr_eq(&alone, &again));
        assert_eq!(again.check(5, COLLECTIVE, sig(1)), Ok(()));
        assert_eq!(again.check(5, COLLECTIVE, sig(2)), Ok(()));
        assert_eq!(alone.check(4, COLLECTIVE, sig(3)), Err("the element count"));
        alone.leave(5);
    }
}
