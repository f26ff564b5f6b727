//! BOTS's nqueens (Duran et al., ICPP 2009) as a tree workload (`uts.rs`'s
//! [`TreeWork`]): a node is a board with queens on its first `j` rows; its slots are
//! the `n` columns of row `j`, and a slot holds a child where the queen placed there
//! conflicts with none of the others (BOTS's `ok`, which checks every pair of the
//! `j + 1` queens), a fork per valid placement. The counted leaves are the solutions
//! (boards of `n` queens). Shared by `benches/trees.rs` and `examples/report.rs`.

#![allow(dead_code)]

use super::uts::{Counts, TreeWork};

/// The largest board.
const MAX_N: usize = 16;

/// A board with queens on rows `0..j`: `rows[k]` is the column of row `k`'s queen.
#[derive(Clone, Copy, Debug)]
pub struct Board {
    rows: [u8; MAX_N],
    j: u8,
}

/// nqueens on an `n × n` board, and the counts it must have.
#[derive(Clone, Copy, Debug)]
pub struct NQueens {
    pub name: &'static str,
    pub n: u8,
    pub expect: Counts,
}

/// n = 12: 14,200 solutions.
pub const NQ12: NQueens =
    NQueens { name: "nqueens12", n: 12, expect: Counts { nodes: 856_189, leaves: 14_200, depth: 12 } };

/// n = 13: 73,712 solutions.
pub const NQ13: NQueens =
    NQueens { name: "nqueens13", n: 13, expect: Counts { nodes: 4_674_890, leaves: 73_712, depth: 13 } };

/// BOTS's `ok`: no two of the queens `a` share a column or a diagonal.
#[inline]
fn ok(a: &[u8]) -> bool {
    for (i, &p) in a.iter().enumerate() {
        for (d, &q) in a[i + 1..].iter().enumerate() {
            let d = d as i32 + 1;
            let (p, q) = (i32::from(p), i32::from(q));
            if q == p || q == p - d || q == p + d {
                return false;
            }
        }
    }
    true
}

impl TreeWork for NQueens {
    type Node = Board;
    const LEAVES_ARE_CHILDLESS: bool = false;

    fn name(&self) -> &'static str {
        self.name
    }

    fn expect(&self) -> Counts {
        self.expect
    }

    fn root(&self) -> Board {
        assert!(usize::from(self.n) <= MAX_N, "boards up to {MAX_N}");
        Board { rows: [0; MAX_N], j: 0 }
    }

    #[inline]
    fn arity(&self, b: &Board) -> u32 {
        if b.j < self.n { u32::from(self.n) } else { 0 }
    }

    #[inline]
    fn child(&self, b: &Board, i: u32) -> Option<Board> {
        let mut c = *b;
        c.rows[usize::from(b.j)] = i as u8;
        c.j += 1;
        ok(&c.rows[..usize::from(c.j)]).then_some(c)
    }

    #[inline]
    fn own(&self, b: &Board, _arity: u32) -> Counts {
        Counts { nodes: 1, leaves: u64::from(b.j == self.n), depth: u64::from(b.j) }
    }
}
