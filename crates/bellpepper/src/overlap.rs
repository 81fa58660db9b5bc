//! A·z, B·z, C·z evaluated while witness-only synthesis still runs.
//!
//! Witness-only synthesis fills the aux columns in allocation order, so a row can be evaluated
//! as soon as the largest aux column it reads has been allocated. [`Schedule`] orders the rows
//! of a kept system by that column once; during synthesis [`Evaluator`] receives the values in
//! blocks on another thread and evaluates every row that became ready, and after synthesis
//! [`Evaluator::finish`] evaluates what is left, in parallel: the last block's rows, the rows
//! that read a public input (inputs can be allocated at any point, often last, so those rows
//! wait for the end), and any the evaluator had not reached.
//!
//! Rows are evaluated and checked by `cuzk_groth16::RowEvaluator`, as `R1cs::evaluate_into`
//! does, so the outputs are equal to it entry for entry.

use core::fmt;
use std::sync::atomic::{AtomicBool, Ordering};

use cuzk_field::Fr;
use cuzk_groth16::{R1cs, RowEvaluator, SparseMatrix, WitnessError};
use rayon::prelude::*;

/// Rows per rayon task when the rows left after synthesis are evaluated in parallel.
const TAIL_CHUNK_ROWS: usize = 1 << 11;

/// The order in which rows of a kept system become ready during witness-only synthesis.
#[derive(Clone)]
pub(crate) struct Schedule {
    /// All rows: first those that read no public input, by the number of aux values they need
    /// (row order among equals), then the rows that read a public input.
    order: Vec<u32>,
    /// `needs[k]`: the number of aux values allocated before `order[k]` can be evaluated, for
    /// the rows that read no public input (non-decreasing).
    needs: Vec<u32>,
}

impl Schedule {
    pub(crate) fn new(r1cs: &R1cs) -> Self {
        let num_public = r1cs.num_public();
        let rows = r1cs.num_constraints();
        // Columns are sorted within a row: the first non-zero column says whether a row reads
        // an input, the last one the aux values it needs.
        let need = |m: &SparseMatrix, row: usize| -> Option<u32> {
            let cols = m.row(row).map_or(&[][..], |r| r.cols());
            let first = cols.iter().find(|&&col| col != 0);
            match (first, cols.last()) {
                (Some(&first), _) if first as usize <= num_public => None,
                (_, Some(&last)) if last as usize > num_public => Some(last - num_public as u32),
                _ => Some(0),
            }
        };
        let needs: Vec<Option<u32>> = (0..rows)
            .into_par_iter()
            .map(|row| {
                let (a, b, c) = (
                    need(r1cs.a(), row)?,
                    need(r1cs.b(), row)?,
                    need(r1cs.c(), row)?,
                );
                Some(a.max(b).max(c))
            })
            .collect();
        // Counting sort by need, stable in the row order.
        let mut starts = vec![0u32; r1cs.num_private() + 2];
        for n in needs.iter().flatten() {
            starts[*n as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let early = starts[starts.len() - 1] as usize;
        let mut order = vec![0u32; rows];
        let mut sorted_needs = vec![0u32; early];
        let mut late = early;
        for (row, n) in needs.iter().enumerate() {
            match n {
                Some(n) => {
                    let k = &mut starts[*n as usize];
                    order[*k as usize] = row as u32;
                    sorted_needs[*k as usize] = *n;
                    *k += 1;
                }
                None => {
                    order[late] = row as u32;
                    late += 1;
                }
            }
        }
        Self {
            order,
            needs: sorted_needs,
        }
    }

    /// The rows that can be evaluated before the public inputs are known.
    #[cfg(test)]
    pub(crate) fn early_rows(&self) -> usize {
        self.needs.len()
    }
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Schedule")
            .field("rows", &self.order.len())
            .field("before_inputs", &self.needs.len())
            .finish()
    }
}

/// Rows between two looks at the stop flag.
const STOP_CHECK_ROWS: usize = 1 << 8;

/// The evaluating side: its own copy of z, filled block by block, and how far it got.
#[derive(Debug)]
pub(crate) struct Evaluator {
    /// The one, the public inputs (zero until [`Self::finish`]), the aux values received.
    z: Vec<Fr>,
    num_public: usize,
    num_variables: usize,
    /// Entries of the schedule's order evaluated so far.
    next: usize,
    /// The smallest row found unsatisfied so far.
    first_bad: Option<usize>,
}

impl Evaluator {
    pub(crate) fn new(r1cs: &R1cs) -> Self {
        let mut z = Vec::with_capacity(r1cs.num_variables());
        z.push(Fr::ONE);
        z.resize(1 + r1cs.num_public(), Fr::ZERO);
        Self {
            z,
            num_public: r1cs.num_public(),
            num_variables: r1cs.num_variables(),
            next: 0,
            first_bad: None,
        }
    }

