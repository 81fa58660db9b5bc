//! Rank-1 constraint systems in CSR form, their assignments, and a builder.
//!
//! Column layout (the one bellperson and arkworks use): column 0 is the constant one, columns
//! `1..=num_public` the public inputs, the rest the private witness. Row `i` is the constraint
//! `<A_i, z> · <B_i, z> = <C_i, z>`.
//!
//! **Instance rows.** Groth16 needs the A-polynomials of the instance variables (the one and
//! the public inputs) to be linearly independent, or a prover could shift value between public
//! inputs without changing the proof. Like arkworks (`inline_all_lcs` then one row per instance
//! variable) and bellperson (`x_i · 0 = 0` after synthesis), every [`R1cs`] ends with
//! `num_public + 1` rows `x_i · 0 = 0`, i.e. A = {i: 1}, B = C = {}. They are always satisfied,
//! [`R1csBuilder::build`] appends them, and [`R1cs::new`] refuses matrices that lack them.

use core::fmt;

use cuzk_field::Fr;
use rayon::prelude::*;

/// Rows per rayon task when evaluating the matrices: big enough to amortize scheduling, small
/// enough to balance skewed rows.
const EVAL_CHUNK_ROWS: usize = 1 << 12;

/// A variable of a circuit under construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variable {
    /// The constant one (column 0).
    One,
    /// The i-th public input, in allocation order.
    Public(u32),
    /// The i-th private witness value, in allocation order.
    Private(u32),
}

/// `Σ coeff · var`, a convenience for building rows; [`R1csBuilder::enforce`] takes slices.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinearCombination(pub Vec<(Variable, Fr)>);

impl LinearCombination {
    pub fn zero() -> Self {
        Self(Vec::new())
    }

    /// Adds `coeff · var` (duplicates are merged when the system is built).
    pub fn add(mut self, coeff: Fr, var: Variable) -> Self {
        self.0.push((var, coeff));
        self
    }

    pub fn terms(&self) -> &[(Variable, Fr)] {
        &self.0
    }
}

impl From<Variable> for LinearCombination {
    fn from(v: Variable) -> Self {
        Self(vec![(v, Fr::ONE)])
    }
}

/// Why matrices or an assignment do not form a valid constraint system.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum R1csError {
    #[error("matrix {matrix}: {reason}")]
    MalformedMatrix { matrix: char, reason: String },
    #[error(
        "the matrices must have the same number of rows (A {a}, B {b}, C {c}) and {num_variables} columns"
    )]
    ShapeMismatch {
        a: usize,
        b: usize,
        c: usize,
        num_variables: usize,
    },
    #[error(
        "{num_public} public inputs need at least {} variables, got {num_variables}",
        num_public + 1
    )]
    TooFewVariables {
        num_public: usize,
        num_variables: usize,
    },
    #[error(
        "row {row} must be the instance row `x_{variable} * 0 = 0` that binds public input {variable}"
    )]
    MissingInstanceRow { row: usize, variable: usize },
    #[error("more than 2^32 - 1 variables")]
    TooManyVariables,
    #[error("variable {0:?} was never allocated")]
    UnknownVariable(Variable),
}

/// Why an assignment does not satisfy, or does not fit, a constraint system.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WitnessError {
    #[error("the assignment has {found} values, the circuit has {expected} variables")]
    Length { expected: usize, found: usize },
    #[error("the assignment has {found} public inputs, the circuit has {expected}")]
    PublicCount { expected: usize, found: usize },
    #[error("assignment entry 0 must be the constant one")]
    FirstNotOne,
    #[error("constraint {constraint} is not satisfied: <A,z>·<B,z> != <C,z>")]
    Unsatisfied { constraint: usize },
    #[error("evaluation output has {found} entries, the circuit has {expected} constraints")]
    OutputLength { expected: usize, found: usize },
}

/// A sparse matrix in compressed sparse row form: row `i` has the entries
/// `cols[row_ptr[i]..row_ptr[i+1]]`, columns strictly increasing. Each entry's value is an index
/// into a table of the matrix's distinct non-zero coefficients: circuits use few (a 32 GiB PoRep
/// partition's 727M entries hold 1526), so an entry takes 8 bytes, not 36.
#[derive(Clone)]
pub struct SparseMatrix {
    num_cols: usize,
    row_ptr: Vec<usize>,
    cols: Vec<u32>,
    coeff_ids: Vec<u32>,
    coeffs: Vec<Fr>,
}

impl fmt::Debug for SparseMatrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SparseMatrix")
            .field("rows", &self.num_rows())
            .field("cols", &self.num_cols)
            .field("nnz", &self.nnz())
            .field("coefficients", &self.coeffs.len())
            .finish()
    }
}

/// Equal entries, whatever order the coefficient tables list their values in.
impl PartialEq for SparseMatrix {
    fn eq(&self, other: &Self) -> bool {
        self.num_cols == other.num_cols
            && self.row_ptr == other.row_ptr
            && self.cols == other.cols
            && self.values().zip(other.values()).all(|(x, y)| x == y)
    }
}

impl Eq for SparseMatrix {}

/// One row of a [`SparseMatrix`].
#[derive(Clone, Copy, Debug)]
pub struct Row<'a> {
    cols: &'a [u32],
    coeff_ids: &'a [u32],
    coeffs: &'a [Fr],
}

impl<'a> Row<'a> {
    /// The row's columns, strictly increasing.
    pub fn cols(&self) -> &'a [u32] {
        self.cols
    }

    /// `(column, coefficient)` of every entry, in column order.
    pub fn terms(&self) -> impl ExactSizeIterator<Item = (u32, Fr)> + 'a {
        let coeffs = self.coeffs;
        self.cols
            .iter()
            .zip(self.coeff_ids)
            .map(move |(&c, &id)| (c, coeffs[id as usize]))
    }
}

