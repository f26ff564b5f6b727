//! UTS, the Unbalanced Tree Search benchmark (Olivier et al., LCPC 2006), written from
//! its published definition: trees drawn from a splittable SHA-1 random number
//! generator, whose sizes are published. Also the tree-workload interface that the tree
//! forms (`tree_forms.rs`) walk, shared with BOTS's nqueens (`nqueens.rs`).
//!
//! The generator:
//! - a root's state is SHA-1 of 16 zero bytes followed by the seed (4 bytes, big-endian);
//! - a child's state is SHA-1 of its parent's 20 bytes followed by the child's index
//!   (4 bytes, big-endian): one compression of one padded block;
//! - a draw is the state's last 4 bytes, big-endian, masked to 31 bits.
//!
//! Shared by `benches/trees.rs` and `examples/report.rs`.

#![allow(dead_code)]

use sha1::digest::generic_array::GenericArray;

/// What a walk of a tree counts: its nodes, its leaves (for nqueens: its solutions)
/// and the largest depth of a node (the root's is 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub nodes: u64,
    pub leaves: u64,
    pub depth: u64,
}

impl Counts {
    /// The counts of two disjoint parts of a tree together.
    #[inline]
    pub fn merge(self, other: Counts) -> Counts {
        Counts {
            nodes: self.nodes + other.nodes,
            leaves: self.leaves + other.leaves,
            depth: self.depth.max(other.depth),
        }
    }
}

/// A tree as a workload: a root, and for each node a number of child slots, each of
/// which holds a child or not. A walk visits a node by asking its `arity` (the node's
/// own work), then makes each child from its slot (`child`: the work per child) and
/// walks it. The workload is a small `Copy` value, so that every form can capture it.
pub trait TreeWork: Copy + Send + Sync + 'static {
    type Node: Copy + Send + Sync + 'static;
    /// The tree's name in the bench's output (`T1`, `T3`, `nqueens12`).
    fn name(&self) -> &'static str;
    /// The counts a walk must find.
    fn expect(&self) -> Counts;
    fn root(&self) -> Self::Node;
    /// The node's child slots.
    fn arity(&self, node: &Self::Node) -> u32;
    /// The child in slot `i < arity`, if there is one.
    fn child(&self, node: &Self::Node, i: u32) -> Option<Self::Node>;
    /// The node's own contribution to the counts, given its arity.
    fn own(&self, node: &Self::Node, arity: u32) -> Counts;
    /// Whether the counted leaves are the nodes without children (UTS), so that a side
    /// counter may count them as the nodes minus those with children, rather than with
    /// one atomic write per leaf (most of a UTS tree).
    const LEAVES_ARE_CHILDLESS: bool;
}

/// SHA-1's initial state.
const H0: [u32; 5] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0];

/// SHA-1 of a message of at most 55 bytes, `head` followed by `tail`: one block, one
/// compression.
#[inline]
fn sha1_short(head: &[u8], tail: &[u8; 4]) -> [u32; 5] {
    let len = head.len() + 4;
    debug_assert!(len <= 55);
    let mut block = [0u8; 64];
    block[..head.len()].copy_from_slice(head);
    block[head.len()..len].copy_from_slice(tail);
    block[len] = 0x80;
    block[56..].copy_from_slice(&(len as u64 * 8).to_be_bytes());
    let mut h = H0;
    sha1::compress(&mut h, &[GenericArray::from(block)]);
    h
}

/// A node of a UTS tree: its generator state (SHA-1's five words; the digest's bytes
/// are their big-endian bytes) and its depth.
#[derive(Clone, Copy, Debug)]
pub struct UtsNode {
    state: [u32; 5],
    height: u32,
}

impl UtsNode {
    /// The root of the tree with this seed.
    pub fn root(seed: u32) -> UtsNode {
        let mut head = [0u8; 16];
        head.fill(0);
        UtsNode { state: sha1_short(&head, &seed.to_be_bytes()), height: 0 }
    }

    /// The child with index `i`.
    #[inline]
    pub fn child(&self, i: u32) -> UtsNode {
        let mut head = [0u8; 20];
        for (bytes, word) in head.chunks_exact_mut(4).zip(self.state) {
            bytes.copy_from_slice(&word.to_be_bytes());
        }
        UtsNode { state: sha1_short(&head, &i.to_be_bytes()), height: self.height + 1 }
    }

