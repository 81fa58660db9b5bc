//! The system of a circuit made of repeated blocks, without synthesizing all of it.
//!
//! A circuit split into parts (see `parts`) is groups of a head followed by sub-circuits, and
//! in Filecoin's circuits every head has one shape and every sub-circuit another: a constraint
//! system's structure never depends on the values (parameters are made from a blank circuit).
//! So the whole system is the head's rows and the sub-circuit's rows, each repeated with its
//! variables shifted to where that copy's variables are allocated. Both blocks are read from
//! the full synthesis of a circuit with one head and one sub-circuit (`one`); a circuit with
//! one head and two (`two`) says where the head ends, and must equal its own replication, row
//! for row. A 32 GiB PoRep partition's system is then two challenges' synthesis and a copy,
//! instead of 18 challenges' synthesis on one thread (100 s).

use bellpepper_core::Circuit;
use blstrs::Scalar;
use cuzk_field::Fr;
use cuzk_groth16::{R1cs, SparseMatrix};
use rayon::prelude::*;

use crate::{BellpepperError, CompiledCircuit, synthesize};

/// Why a system could not be replicated.
#[derive(Debug, thiserror::Error)]
pub enum ReplicateError {
    #[error(
        "a head and two sub-circuits have {two} {what}, a head and one {one}: not a head followed by repeated sub-circuits"
    )]
    Sizes {
        what: &'static str,
        one: usize,
        two: usize,
    },
    #[error(
        "the circuit with two sub-circuits is not its replication from the circuit with one: its sub-circuits differ in shape"
    )]
    Differs,
    #[error("no groups, or a group with no sub-circuits")]
    Empty,
}

/// A block's size: its rows and the inputs and aux values it allocates.
#[derive(Clone, Copy, Debug)]
struct Size {
    rows: usize,
    public: usize,
    private: usize,
}

/// Where one copy of a block goes: the shifts of its head's variables and of its own.
#[derive(Clone, Copy, Debug)]
struct Place {
    /// The block's rows in `one`: the head's or the sub-circuit's.
    from: usize,
    rows: usize,
    head_public: usize,
    head_private: usize,
    sub_public: usize,
    sub_private: usize,
}

/// The head and sub-circuit blocks, read from `one`'s system.
struct Blocks<'a> {
    one: &'a R1cs,
    head: Size,
    sub: Size,
}