/// Distinct coefficients in first-seen order and each value's index among them.
#[derive(Default)]
struct CoefficientTable {
    coeffs: Vec<Fr>,
    ids: rustc_hash::FxHashMap<Limbs, u32>,
}

impl CoefficientTable {
    /// The id of `v`, added if new; an error past 2^32 distinct values (ids are u32).
    fn id(&mut self, v: Fr) -> Result<u32, String> {
        let limbs: Limbs = bytemuck::cast(v);
        if let Some(&id) = self.ids.get(&limbs) {
            return Ok(id);
        }
        let id = u32::try_from(self.coeffs.len())
            .map_err(|_| "more than 2^32 distinct coefficients".to_string())?;
        self.coeffs.push(v);
        self.ids.insert(limbs, id);
        Ok(id)
    }
}

impl SparseMatrix {
    /// A matrix from one value per entry (interned into the coefficient table). Checks the CSR
    /// invariants: monotone `row_ptr` from 0 to nnz, columns in range and strictly increasing per
    /// row, no zero values.
    pub fn from_csr(
        num_cols: usize,
        row_ptr: Vec<usize>,
        cols: Vec<u32>,
        vals: Vec<Fr>,
    ) -> Result<Self, String> {
        if let Some(k) = vals.iter().position(Fr::is_zero) {
            return Err(format!("entry {k} has a zero value"));
        }
        let mut table = CoefficientTable::default();
        let coeff_ids = vals
            .iter()
            .map(|&v| table.id(v))
            .collect::<Result<Vec<u32>, String>>()?;
        drop(vals);
        Self::from_indexed_csr(num_cols, row_ptr, cols, coeff_ids, table.coeffs)
    }

    /// A matrix whose entry `k` has the value `coeffs[coeff_ids[k]]`. Checks the CSR invariants
    /// of [`Self::from_csr`], and that the coefficients are distinct and non-zero and every id
    /// names one.
    pub fn from_indexed_csr(
        num_cols: usize,
        row_ptr: Vec<usize>,
        cols: Vec<u32>,
        coeff_ids: Vec<u32>,
        coeffs: Vec<Fr>,
    ) -> Result<Self, String> {
        if row_ptr.first() != Some(&0) {
            return Err("row_ptr must start with 0".into());
        }
        if cols.len() != coeff_ids.len() || row_ptr.last() != Some(&cols.len()) {
            return Err(format!(
                "row_ptr ends at {:?} but there are {} columns and {} values",
                row_ptr.last(),
                cols.len(),
                coeff_ids.len()
            ));
        }
        let mut seen = rustc_hash::FxHashSet::default();
        for (i, v) in coeffs.iter().enumerate() {
            if v.is_zero() || !seen.insert(bytemuck::cast::<Fr, Limbs>(*v)) {
                return Err(format!("coefficient {i} is zero or repeated"));
            }
        }
        if coeff_ids.par_iter().any(|&id| id as usize >= coeffs.len()) {
            return Err(format!(
                "a value names a coefficient past the table's {}",
                coeffs.len()
            ));
        }
        let m = Self {
            num_cols,
            row_ptr,
            cols,
            coeff_ids,
            coeffs,
        };
        let bad_row = (0..m.num_rows()).into_par_iter().find_first(|&i| {
            let (s, e) = (m.row_ptr[i], m.row_ptr[i + 1]);
            if s > e || e > m.cols.len() {
                return true;
            }
            let cols = &m.cols[s..e];
            cols.iter().any(|&c| c as usize >= num_cols) || cols.windows(2).any(|w| w[0] >= w[1])
        });
        match bad_row {
            Some(i) => Err(format!(
                "row {i} has a decreasing row_ptr or an out-of-range or repeated column"
            )),
            None => Ok(m),
        }
    }

    pub fn num_rows(&self) -> usize {
        self.row_ptr.len() - 1
    }

    pub fn num_cols(&self) -> usize {
        self.num_cols
    }

    /// Number of stored (non-zero) entries.
    pub fn nnz(&self) -> usize {
        self.cols.len()
    }

    pub fn row_ptr(&self) -> &[usize] {
        &self.row_ptr
    }

    pub fn cols(&self) -> &[u32] {
        &self.cols
    }

    /// The id of `value` in the coefficient table, if an entry has it.
    pub fn coeff_id(&self, value: Fr) -> Option<u32> {
        self.coeffs
            .iter()
            .position(|&c| c == value)
            .map(|i| i as u32)
    }