    /// The node's draw: the state's last 4 bytes, big-endian, masked to 31 bits.
    #[inline]
    pub fn draw(&self) -> u32 {
        self.state[4] & 0x7fff_ffff
    }

    /// The draw as a probability in `[0, 1)`.
    #[inline]
    fn prob(&self) -> f64 {
        f64::from(self.draw()) / 2_147_483_648.0
    }
}

/// The reference's cap on the children of a node (a binomial root is exempt).
const MAX_CHILDREN: u32 = 100;

/// The two tree types of the standard trees.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// Geometric with the fixed shape function: every node above depth `depth` draws its
    /// children from a geometric distribution of mean `b0`; nodes at `depth` are leaves.
    Geometric { depth: u32, b0: f64 },
    /// Binomial: the root has `floor(b0)` children; every other node has `m` children
    /// with probability `q`, none otherwise.
    Binomial { b0: f64, q: f64, m: u32 },
}

/// A UTS tree: its shape, its root's seed, and the counts it must have.
#[derive(Clone, Copy, Debug)]
pub struct Uts {
    pub name: &'static str,
    pub shape: Shape,
    pub seed: u32,
    pub expect: Counts,
}

/// T1: geometric, fixed shape, depth 10, b0 = 4, seed 19.
pub const T1: Uts = Uts {
    name: "T1",
    shape: Shape::Geometric { depth: 10, b0: 4.0 },
    seed: 19,
    expect: Counts { nodes: 4_130_071, leaves: 3_305_118, depth: 10 },
};

/// T1L: as T1 with depth 13, seed 29.
pub const T1L: Uts = Uts {
    name: "T1L",
    shape: Shape::Geometric { depth: 13, b0: 4.0 },
    seed: 29,
    expect: Counts { nodes: 102_181_082, leaves: 81_746_377, depth: 13 },
};

/// T3: binomial, b0 = 2000, q = 0.124875, m = 8, seed 42.
pub const T3: Uts = Uts {
    name: "T3",
    shape: Shape::Binomial { b0: 2000.0, q: 0.124875, m: 8 },
    seed: 42,
    expect: Counts { nodes: 4_112_897, leaves: 3_599_034, depth: 1572 },
};

/// T3L: binomial, b0 = 2000, q = 0.200014, m = 5, seed 7.
pub const T3L: Uts = Uts {
    name: "T3L",
    shape: Shape::Binomial { b0: 2000.0, q: 0.200014, m: 5 },
    seed: 7,
    expect: Counts { nodes: 111_345_631, leaves: 89_076_904, depth: 17_844 },
};

impl TreeWork for Uts {
    type Node = UtsNode;
    const LEAVES_ARE_CHILDLESS: bool = true;

    fn name(&self) -> &'static str {
        self.name
    }

    fn expect(&self) -> Counts {
        self.expect
    }

    fn root(&self) -> UtsNode {
        UtsNode::root(self.seed)
    }

    /// The reference's `uts_numChildren` for the two types.
    #[inline]
    fn arity(&self, node: &UtsNode) -> u32 {
        match self.shape {
            Shape::Geometric { depth, b0 } => {
                let b = if node.height < depth { b0 } else { 0.0 };
                let p = 1.0 / (1.0 + b);
                // The inverse of the geometric distribution's cumulative density.
                let n = ((1.0 - node.prob()).ln() / (1.0 - p).ln()).floor();
                (n as u32).min(MAX_CHILDREN)
            }
            Shape::Binomial { b0, q, m } => {
                if node.height == 0 {
                    b0.floor() as u32
                } else if node.prob() < q {
                    m.min(MAX_CHILDREN)
                } else {
                    0
                }
            }
        }
    }

    #[inline]
    fn child(&self, node: &UtsNode, i: u32) -> Option<UtsNode> {
        Some(node.child(i))
    }

    #[inline]
    fn own(&self, node: &UtsNode, arity: u32) -> Counts {
        Counts { nodes: 1, leaves: u64::from(arity == 0), depth: u64::from(node.height) }
    }
}