impl Blocks<'_> {
    /// The replicated system of `groups` (each group's sub-circuit count), instance rows last.
    fn build(&self, groups: &[usize]) -> Result<R1cs, BellpepperError> {
        if groups.is_empty() || groups.contains(&0) {
            return Err(ReplicateError::Empty.into());
        }
        let (head, sub) = (self.head, self.sub);
        let mut places = Vec::new();
        let (mut row, mut public, mut private) = (0, 0, 0);
        for &n in groups {
            let (head_public, head_private) = (public, private);
            places.push(Place {
                from: 0,
                rows: head.rows,
                head_public,
                head_private,
                sub_public: 0,
                sub_private: 0,
            });
            row += head.rows;
            for j in 0..n {
                places.push(Place {
                    from: head.rows,
                    rows: sub.rows,
                    head_public,
                    head_private,
                    sub_public: head_public + j * sub.public,
                    sub_private: head_private + j * sub.private,
                });
                row += sub.rows;
            }
            public += head.public + n * sub.public;
            private += head.private + n * sub.private;
        }
        let num_variables = 1 + public + private;
        let m = |m: &SparseMatrix, matrix: char| {
            self.matrix(m, &places, row, public, num_variables, matrix == 'a')
                .map_err(|reason| cuzk_groth16::R1csError::MalformedMatrix { matrix, reason })
        };
        Ok(R1cs::new(
            public,
            num_variables,
            m(self.one.a(), 'a')?,
            m(self.one.b(), 'b')?,
            m(self.one.c(), 'c')?,
        )?)
    }

    /// One matrix of the whole: each place's rows of `one`'s matrix, columns shifted; then the
    /// instance rows (`a` holds `input_i · 1`, `b` and `c` nothing). Blocks are copied on every
    /// core, each into its own slice.
    fn matrix(
        &self,
        m: &SparseMatrix,
        places: &[Place],
        circuit_rows: usize,
        public: usize,
        num_variables: usize,
        instance: bool,
    ) -> Result<SparseMatrix, String> {
        let ptr = m.row_ptr();
        let nnz_of = |p: &Place| ptr[p.from + p.rows] - ptr[p.from];
        let instance_nnz = if instance { public + 1 } else { 0 };
        let nnz: usize = places.iter().map(nnz_of).sum::<usize>() + instance_nnz;
        let mut row_ptr = vec![0usize; circuit_rows + public + 2];
        let mut cols = vec![0u32; nnz];
        let mut ids = vec![0u32; nnz];
        // The whole shares `one`'s coefficient table; the instance rows need the one in it.
        let mut coeffs = m.coeffs().to_vec();
        let one = match coeffs.iter().position(|&v| v == Fr::ONE) {
            Some(k) => k,
            None => {
                coeffs.push(Fr::ONE);
                coeffs.len() - 1
            }
        } as u32;

        let (one_public, head) = (self.one.num_public(), self.head);
        let map = |col: u32, p: &Place| -> u32 {
            let c = col as usize;
            let to = if c == 0 {
                0
            } else if c <= one_public {
                let i = c - 1;
                let shift = if i < head.public {
                    p.head_public
                } else {
                    p.sub_public
                };
                1 + i + shift
            } else {
                let i = c - 1 - one_public;
                let shift = if i < head.private {
                    p.head_private
                } else {
                    p.sub_private
                };
                1 + public + i + shift
            };
            to as u32
        };

        // Each place's slices, in order, then the instance rows'.
        let mut jobs = Vec::with_capacity(places.len());
        let (mut rp, mut cs, mut vs) = (&mut row_ptr[1..], &mut cols[..], &mut ids[..]);
        let mut start = 0;
        for p in places {
            let n = nnz_of(p);
            let (r, rest) = std::mem::take(&mut rp).split_at_mut(p.rows);
            rp = rest;
            let (c, rest) = std::mem::take(&mut cs).split_at_mut(n);
            cs = rest;
            let (v, rest) = std::mem::take(&mut vs).split_at_mut(n);
            vs = rest;
            jobs.push((p, start, r, c, v));
            start += n;
        }
        let mut at = start;
        for (v, r) in rp.iter_mut().enumerate() {
            if instance {
                cs[at - start] = v as u32;
                vs[at - start] = one;
                at += 1;
            }
            *r = at;
        }
        jobs.into_par_iter().for_each(|(p, start, r, c, v)| {
            let base = ptr[p.from];
            for (k, out) in r.iter_mut().enumerate() {
                *out = start + ptr[p.from + k + 1] - base;
            }
            let (from, to) = (base, ptr[p.from + p.rows]);
            for (o, &col) in c.iter_mut().zip(&m.cols()[from..to]) {
                *o = map(col, p);
            }
            v.copy_from_slice(&m.coeff_ids()[from..to]);
        });
        SparseMatrix::from_indexed_csr(num_variables, row_ptr, cols, ids, coeffs)
    }
}

impl CompiledCircuit {
    /// The system of a circuit of `groups` (each group's sub-circuit count): each group a
    /// head, then its sub-circuits, all heads of one shape and all sub-circuits of another.
    /// `one` is such a circuit with one head and one sub-circuit, `two` with one head and two;
    /// `checks` are more such circuits (of shape `.0`), each of which must equal its
    /// replication (a circuit of several groups, say).
    pub fn replicate<C: Circuit<Scalar> + Send>(
        one: C,
        two: C,
        checks: Vec<(Vec<usize>, C)>,
        groups: &[usize],
    ) -> Result<Self, BellpepperError> {
        // Each on its own core: three sub-circuits' synthesis take the time of two.
        let (one, two) = rayon::join(|| synthesize(one), || synthesize(two));
        let ((one, _), (two, _)) = (one?, two?);
        let size = |r: &R1cs| Size {
            rows: r.num_circuit_constraints(),
            public: r.num_public(),
            private: r.num_private(),
        };
        let (s1, s2) = (size(&one), size(&two));
        let split = |what, one: usize, two: usize| {
            let sub = two.checked_sub(one);
            match sub.and_then(|sub| one.checked_sub(sub).map(|head| (head, sub))) {
                Some(hs) => Ok(hs),
                None => Err(ReplicateError::Sizes { what, one, two }),
            }
        };
        let (head_rows, sub_rows) = split("rows", s1.rows, s2.rows)?;
        let (head_public, sub_public) = split("inputs", s1.public, s2.public)?;
        let (head_private, sub_private) = split("aux values", s1.private, s2.private)?;
        let blocks = Blocks {
            one: &one,
            head: Size {
                rows: head_rows,
                public: head_public,
                private: head_private,
            },
            sub: Size {
                rows: sub_rows,
                public: sub_public,
                private: sub_private,
            },
        };
        if blocks.build(&[2])? != two {
            return Err(ReplicateError::Differs.into());
        }
        drop(two);
        checks.into_par_iter().try_for_each(|(shape, circuit)| {
            let (r1cs, _) = synthesize(circuit)?;
            match blocks.build(&shape)? == r1cs {
                true => Ok(()),
                false => Err(BellpepperError::from(ReplicateError::Differs)),
            }
        })?;
        Ok(Self::new(blocks.build(groups)?))
    }
}