    /// Every entry's value, in entry order.
    fn values(&self) -> impl IndexedParallelIterator<Item = Fr> + '_ {
        self.coeff_ids
            .par_iter()
            .map(|&id| self.coeffs[id as usize])
    }

    /// The bytes the matrix holds in host memory.
    pub fn host_bytes(&self) -> u64 {
        use std::mem::size_of;
        (self.row_ptr.len() * size_of::<usize>()
            + self.nnz() * 2 * size_of::<u32>()
            + self.coeffs.len() * size_of::<Fr>()) as u64
    }

    /// Each entry's index into [`Self::coeffs`].
    pub fn coeff_ids(&self) -> &[u32] {
        &self.coeff_ids
    }

    /// The distinct non-zero coefficients.
    pub fn coeffs(&self) -> &[Fr] {
        &self.coeffs
    }

    /// Row `i`; `None` past the last row.
    pub fn row(&self, i: usize) -> Option<Row<'_>> {
        (i < self.num_rows()).then(|| self.row_at(i))
    }

    /// Row `i < num_rows` (callers index within range).
    pub(crate) fn row_at(&self, i: usize) -> Row<'_> {
        let (s, e) = (self.row_ptr[i], self.row_ptr[i + 1]);
        Row {
            cols: &self.cols[s..e],
            coeff_ids: &self.coeff_ids[s..e],
            coeffs: &self.coeffs,
        }
    }

    /// `<row i, z>` for `z` (at least `num_cols` entries, checked by callers). Terms are summed
    /// as 320-bit integers of Montgomery limbs and reduced once per row (Montgomery form is
    /// linear): most coefficients are ±1 and most witness values 0 or 1 (bits), so most terms
    /// cost a comparison and a 4-limb add, not a field operation.
    #[inline(always)]
    fn dot_row(&self, i: usize, z: &[Limbs], k: &EvalConsts) -> Fr {
        let (s, e) = (self.row_ptr[i], self.row_ptr[i + 1]);
        let coeffs: &[Limbs] = bytemuck::cast_slice(&self.coeffs);
        let mut pos = Wide::default();
        let mut neg = Wide::default();
        for (&c, &id) in self.cols[s..e].iter().zip(&self.coeff_ids[s..e]) {
            let x = &z[c as usize];
            if *x == [0; 4] {
                continue;
            }
            if id == k.one {
                pos.add(x);
            } else if id == k.minus_one {
                neg.add(x);
            } else {
                let v = &coeffs[id as usize];
                if *x == k.one_limbs {
                    pos.add(v);
                } else {
                    let p = bytemuck::cast::<Limbs, Fr>(*v) * bytemuck::cast::<Limbs, Fr>(*x);
                    pos.add(bytemuck::cast_ref(&p));
                }
            }
        }
        if neg.is_zero() {
            pos.reduce()
        } else {
            pos.reduce() - neg.reduce()
        }
    }
}

/// Fr's Montgomery limbs, as stored (`Fr` is `Pod` over them).
type Limbs = [u64; 4];

/// What [`SparseMatrix::dot_row`] compares against: the ids of ±1 in one matrix's table
/// (`u32::MAX` when absent) and the limbs of one.
struct EvalConsts {
    one: u32,
    minus_one: u32,
    one_limbs: Limbs,
}

impl EvalConsts {
    fn new(m: &SparseMatrix) -> Self {
        let id = |v: Fr| m.coeff_id(v).unwrap_or(u32::MAX);
        Self {
            one: id(Fr::ONE),
            minus_one: id(-Fr::ONE),
            one_limbs: bytemuck::cast(Fr::ONE),
        }
    }
}

/// An unreduced sum of reduced Montgomery limbs: `hi · 2^256 + lo`. Separate fields, not an
/// array, so the limbs stay in registers.
#[derive(Default)]
struct Wide {
    l0: u64,
    l1: u64,
    l2: u64,
    l3: u64,
    hi: u64,
}

impl Wide {
    #[inline(always)]
    fn add(&mut self, x: &Limbs) {
        let (l0, c) = self.l0.overflowing_add(x[0]);
        let (l1, c) = carrying_add(self.l1, x[1], c);
        let (l2, c) = carrying_add(self.l2, x[2], c);
        let (l3, c) = carrying_add(self.l3, x[3], c);
        (self.l0, self.l1, self.l2, self.l3) = (l0, l1, l2, l3);
        self.hi += u64::from(c);
    }

    fn is_zero(&self) -> bool {
        (self.l0 | self.l1 | self.l2 | self.l3 | self.hi) == 0
    }

    /// The field element whose Montgomery limbs are congruent to the sum. 2^256 < 3r, so two
    /// subtractions reduce `lo`; `hi · 2^256` are the limbs of the element `hi` (R = 2^256).
    fn reduce(&self) -> Fr {
        let mut lo = [self.l0, self.l1, self.l2, self.l3];
        while !limbs_below(&lo, &Fr::MODULUS) {
            let mut borrow = false;
            for (l, &m) in lo.iter_mut().zip(&Fr::MODULUS) {
                let (d, b1) = l.overflowing_sub(m);
                let (d, b2) = d.overflowing_sub(u64::from(borrow));
                *l = d;
                borrow = b1 | b2;
            }
        }
        let f: Fr = bytemuck::cast(lo);
        if self.hi == 0 {
            f
        } else {
            f + Fr::from_u64(self.hi)
        }
    }
}

/// `a + b + carry` and the carry out (`u64::carrying_add` is not stable yet).
#[inline(always)]
fn carrying_add(a: u64, b: u64, carry: bool) -> (u64, bool) {
    let (s, c1) = a.overflowing_add(b);
    let (s, c2) = s.overflowing_add(u64::from(carry));
    (s, c1 | c2)
}

/// `a < b` for little-endian limbs.
fn limbs_below(a: &Limbs, b: &Limbs) -> bool {
    for (x, y) in a.iter().rev().zip(b.iter().rev()) {
        if x != y {
            return x < y;
        }
    }
    false
}

/// A full assignment `z = (1, public inputs, private witness)`.
#[derive(Clone, PartialEq, Eq)]
pub struct Witness {
    num_public: usize,
    z: Vec<Fr>,
}

impl fmt::Debug for Witness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Witness")
            .field("num_public", &self.num_public)
            .field("len", &self.z.len())
            .finish()
    }
}

impl Witness {
    pub fn new(public: &[Fr], private: &[Fr]) -> Self {
        let mut z = Vec::with_capacity(1 + public.len() + private.len());
        z.push(Fr::ONE);
        z.extend_from_slice(public);
        z.extend_from_slice(private);
        Self {
            num_public: public.len(),
            z,
        }
    }

    /// From a full assignment whose entry 0 is one.
    pub fn from_assignment(num_public: usize, z: Vec<Fr>) -> Result<Self, WitnessError> {
        if z.len() < num_public + 1 {
            return Err(WitnessError::Length {
                expected: num_public + 1,
                found: z.len(),
            });
        }
        if z[0] != Fr::ONE {
            return Err(WitnessError::FirstNotOne);
        }
        Ok(Self { num_public, z })
    }