    /// Appends the next aux values; past the system's columns they are dropped (the caller
    /// reports the changed shape).
    pub(crate) fn append(&mut self, values: &[Fr]) {
        let room = self.num_variables - self.z.len();
        self.z.extend_from_slice(&values[..values.len().min(room)]);
    }

    /// Evaluates the rows whose aux values have all arrived, until `stop` is set: after
    /// synthesis, the rows left are evaluated in parallel by [`Self::finish`] instead (an
    /// evaluator that fell behind a fast synthesis does not hold the caller up).
    pub(crate) fn evaluate_ready(
        &mut self,
        rows: &RowEvaluator<'_>,
        schedule: &Schedule,
        [a, b, c]: [&mut [Fr]; 3],
        stop: &AtomicBool,
    ) {
        let have = (self.z.len() - 1 - self.num_public) as u32;
        let end = self.next + schedule.needs[self.next..].partition_point(|&n| n <= have);
        let z = &self.z[..];
        while self.next < end && !stop.load(Ordering::Relaxed) {
            let until = end.min(self.next + STOP_CHECK_ROWS);
            for &row in &schedule.order[self.next..until] {
                let row = row as usize;
                let v = rows.eval(row, z);
                [a[row], b[row], c[row]] = v;
                note(&mut self.first_bad, row, v);
            }
            self.next = until;
        }
    }

    /// Appends the aux values not sent, sets the public inputs (the one first, as `z`
    /// starts), evaluates every row not evaluated yet, in parallel when many are left, and
    /// returns z and the first unsatisfied row. The caller has checked the witness's shape.
    pub(crate) fn finish(
        mut self,
        last_aux: impl Iterator<Item = Fr>,
        inputs: impl ExactSizeIterator<Item = Fr>,
        rows: &RowEvaluator<'_>,
        schedule: &Schedule,
        [a, b, c]: [&mut [Fr]; 3],
    ) -> (Vec<Fr>, Option<usize>) {
        debug_assert_eq!(inputs.len(), 1 + self.num_public);
        self.z.extend(last_aux);
        debug_assert_eq!(self.z.len(), self.num_variables);
        for (slot, v) in self.z.iter_mut().zip(inputs) {
            *slot = v;
        }
        let rest = &schedule.order[self.next..];
        let z = &self.z[..];
        if rest.len() <= TAIL_CHUNK_ROWS {
            for &row in rest {
                let row = row as usize;
                let v = rows.eval(row, z);
                [a[row], b[row], c[row]] = v;
                note(&mut self.first_bad, row, v);
            }
        } else if 2 * rest.len() > schedule.order.len() {
            // Most rows left (they read inputs, or synthesis outran the evaluator): every row
            // again, in row order, as `evaluate_into` does; this pass sees every row.
            self.first_bad = a
                .par_chunks_mut(TAIL_CHUNK_ROWS)
                .zip(b.par_chunks_mut(TAIL_CHUNK_ROWS))
                .zip(c.par_chunks_mut(TAIL_CHUNK_ROWS))
                .enumerate()
                .filter_map(|(chunk, ((a, b), c))| {
                    let mut bad = None;
                    for (j, ((a, b), c)) in a.iter_mut().zip(b).zip(c).enumerate() {
                        let row = chunk * TAIL_CHUNK_ROWS + j;
                        let v = rows.eval(row, z);
                        [*a, *b, *c] = v;
                        note(&mut bad, row, v);
                    }
                    bad
                })
                .min();
        } else {
            // The rows left are scattered: evaluate them into a buffer in parallel, then copy.
            let mut evaluated = vec![[Fr::ZERO; 3]; rest.len()];
            let bad = evaluated
                .par_chunks_mut(TAIL_CHUNK_ROWS)
                .zip(rest.par_chunks(TAIL_CHUNK_ROWS))
                .filter_map(|(out, rows_of)| {
                    let mut bad = None;
                    for (o, &row) in out.iter_mut().zip(rows_of) {
                        *o = rows.eval(row as usize, z);
                        note(&mut bad, row as usize, *o);
                    }
                    bad
                })
                .min();
            for (&row, v) in rest.iter().zip(evaluated) {
                let row = row as usize;
                [a[row], b[row], c[row]] = v;
            }
            self.first_bad = self.first_bad.into_iter().chain(bad).min();
        }
        (self.z, self.first_bad)
    }
}

/// Keeps the smallest unsatisfied row (rows are evaluated out of order).
#[inline]
fn note(first_bad: &mut Option<usize>, row: usize, v: [Fr; 3]) {
    if !RowEvaluator::satisfied(v) && first_bad.is_none_or(|bad| row < bad) {
        *first_bad = Some(row);
    }
}

/// [`Evaluator::finish`]'s unsatisfied row as the error `R1cs::evaluate_into` returns.
pub(crate) fn check(first_bad: Option<usize>) -> Result<(), WitnessError> {
    match first_bad {
        Some(constraint) => Err(WitnessError::Unsatisfied { constraint }),
        None => Ok(()),
    }
}