    /// The full assignment `z`, indexed by column.
    pub fn assignment(&self) -> &[Fr] {
        &self.z
    }

    /// Mutable access for tests and tools that tamper with a witness (entry 0 stays one).
    pub fn set(&mut self, index: usize, value: Fr) -> Option<()> {
        if index == 0 {
            return None;
        }
        *self.z.get_mut(index)? = value;
        Some(())
    }

    pub fn num_public(&self) -> usize {
        self.num_public
    }

    pub fn public_inputs(&self) -> &[Fr] {
        &self.z[1..=self.num_public]
    }

    pub fn private(&self) -> &[Fr] {
        &self.z[self.num_public + 1..]
    }

    pub fn len(&self) -> usize {
        self.z.len()
    }

    pub fn is_empty(&self) -> bool {
        self.z.is_empty()
    }

    /// This witness's storage, for the next witness of the same circuit to be written into.
    pub fn into_buffer(self) -> WitnessBuffer {
        WitnessBuffer(self.z)
    }
}

/// A finished witness's storage (its values stale), handed to the synthesis of the next
/// witness of the same circuit so that it writes into memory already faulted in: at 2^27 a
/// witness is 4.2 GB, and a fresh one's page faults and zeroing took 40% of a PoRep
/// partition's synthesis (crates/bellpepper/PERF-NOTES.md).
pub struct WitnessBuffer(Vec<Fr>);

impl fmt::Debug for WitnessBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("WitnessBuffer").field(&self.0.len()).finish()
    }
}

impl WitnessBuffer {
    /// Its entries, if it holds exactly `len`; a writer must then overwrite every one, since
    /// they are the last witness's values.
    pub fn into_stale(self, len: usize) -> Option<Vec<Fr>> {
        (self.0.len() == len).then_some(self.0)
    }
}

/// A rank-1 constraint system whose last `num_public + 1` rows are the instance rows.
#[derive(Clone, PartialEq, Eq)]
pub struct R1cs {
    num_public: usize,
    num_variables: usize,
    a: SparseMatrix,
    b: SparseMatrix,
    c: SparseMatrix,
}

impl fmt::Debug for R1cs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("R1cs")
            .field("num_public", &self.num_public)
            .field("num_variables", &self.num_variables)
            .field("num_constraints", &self.num_constraints())
            .field("nnz", &[self.a.nnz(), self.b.nnz(), self.c.nnz()])
            .finish()
    }
}

impl R1cs {
    /// Checks shapes and that the system ends with the instance rows (see the module docs).
    pub fn new(
        num_public: usize,
        num_variables: usize,
        a: SparseMatrix,
        b: SparseMatrix,
        c: SparseMatrix,
    ) -> Result<Self, R1csError> {
        if num_variables < num_public + 1 {
            return Err(R1csError::TooFewVariables {
                num_public,
                num_variables,
            });
        }
        if num_variables > u32::MAX as usize {
            return Err(R1csError::TooManyVariables);
        }
        let rows = a.num_rows();
        if b.num_rows() != rows
            || c.num_rows() != rows
            || [&a, &b, &c].iter().any(|m| m.num_cols != num_variables)
        {
            return Err(R1csError::ShapeMismatch {
                a: a.num_rows(),
                b: b.num_rows(),
                c: c.num_rows(),
                num_variables,
            });
        }
        let instance = num_public + 1;
        if rows < instance {
            return Err(R1csError::MissingInstanceRow {
                row: rows,
                variable: 0,
            });
        }
        let first = rows - instance;
        for v in 0..instance {
            let row = first + v;
            let ok = a.row_at(row).terms().eq([(v as u32, Fr::ONE)])
                && b.row_at(row).cols().is_empty()
                && c.row_at(row).cols().is_empty();
            if !ok {
                return Err(R1csError::MissingInstanceRow { row, variable: v });
            }
        }
        Ok(Self {
            num_public,
            num_variables,
            a,
            b,
            c,
        })
    }

    pub fn num_public(&self) -> usize {
        self.num_public
    }

    /// All variables including the constant one.
    pub fn num_variables(&self) -> usize {
        self.num_variables
    }

    pub fn num_private(&self) -> usize {
        self.num_variables - self.num_public - 1
    }

    /// All rows, instance rows included: what the QAP domain must hold.
    pub fn num_constraints(&self) -> usize {
        self.a.num_rows()
    }

    /// Rows excluding the `num_public + 1` instance rows.
    pub fn num_circuit_constraints(&self) -> usize {
        self.num_constraints() - self.num_public - 1
    }

    /// The QAP domain size: the next power of two at or above the number of rows.
    pub fn domain_size(&self) -> usize {
        self.num_constraints().next_power_of_two()
    }

    pub fn a(&self) -> &SparseMatrix {
        &self.a
    }

    pub fn b(&self) -> &SparseMatrix {
        &self.b
    }

    pub fn c(&self) -> &SparseMatrix {
        &self.c
    }

    /// Checks that `witness` fits this system (length, public count, leading one).
    pub fn check_witness(&self, witness: &Witness) -> Result<(), WitnessError> {
        if witness.num_public != self.num_public {
            return Err(WitnessError::PublicCount {
                expected: self.num_public,
                found: witness.num_public,
            });
        }
        if witness.z.len() != self.num_variables {
            return Err(WitnessError::Length {
                expected: self.num_variables,
                found: witness.z.len(),
            });
        }
        if witness.z[0] != Fr::ONE {
            return Err(WitnessError::FirstNotOne);
        }
        Ok(())
    }

    /// `Ok` when every constraint holds; otherwise names the first failing one.
    pub fn is_satisfied(&self, witness: &Witness) -> Result<(), WitnessError> {
        self.check_witness(witness)?;
        let n = self.num_constraints();
        let (mut a, mut b, mut c) = (vec![Fr::ZERO; n], vec![Fr::ZERO; n], vec![Fr::ZERO; n]);
        self.evaluate_into(witness.assignment(), &mut a, &mut b, &mut c)
    }

    /// The first `num_constraints` entries of each output, where A·z, B·z, C·z go; an output
    /// shorter than that is an error.
    pub fn row_outputs<'o>(
        &self,
        [a, b, c]: [&'o mut [Fr]; 3],
    ) -> Result<[&'o mut [Fr]; 3], WitnessError> {
        let n = self.num_constraints();
        let shortest = a.len().min(b.len()).min(c.len());
        if shortest < n {
            return Err(WitnessError::OutputLength {
                expected: n,
                found: shortest,
            });
        }
        Ok([&mut a[..n], &mut b[..n], &mut c[..n]])
    }

    /// `A·z`, `B·z`, `C·z` into the first `num_constraints` entries of the outputs, in parallel
    /// over row chunks, checking `a·b = c` row by row while the chunk is in cache. Entries past
    /// the rows are left untouched (callers zero-pad). An unsatisfied witness still fills the
    /// outputs and returns [`WitnessError::Unsatisfied`] naming the first failing row.
    pub fn evaluate_into(
        &self,
        z: &[Fr],
        a: &mut [Fr],
        b: &mut [Fr],
        c: &mut [Fr],
    ) -> Result<(), WitnessError> {
        let [a, b, c] = self.row_outputs([a, b, c])?;
        self.evaluate_rows(z, 0, [a, b, c])
    }

    /// [`Self::evaluate_into`] for the rows `first..first + a.len()` of the domain: the rows
    /// past the system's are zero. The outputs must be of one length. A failing row names its
    /// place in the whole system (the first that fails in this range).
    pub fn evaluate_rows(
        &self,
        z: &[Fr],
        first: usize,
        [a, b, c]: [&mut [Fr]; 3],
    ) -> Result<(), WitnessError> {
        if z.len() != self.num_variables {
            return Err(WitnessError::Length {
                expected: self.num_variables,
                found: z.len(),
            });
        }
        if b.len() != a.len() || c.len() != a.len() {
            return Err(WitnessError::OutputLength {
                expected: a.len(),
                found: b.len().min(c.len()),
            });
        }
        let held = self.num_constraints().saturating_sub(first).min(a.len());
        let (a, a_pad) = a.split_at_mut(held);
        let (b, b_pad) = b.split_at_mut(held);
        let (c, c_pad) = c.split_at_mut(held);
        for pad in [a_pad, b_pad, c_pad] {
            pad.fill(Fr::ZERO);
        }
        let rows = RowEvaluator::new(self);
        let first_bad = a
            .par_chunks_mut(EVAL_CHUNK_ROWS)
            .zip(b.par_chunks_mut(EVAL_CHUNK_ROWS))
            .zip(c.par_chunks_mut(EVAL_CHUNK_ROWS))
            .enumerate()
            .filter_map(|(chunk, ((a, b), c))| {
                let base = first + chunk * EVAL_CHUNK_ROWS;
                let mut bad = None;
                for (j, ((a, b), c)) in a.iter_mut().zip(b).zip(c).enumerate() {
                    let row = base + j;
                    let v = rows.eval(row, z);
                    [*a, *b, *c] = v;
                    if bad.is_none() && !RowEvaluator::satisfied(v) {
                        bad = Some(row);
                    }
                }
                bad
            })
            .min();
        match first_bad {
            Some(constraint) => Err(WitnessError::Unsatisfied { constraint }),
            None => Ok(()),
        }
    }
}

/// Rows of a system evaluated one at a time, in any order (`R1cs::evaluate_into` runs it over
/// every row; a caller that learns z piece by piece evaluates the rows whose values it has).
pub struct RowEvaluator<'a> {
    r1cs: &'a R1cs,
    k: [EvalConsts; 3],
}

impl fmt::Debug for RowEvaluator<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RowEvaluator")
            .field("rows", &self.r1cs.num_constraints())
            .finish()
    }
}

impl<'a> RowEvaluator<'a> {
    pub fn new(r1cs: &'a R1cs) -> Self {
        Self {
            r1cs,
            k: [
                EvalConsts::new(&r1cs.a),
                EvalConsts::new(&r1cs.b),
                EvalConsts::new(&r1cs.c),
            ],
        }
    }

    /// (A·z, B·z, C·z) of row `row < num_constraints`; `z` must have at least the columns the
    /// row reads (callers index within range: out-of-range panics).
    #[inline(always)]
    pub fn eval(&self, row: usize, z: &[Fr]) -> [Fr; 3] {
        let z: &[Limbs] = bytemuck::cast_slice(z);
        let r = self.r1cs;
        [
            r.a.dot_row(row, z, &self.k[0]),
            r.b.dot_row(row, z, &self.k[1]),
            r.c.dot_row(row, z, &self.k[2]),
        ]
    }

    /// Whether an evaluated row satisfies `a·b = c`, skipping the multiplication when a or b
    /// is 0 or 1 (bit constraints).
    #[inline]
    pub fn satisfied([a, b, c]: [Fr; 3]) -> bool {
        if a == Fr::ZERO || b == Fr::ZERO {
            c == Fr::ZERO
        } else if a == Fr::ONE {
            b == c
        } else if b == Fr::ONE {
            a == c
        } else {
            a * b == c
        }
    }
}

/// Builds a constraint system and its assignment together, bellperson-style: public and
/// private variables are numbered apart and laid out (one, public, private) by [`Self::build`].
#[derive(Debug, Default)]
pub struct R1csBuilder {
    public: Vec<Fr>,
    private: Vec<Fr>,
    rows: [RowsBuilder; 3],
}

#[derive(Debug)]
struct RowsBuilder {
    row_ptr: Vec<usize>,
    terms: Vec<(Variable, Fr)>,
}

impl Default for RowsBuilder {
    fn default() -> Self {
        Self {
            row_ptr: vec![0],
            terms: Vec::new(),
        }
    }
}

impl R1csBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Reserves room for about this many constraints and terms per matrix.
    pub fn with_capacity(constraints: usize, terms_per_matrix: usize) -> Self {
        let rows = || RowsBuilder {
            row_ptr: {
                let mut v = Vec::with_capacity(constraints + 1);
                v.push(0);
                v
            },
            terms: Vec::with_capacity(terms_per_matrix),
        };
        Self {
            public: Vec::new(),
            private: Vec::with_capacity(constraints),
            rows: [rows(), rows(), rows()],
        }
    }

    pub fn alloc_public(&mut self, value: Fr) -> Variable {
        self.public.push(value);
        Variable::Public(index_u32(self.public.len() - 1))
    }

    pub fn alloc_private(&mut self, value: Fr) -> Variable {
        self.private.push(value);
        Variable::Private(index_u32(self.private.len() - 1))
    }

    /// The assigned value of a variable; `None` if it was not allocated here.
    pub fn value(&self, v: Variable) -> Option<Fr> {
        match v {
            Variable::One => Some(Fr::ONE),
            Variable::Public(i) => self.public.get(i as usize).copied(),
            Variable::Private(i) => self.private.get(i as usize).copied(),
        }
    }

    /// Adds the constraint `<a, z> · <b, z> = <c, z>` (it is not checked here: see
    /// [`R1cs::is_satisfied`]).
    pub fn enforce(&mut self, a: &[(Variable, Fr)], b: &[(Variable, Fr)], c: &[(Variable, Fr)]) {
        for (rows, lc) in self.rows.iter_mut().zip([a, b, c]) {
            rows.terms.extend_from_slice(lc);
            rows.row_ptr.push(rows.terms.len());
        }
    }

    pub fn num_constraints(&self) -> usize {
        self.rows[0].row_ptr.len() - 1
    }

    pub fn num_public(&self) -> usize {
        self.public.len()
    }

    pub fn num_private(&self) -> usize {
        self.private.len()
    }

    /// Lays out the columns, merges repeated terms, drops zero coefficients, appends the
    /// instance rows, and returns the system with its assignment.
    pub fn build(self) -> Result<(R1cs, Witness), R1csError> {
        let num_public = self.public.len();
        let num_variables = 1 + num_public + self.private.len();
        if num_variables > u32::MAX as usize {
            return Err(R1csError::TooManyVariables);
        }
        let [ra, rb, rc] = self.rows;
        let col = |v: Variable| -> Result<u32, R1csError> {
            let c = match v {
                Variable::One => 0,
                Variable::Public(i) if (i as usize) < num_public => 1 + i as usize,
                Variable::Private(i) if (i as usize) < num_variables - 1 - num_public => {
                    1 + num_public + i as usize
                }
                other => return Err(R1csError::UnknownVariable(other)),
            };
            Ok(c as u32)
        };
        let finish = |rows: RowsBuilder, name: char, instance_a: bool| {
            let malformed = |reason| R1csError::MalformedMatrix {
                matrix: name,
                reason,
            };
            let mut m = compress(rows, name, &col)?;
            let one = m.table.id(Fr::ONE).map_err(malformed)?;
            for v in 0..=num_public {
                if instance_a {
                    m.cols.push(v as u32);
                    m.coeff_ids.push(one);
                }
                m.row_ptr.push(m.cols.len());
            }
            SparseMatrix::from_indexed_csr(
                num_variables,
                m.row_ptr,
                m.cols,
                m.coeff_ids,
                m.table.coeffs,
            )
            .map_err(malformed)
        };
        let (a, (b, c)) = rayon::join(
            || finish(ra, 'A', true),
            || rayon::join(|| finish(rb, 'B', false), || finish(rc, 'C', false)),
        );
        let r1cs = R1cs::new(num_public, num_variables, a?, b?, c?)?;
        let witness = Witness::new(&self.public, &self.private);
        Ok((r1cs, witness))
    }
}

fn index_u32(i: usize) -> u32 {
    // Saturating: `build` rejects systems this large, so the clamp is never observed.
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// A matrix being compressed: CSR with interned coefficients.
struct Compressed {
    row_ptr: Vec<usize>,
    cols: Vec<u32>,
    coeff_ids: Vec<u32>,
    table: CoefficientTable,
}

/// Rows of (variable, coeff) terms to canonical CSR: columns sorted, repeats summed, zeros
/// dropped, coefficients interned.
fn compress(
    rows: RowsBuilder,
    matrix: char,
    col: &(impl Fn(Variable) -> Result<u32, R1csError> + Sync),
) -> Result<Compressed, R1csError> {
    let mut row_ptr = Vec::with_capacity(rows.row_ptr.len());
    let mut cols = Vec::with_capacity(rows.terms.len());
    let mut coeff_ids = Vec::with_capacity(rows.terms.len());
    let mut table = CoefficientTable::default();
    row_ptr.push(0);
    let mut scratch: Vec<(u32, Fr)> = Vec::new();
    for w in rows.row_ptr.windows(2) {
        scratch.clear();
        for &(v, coeff) in &rows.terms[w[0]..w[1]] {
            scratch.push((col(v)?, coeff));
        }
        scratch.sort_unstable_by_key(|t| t.0);
        let mut k = 0;
        while k < scratch.len() {
            let (c, mut sum) = scratch[k];
            k += 1;
            while k < scratch.len() && scratch[k].0 == c {
                sum += scratch[k].1;
                k += 1;
            }
            if !sum.is_zero() {
                cols.push(c);
                let id = table
                    .id(sum)
                    .map_err(|reason| R1csError::MalformedMatrix { matrix, reason })?;
                coeff_ids.push(id);
            }
        }
        row_ptr.push(cols.len());
    }
    Ok(Compressed {
        row_ptr,
        cols,
        coeff_ids,
        table,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(v: u64) -> Fr {
        Fr::from_u64(v)
    }

    #[test]
    fn builder_lays_out_columns_and_appends_instance_rows() {
        let mut b = R1csBuilder::new();
        let x = b.alloc_private(f(3));
        let out = b.alloc_public(f(9));
        // x * x = out, with a repeated term in A that must be merged: (2x - x) * x = out.
        b.enforce(
            &[(x, f(2)), (x, -Fr::ONE)],
            &[(x, Fr::ONE)],
            &[(out, Fr::ONE)],
        );
        let (r1cs, w) = b.build().unwrap();
        assert_eq!(r1cs.num_public(), 1);
        assert_eq!(r1cs.num_variables(), 3);
        assert_eq!(r1cs.num_constraints(), 3);
        assert_eq!(r1cs.num_circuit_constraints(), 1);
        let terms = |m: &SparseMatrix, i| m.row(i).unwrap().terms().collect::<Vec<_>>();
        assert_eq!(terms(r1cs.a(), 0), [(2, Fr::ONE)]);
        assert!(r1cs.a().row(3).is_none());
        assert_eq!(r1cs.c().row(0).unwrap().cols(), &[1u32]);
        assert_eq!(r1cs.a().row(1).unwrap().cols(), &[0u32]);
        assert_eq!(r1cs.a().row(2).unwrap().cols(), &[1u32]);
        // Three entries of one, one table entry.
        assert_eq!(r1cs.a().coeffs(), &[Fr::ONE]);
        assert_eq!(w.assignment(), &[Fr::ONE, f(9), f(3)]);
        assert_eq!(w.public_inputs(), &[f(9)]);
        assert_eq!(r1cs.is_satisfied(&w), Ok(()));
    }

    /// Rows evaluated piece by piece, over any boundaries and past the system's rows, give
    /// what the whole evaluation gives (zeros past the rows), and a broken witness is named at
    /// its place in the system by the piece that holds it.
    #[test]
    fn rows_evaluated_in_pieces_match_the_whole() {
        use rand::SeedableRng;
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(9);
        let (r1cs, w) =
            crate::testing::demo::circuit_with_rows(3000, 3, 60, &mut rng).expect("demo circuit");
        let n = r1cs.domain_size();
        let mut abc = crate::Evaluations::pinned_or_heap(None, n);
        crate::witness_map(&r1cs, w.assignment(), &mut abc).unwrap();
        for piece in [1, 7, 1000, 2999, 4096] {
            let mut got = [vec![Fr::ONE; n], vec![Fr::ONE; n], vec![Fr::ONE; n]];
            let mut at = 0;
            while at < n {
                let len = piece.min(n - at);
                let [a, b, c] = &mut got;
                r1cs.evaluate_rows(
                    w.assignment(),
                    at,
                    [
                        &mut a[at..at + len],
                        &mut b[at..at + len],
                        &mut c[at..at + len],
                    ],
                )
                .unwrap();
                at += len;
            }
            assert_eq!(got[0][..], abc.a[..], "a in pieces of {piece}");
            assert_eq!(got[1][..], abc.b[..], "b in pieces of {piece}");
            assert_eq!(got[2][..], abc.c[..], "c in pieces of {piece}");
        }
        let mut bad = w.clone();
        let last = r1cs.num_variables() - 1;
        bad.set(last, bad.assignment()[last] + Fr::ONE).unwrap();
        let Err(WitnessError::Unsatisfied { constraint }) = r1cs.is_satisfied(&bad) else {
            panic!("a changed last value breaks a row");
        };
        let [mut a, mut b, mut c] = [
            vec![Fr::ZERO; 500],
            vec![Fr::ZERO; 500],
            vec![Fr::ZERO; 500],
        ];
        let first = constraint / 500 * 500;
        let len = 500.min(n - first);
        assert_eq!(
            r1cs.evaluate_rows(
                bad.assignment(),
                first,
                [&mut a[..len], &mut b[..len], &mut c[..len]]
            ),
            Err(WitnessError::Unsatisfied { constraint })
        );
        assert!(matches!(
            r1cs.evaluate_rows(w.assignment(), 0, [&mut a[..10], &mut b[..9], &mut c[..10]]),
            Err(WitnessError::OutputLength { .. })
        ));
    }

    #[test]
    fn first_failing_constraint_is_named() {
        let mut b = R1csBuilder::new();
        let x = b.alloc_private(f(2));
        let y = b.alloc_private(f(4));
        let z = b.alloc_private(f(7));
        b.enforce(&[(x, Fr::ONE)], &[(x, Fr::ONE)], &[(y, Fr::ONE)]);
        b.enforce(&[(x, Fr::ONE)], &[(y, Fr::ONE)], &[(z, Fr::ONE)]); // 8 != 7
        b.enforce(&[(y, Fr::ONE)], &[(y, Fr::ONE)], &[(z, Fr::ONE)]); // 16 != 7
        let (r1cs, mut w) = b.build().unwrap();
        assert_eq!(
            r1cs.is_satisfied(&w),
            Err(WitnessError::Unsatisfied { constraint: 1 })
        );
        w.set(3, f(8)).unwrap();
        assert_eq!(
            r1cs.is_satisfied(&w),
            Err(WitnessError::Unsatisfied { constraint: 2 })
        );
        let short = Witness::new(&[], &[f(2), f(4)]);
        assert_eq!(
            r1cs.is_satisfied(&short),
            Err(WitnessError::Length {
                expected: 4,
                found: 3
            })
        );
        let wrong_public = Witness::new(&[f(2)], &[f(4), f(8)]);
        assert!(matches!(
            r1cs.is_satisfied(&wrong_public),
            Err(WitnessError::PublicCount { .. })
        ));
    }

    /// The lazily reduced row sums equal plain field arithmetic, for every kind of term and
    /// for rows long enough to carry past 256 bits many times.
    #[test]
    fn evaluation_matches_field_arithmetic() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(21);
        let cols = 300;
        // z: the one, zeros, ones, minus ones, random values.
        let z: Vec<Fr> = (0..cols)
            .map(|i| match i % 5 {
                _ if i == 0 => Fr::ONE,
                0 => Fr::ZERO,
                1 => Fr::ONE,
                2 => -Fr::ONE,
                _ => Fr::random(&mut rng),
            })
            .collect();
        let mut matrices = Vec::new();
        for _ in 0..3 {
            let (mut row_ptr, mut cs, mut vs) = (vec![0], Vec::new(), Vec::new());
            for row in 0..40 {
                for c in 0..cols {
                    // Row 0 is dense with random coefficients; the others are sparse mixes.
                    if row > 0 && rng.gen_range(0..4) != 0 {
                        continue;
                    }
                    let v = match rng.gen_range(0..4) {
                        _ if row == 0 => Fr::random(&mut rng),
                        0 => Fr::ONE,
                        1 => -Fr::ONE,
                        2 => f(1 << rng.gen_range(0..60)),
                        _ => Fr::random(&mut rng),
                    };
                    cs.push(c as u32);
                    vs.push(v);
                }
                row_ptr.push(cs.len());
            }
            matrices.push(SparseMatrix::from_csr(cols, row_ptr, cs, vs).unwrap());
        }
        let naive = |m: &SparseMatrix, row: usize| -> Fr {
            m.row(row)
                .unwrap()
                .terms()
                .fold(Fr::ZERO, |acc, (c, v)| acc + v * z[c as usize])
        };
        let zl: &[Limbs] = bytemuck::cast_slice(&z);
        for m in &matrices {
            let k = EvalConsts::new(m);
            for row in 0..m.num_rows() {
                assert_eq!(m.dot_row(row, zl, &k), naive(m, row), "row {row}");
            }
        }
        // Sums that reduce to zero and to r - 1 from both accumulators.
        let big = -Fr::ONE;
        let m = SparseMatrix::from_csr(3, vec![0, 3], vec![0, 1, 2], vec![big, Fr::ONE, -Fr::ONE])
            .unwrap();
        let zz = [Fr::ONE, big, big];
        let k = EvalConsts::new(&m);
        assert_eq!(m.dot_row(0, bytemuck::cast_slice(&zz), &k), big);
    }

    #[test]
    fn unknown_variables_and_missing_instance_rows_are_rejected() {
        let mut b = R1csBuilder::new();
        b.enforce(&[(Variable::Private(5), Fr::ONE)], &[], &[]);
        assert_eq!(
            b.build().unwrap_err(),
            R1csError::UnknownVariable(Variable::Private(5))
        );

        let empty =
            |rows: usize| SparseMatrix::from_csr(2, vec![0; rows + 1], vec![], vec![]).unwrap();
        // One public input: two instance rows needed, A has none.
        assert_eq!(
            R1cs::new(1, 2, empty(2), empty(2), empty(2)).unwrap_err(),
            R1csError::MissingInstanceRow {
                row: 0,
                variable: 0
            }
        );
        assert!(SparseMatrix::from_csr(2, vec![0, 2], vec![1, 1], vec![Fr::ONE; 2]).is_err());
        assert!(SparseMatrix::from_csr(2, vec![0, 1], vec![2], vec![Fr::ONE]).is_err());
        assert!(SparseMatrix::from_csr(2, vec![0, 1], vec![1], vec![Fr::ZERO]).is_err());
        assert!(SparseMatrix::from_csr(2, vec![0, 1], vec![1], vec![]).is_err());
        // An inner row pointer past the end (only the last one is checked up front).
        assert!(SparseMatrix::from_csr(2, vec![0, 5, 1], vec![1], vec![Fr::ONE]).is_err());
        assert!(SparseMatrix::from_csr(2, vec![1, 1], vec![1], vec![Fr::ONE]).is_err());
        assert!(SparseMatrix::from_csr(2, vec![], vec![], vec![]).is_err());
        // Indexed: an id past the table, a repeated or zero coefficient.
        let indexed = |ids: Vec<u32>, coeffs: Vec<Fr>| {
            SparseMatrix::from_indexed_csr(3, vec![0, 2], vec![1, 2], ids, coeffs)
        };
        assert!(indexed(vec![0, 1], vec![Fr::ONE, f(2)]).is_ok());
        assert!(indexed(vec![0, 2], vec![Fr::ONE, f(2)]).is_err());
        assert!(indexed(vec![0, 1], vec![Fr::ONE, Fr::ONE]).is_err());
        assert!(indexed(vec![0, 1], vec![Fr::ONE, Fr::ZERO]).is_err());
        // Values interned: equal values share an id.
        let m =
            SparseMatrix::from_csr(3, vec![0, 3], vec![0, 1, 2], vec![f(5), f(7), f(5)]).unwrap();
        assert_eq!(
            (m.coeff_ids(), m.coeffs()),
            (&[0, 1, 0][..], &[f(5), f(7)][..])
        );
    }
}
