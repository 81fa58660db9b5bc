//! bellpepper circuits proven by cuzk.
//!
//! [`synthesize`] runs any `bellpepper_core::Circuit<blstrs::Scalar>` against
//! [`SynthesisCs`], a `ConstraintSystem` that builds cuzk's [`R1cs`] and [`Witness`] exactly as
//! bellperson's prover and parameter generator see the circuit:
//! - the same variable order: the one (bellperson's `Input(0)`), the inputs in `alloc_input`
//!   order, then the aux variables in `alloc` order — cuzk's columns 0, `1..=num_public`, rest;
//! - the same rows: the circuit's constraints in `enforce` order, then bellperson's
//!   `input_i · 0 = 0` for every input i, the one included, which are cuzk's instance rows
//!   (A = {i: 1}, B = C = {}); so the domain size and every query match bellperson's;
//! - the same densities: a term enters a row when its merged coefficient is non-zero, as
//!   bellperson's density trackers count it, so `cuzk_formats::BpParameters::into_proving_key`
//!   maps bellperson's filtered queries onto this R1cs.
//!
//! [`CompiledCircuit`] keeps the system of one synthesis; later proofs of the same circuit run
//! [`CompiledCircuit::witness`], a witness-only synthesis ([`WitnessCs`]: no linear combination
//! is built, the `enforce` closures are never called), and the prover's sparse matrix-vector
//! product A·z, B·z, C·z does the rest. [`CompiledCircuit::witness_and_evaluations`] does both
//! at once: the product runs on another thread during the synthesis, row by row as the values
//! each row reads are allocated, so little of it is left when synthesis ends.
//! [`CompiledCircuit::witness_of_parts`] synthesizes a circuit's independent parts (its
//! challenges, say) on rayon's pool and joins them.
//!
//! Scalars cross the boundary as blst's own Montgomery limbs (`blstrs::Scalar` and cuzk's `Fr`
//! both wrap `blst_fr`), so conversion is a copy.

#![forbid(unsafe_code)]

pub mod batch;
pub mod native_poseidon;
pub mod native_sha256;
mod overlap;
mod parts;
mod replicate;
pub mod sha256_circuit;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;

use bellpepper_core::{
    Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable as BpVariable,
};
use blstrs::Scalar;
use cuzk_field::Fr;
use cuzk_groth16::{R1cs, R1csBuilder, R1csError, Variable, Witness};
use ff::Field;
pub use parts::{Gadgets, PartsError, WitnessPart};
pub use replicate::ReplicateError;

/// blstrs's scalar as cuzk's: both wrap `blst_fr`, and blstrs keeps its limbs reduced, so this
/// is a 32-byte copy (`Fr` is `Pod`), inlined into the witness conversion's loop.
#[inline]
pub fn fr_from_scalar(s: &Scalar) -> Fr {
    let raw: blst::blst_fr = (*s).into();
    bytemuck::cast(raw.l)
}

/// cuzk's scalar as blstrs's.
pub fn scalar_from_fr(f: &Fr) -> Scalar {
    Scalar::from(blst::blst_fr {
        l: f.to_montgomery(),
    })
}

/// Why a circuit could not be turned into a system and a witness.
#[derive(Debug, thiserror::Error)]
pub enum BellpepperError {
    #[error("synthesis failed: {0}")]
    Synthesis(#[from] SynthesisError),
    #[error("the synthesized system is invalid: {0}")]
    R1cs(#[from] R1csError),
    #[error("witness rejected: {0}")]
    Witness(#[from] cuzk_groth16::WitnessError),
    #[error(
        "witness-only synthesis allocated {found_inputs} inputs and {found_aux} aux variables; the compiled circuit has {inputs} and {aux}: not the same circuit"
    )]
    ShapeChanged {
        inputs: usize,
        aux: usize,
        found_inputs: usize,
        found_aux: usize,
    },
    #[error(transparent)]
    Parts(#[from] PartsError),
    #[error(transparent)]
    Replicate(#[from] ReplicateError),
}

/// Namespaces only name things for debugging: both systems ignore them.
macro_rules! no_namespaces {
    () => {
        #[inline]
        fn push_namespace<NR, N>(&mut self, _: N)
        where
            NR: Into<String>,
            N: FnOnce() -> NR,
        {
        }

        #[inline]
        fn pop_namespace(&mut self) {}

        #[inline]
        fn get_root(&mut self) -> &mut Self::Root {
            self
        }
    };
}

fn var(v: BpVariable) -> Variable {
    match v.get_unchecked() {
        Index::Input(0) => Variable::One,
        Index::Input(i) => Variable::Public((i - 1) as u32),
        Index::Aux(i) => Variable::Private(i as u32),
    }
}

/// A `ConstraintSystem` that records constraints and assignments into an [`R1csBuilder`].
#[derive(Debug)]
pub struct SynthesisCs {
    builder: R1csBuilder,
    terms: [Vec<(Variable, Fr)>; 3],
}

impl Default for SynthesisCs {
    fn default() -> Self {
        Self {
            builder: R1csBuilder::new(),
            terms: Default::default(),
        }
    }
}

impl SynthesisCs {
    pub fn new() -> Self {
        Self::default()
    }

    /// The system (with the instance rows appended) and its assignment.
    pub fn finish(self) -> Result<(R1cs, Witness), BellpepperError> {
        Ok(self.builder.build()?)
    }

    fn lc_terms(lc: &LinearCombination<Scalar>, out: &mut Vec<(Variable, Fr)>) {
        out.clear();
        // bellpepper merges repeated variables; bellperson's trackers skip zero coefficients.
        for (v, c) in lc.iter() {
            let c = fr_from_scalar(c);
            if !c.is_zero() {
                out.push((var(v), c));
            }
        }
    }
}

impl ConstraintSystem<Scalar> for SynthesisCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<BpVariable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = self.builder.alloc_private(fr_from_scalar(&f()?));
        match v {
            Variable::Private(i) => Ok(BpVariable::new_unchecked(Index::Aux(i as usize))),
            _ => Err(SynthesisError::Unsatisfiable),
        }
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<BpVariable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        let v = self.builder.alloc_public(fr_from_scalar(&f()?));
        match v {
            // bellperson's Input(0) is the one: public input i is Input(i + 1).
            Variable::Public(i) => Ok(BpVariable::new_unchecked(Index::Input(i as usize + 1))),
            _ => Err(SynthesisError::Unsatisfiable),
        }
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let [ta, tb, tc] = &mut self.terms;
        Self::lc_terms(&a(LinearCombination::zero()), ta);
        Self::lc_terms(&b(LinearCombination::zero()), tb);
        Self::lc_terms(&c(LinearCombination::zero()), tc);
        self.builder.enforce(ta, tb, tc);
    }

    no_namespaces!();
}

/// A `ConstraintSystem` that only computes the assignment (bellperson's inputs-then-aux
/// layout), never calling the `enforce` closures.
#[derive(Debug)]
pub struct WitnessCs<'a> {
    /// The one, then the inputs.
    inputs: Vec<Scalar>,
    aux: Aux<'a>,
    /// When `aux` reaches this length, the next call hands the values to the evaluator
    /// (`usize::MAX` when nothing is streamed): one comparison per call.
    flush_at: usize,
    stream: Option<AuxStream>,
}

/// Where a [`WitnessCs`] keeps its aux values: a vector of its own, or the slot of the joined
/// witness that a part's recorded size gave it (`witness_of_parts`), so nothing is copied after.
#[derive(Debug)]
enum Aux<'a> {
    Owned(Vec<Scalar>),
    InSlot { slot: &'a mut [Scalar], len: usize },
}

impl<'a> Aux<'a> {
    #[inline(always)]
    fn len(&self) -> usize {
        match self {
            Self::Owned(v) => v.len(),
            Self::InSlot { len, .. } => *len,
        }
    }

    #[inline(always)]
    fn values(&self) -> &[Scalar] {
        match self {
            Self::Owned(v) => v,
            Self::InSlot { slot, len } => &slot[..*len],
        }
    }

    #[inline(always)]
    fn push(&mut self, value: Scalar) {
        match self {
            Self::Owned(v) => v.push(value),
            Self::InSlot { slot, len } if *len < slot.len() => {
                slot[*len] = value;
                *len += 1;
            }
            Self::InSlot { .. } => self.spill().push(value),
        }
    }

    /// `n` new zeros at the end, for a gadget to fill.
    fn grow(&mut self, n: usize) -> &mut [Scalar] {
        let start = self.len();
        if matches!(self, Self::InSlot { slot, .. } if start + n > slot.len()) {
            self.spill();
        }
        match self {
            Self::Owned(v) => grow(v, n),
            Self::InSlot { slot, len } => {
                *len += n;
                let new = &mut slot[start..start + n];
                new.fill(Scalar::from(0u64));
                new
            }
        }
    }

    fn into_vec(self) -> Vec<Scalar> {
        match self {
            Self::Owned(v) => v,
            Self::InSlot { slot, len } => slot[..len].to_vec(),
        }
    }

    fn extend_from_slice(&mut self, values: &[Scalar]) {
        self.grow(values.len()).copy_from_slice(values);
    }

    /// More values than the slot holds: the part is not of its recorded size, so its values
    /// move to a vector of their own (`witness_of_parts` then joins the parts by copying).
    #[cold]
    #[inline(never)]
    fn spill(&mut self) -> &mut Vec<Scalar> {
        if let Self::InSlot { slot, len } = self {
            let mut v = Vec::with_capacity(2 * slot.len().max(1));
            v.extend_from_slice(&slot[..*len]);
            *self = Self::Owned(v);
        }
        match self {
            Self::Owned(v) => v,
            Self::InSlot { .. } => unreachable!("made owned above"),
        }
    }
}

/// Where [`WitnessCs`] sends completed aux values, as blocks of `Fr`.
#[derive(Debug)]
struct AuxStream {
    blocks: mpsc::Sender<Vec<Fr>>,
    /// Emptied blocks coming back, so no block is allocated twice.
    spare: mpsc::Receiver<Vec<Fr>>,
    sent: usize,
    block: usize,
    /// The aux values the compiled circuit has.
    total: usize,
}

impl AuxStream {
    /// The size of the next block: `block`, shrinking by halves near the end (the compiled
    /// circuit says where that is), so that few values are left when synthesis ends: their
    /// rows are the ones evaluated after it.
    fn next_block(&self) -> usize {
        let left = self.total.saturating_sub(self.sent);
        (left / 2).max(MIN_TAIL_BLOCK).min(self.block).max(1)
    }
}

impl Default for WitnessCs<'_> {
    fn default() -> Self {
        Self::with_capacity(0, 0)
    }
}

impl<'a> WitnessCs<'a> {
    pub fn with_capacity(inputs: usize, aux: usize) -> Self {
        Self::with_aux(inputs, Aux::Owned(Vec::with_capacity(aux)))
    }

    /// A system whose aux values are written into `slot` (spilling into a vector of its own
    /// if they outgrow it).
    fn in_slot(slot: &'a mut [Scalar]) -> Self {
        Self::with_aux(0, Aux::InSlot { slot, len: 0 })
    }

    fn with_aux(inputs: usize, aux: Aux<'a>) -> Self {
        let mut v = Vec::with_capacity(inputs + 1);
        v.push(Scalar::from(1u64));
        Self::of_values(v, aux)
    }

    /// A system holding `inputs` (the one first) and `aux` already, streaming nothing.
    fn of_values(inputs: Vec<Scalar>, aux: Aux<'a>) -> Self {
        Self {
            inputs,
            aux,
            flush_at: usize::MAX,
            stream: None,
        }
    }

    /// Sends the aux values not sent yet. Only called at the start of a call: a slice handed
    /// out by `allocate_empty_aux` is filled before the gadget can call again, so every value
    /// present then is final.
    #[cold]
    #[inline(never)]
    fn flush(&mut self) {
        let Some(s) = &mut self.stream else { return };
        if s.sent < self.aux.len() {
            let mut buf = s.spare.try_recv().unwrap_or_default();
            buf.clear();
            buf.extend(self.aux.values()[s.sent..].iter().map(fr_from_scalar));
            // A closed channel means the evaluator panicked: joining it reports that.
            let _ = s.blocks.send(buf);
            s.sent = self.aux.len();
        }
        self.flush_at = s.sent + s.next_block();
    }

    #[inline(always)]
    fn maybe_flush(&mut self) {
        if self.aux.len() >= self.flush_at {
            self.flush();
        }
    }

    /// A new aux value: what `alloc` does, for the native witness writers too.
    #[inline(always)]
    fn push_aux(&mut self, value: Scalar) -> usize {
        self.maybe_flush();
        self.aux.push(value);
        self.aux.len() - 1
    }

    /// `n` new aux values, each 0 or 1: the low `n` bits of `bits`, least significant first.
    /// A native gadget's word at once: into its slot without a check per value when it fits
    /// before the next flush.
    #[inline]
    fn push_aux_bits(&mut self, bits: u64, n: usize) {
        // A hash's bits are random: a branch per bit would mispredict half the time.
        let bit = |i: usize| {
            std::hint::select_unpredictable((bits >> i) & 1 == 1, Scalar::ONE, Scalar::ZERO)
        };
        if let Aux::InSlot { slot, len } = &mut self.aux
            && *len + n <= self.flush_at
            && let Some(to) = slot.get_mut(*len..*len + n)
        {
            for (i, v) in to.iter_mut().enumerate() {
                *v = bit(i);
            }
            *len += n;
            return;
        }
        for i in 0..n {
            self.push_aux(bit(i));
        }
    }
}

impl ConstraintSystem<Scalar> for WitnessCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<BpVariable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        Ok(BpVariable::new_unchecked(Index::Aux(self.push_aux(f()?))))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<BpVariable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(f()?);
        Ok(BpVariable::new_unchecked(Index::Input(
            self.inputs.len() - 1,
        )))
    }

    #[inline]
    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.maybe_flush();
    }

    no_namespaces!();

    fn is_witness_generator(&self) -> bool {
        true
    }

    fn extend_inputs(&mut self, new_inputs: &[Scalar]) {
        self.inputs.extend_from_slice(new_inputs);
    }

    fn extend_aux(&mut self, new_aux: &[Scalar]) {
        self.maybe_flush();
        self.aux.extend_from_slice(new_aux);
    }

    fn allocate_empty(&mut self, aux_n: usize, inputs_n: usize) -> (&mut [Scalar], &mut [Scalar]) {
        self.maybe_flush();
        (self.aux.grow(aux_n), grow(&mut self.inputs, inputs_n))
    }

    fn allocate_empty_inputs(&mut self, n: usize) -> &mut [Scalar] {
        grow(&mut self.inputs, n)
    }

    fn allocate_empty_aux(&mut self, n: usize) -> &mut [Scalar] {
        self.maybe_flush();
        self.aux.grow(n)
    }

    fn inputs_slice(&self) -> &[Scalar] {
        &self.inputs
    }

    fn aux_slice(&self) -> &[Scalar] {
        self.aux.values()
    }
}

#[cfg(test)]
impl WitnessCs<'_> {
    /// Both systems hold the same values (native witnesses against their gadgets).
    pub(crate) fn assert_same_values(&self, gadget: &WitnessCs<'_>, what: &str) {
        assert_eq!(self.inputs, gadget.inputs, "{what}: inputs");
        let (ours, theirs) = (self.aux.values(), gadget.aux.values());
        assert_eq!(ours.len(), theirs.len(), "{what}: aux count");
        if let Some(i) = (0..ours.len()).find(|&i| ours[i] != theirs[i]) {
            panic!("{what}: aux value {i} differs");
        }
    }
}

/// `n` new zeros at the end of `v`, for a gadget to fill.
fn grow(v: &mut Vec<Scalar>, n: usize) -> &mut [Scalar] {
    let start = v.len();
    v.resize(start + n, Scalar::from(0u64));
    &mut v[start..]
}

/// Full synthesis: cuzk's system and witness for one circuit instance.
pub fn synthesize<C: Circuit<Scalar>>(circuit: C) -> Result<(R1cs, Witness), BellpepperError> {
    let mut cs = SynthesisCs::new();
    circuit.synthesize(&mut cs)?;
    cs.finish()
}

/// A circuit's constraint system, synthesized once and kept for its later proofs, with the
/// order in which witness-only synthesis completes its rows.
#[derive(Debug, Clone)]
pub struct CompiledCircuit {
    /// Shared with a prover that keeps the system too (an engine's key).
    r1cs: Arc<R1cs>,
    schedule: overlap::Schedule,
    /// The sizes of the parts of its last `witness_of_parts`, shared by its clones.
    parts_layout: parts::KeptLayout,
}

impl CompiledCircuit {
    /// Keeps `r1cs` (the system of a full synthesis of the circuit).
    pub fn new(r1cs: R1cs) -> Self {
        let schedule = overlap::Schedule::new(&r1cs);
        Self {
            r1cs: Arc::new(r1cs),
            schedule,
            parts_layout: Default::default(),
        }
    }

    /// Synthesizes `circuit` fully; returns the kept system and this instance's witness.
    pub fn compile<C: Circuit<Scalar>>(circuit: C) -> Result<(Self, Witness), BellpepperError> {
        let (r1cs, w) = synthesize(circuit)?;
        Ok((Self::new(r1cs), w))
    }

    pub fn r1cs(&self) -> &R1cs {
        &self.r1cs
    }

    /// The system, for a prover that keeps it beside this (an engine's key), without a copy.
    pub fn shared_r1cs(&self) -> Arc<R1cs> {
        self.r1cs.clone()
    }

    /// The witness of another instance of the same circuit, by witness-only synthesis. The
    /// constraints are not checked here: the prover's evaluation of A·z, B·z, C·z checks every
    /// row and names the first one that fails.
    pub fn witness<C: Circuit<Scalar>>(&self, circuit: C) -> Result<Witness, BellpepperError> {
        let inputs = self.r1cs.num_public();
        let aux = self.r1cs.num_private();
        let mut cs = WitnessCs::with_capacity(inputs, aux);
        circuit.synthesize(&mut cs)?;
        self.check_shape(&cs)?;
        let z: Vec<Fr> = cs
            .inputs
            .iter()
            .chain(cs.aux.values())
            .map(fr_from_scalar)
            .collect();
        Ok(Witness::from_assignment(inputs, z)?)
    }

    /// [`Self::witness`] and `R1cs::evaluate_into`'s A·z, B·z, C·z in one pass: the product
    /// runs on another thread while the circuit synthesizes, each row as soon as the aux
    /// values it reads exist (see the `overlap` module); the rows left when synthesis ends
    /// (those of the last, small block and those that read a public input) are evaluated then,
    /// in parallel. Each row costs what it costs in `evaluate_into`: what is saved is the
    /// product's time, hidden behind the synthesis when a core is free for it.
    ///
    /// The outputs are `evaluate_into`'s exactly: the first `num_constraints` entries of
    /// `a`, `b`, `c` are written, the rest left untouched. Like `evaluate_into`, an unsatisfied
    /// witness still fills them and is an error naming the first failing row
    /// ([`cuzk_groth16::WitnessError::Unsatisfied`] in [`BellpepperError::Witness`]); the witness is not
    /// returned then. When synthesis fails or the circuit's shape changed, the outputs hold
    /// partial results.
    pub fn witness_and_evaluations<C: Circuit<Scalar>>(
        &self,
        circuit: C,
        a: &mut [Fr],
        b: &mut [Fr],
        c: &mut [Fr],
    ) -> Result<Witness, BellpepperError> {
        let aux = self.r1cs.num_private();
        self.witness_and_evaluations_in_blocks(circuit, aux_block(aux), [a, b, c])
    }

    fn witness_and_evaluations_in_blocks<C: Circuit<Scalar>>(
        &self,
        circuit: C,
        block: usize,
        [a, b, c]: [&mut [Fr]; 3],
    ) -> Result<Witness, BellpepperError> {
        let r1cs = &self.r1cs;
        let [a, b, c] = r1cs.row_outputs([a, b, c])?;
        let rows = cuzk_groth16::RowEvaluator::new(r1cs);
        let schedule = &self.schedule;
        let (inputs, aux) = (r1cs.num_public(), r1cs.num_private());
        let stop = AtomicBool::new(false);

        let (synthesized, cs, sent, evaluator) = std::thread::scope(|scope| {
            let (blocks_tx, blocks_rx) = mpsc::channel::<Vec<Fr>>();
            let (spare_tx, spare_rx) = mpsc::channel();
            let (ea, eb, ec) = (&mut *a, &mut *b, &mut *c);
            let rows = &rows;
            let stop = &stop;
            let evaluator = scope.spawn(move || {
                let mut e = overlap::Evaluator::new(r1cs);
                for values in blocks_rx {
                    e.append(&values);
                    let _ = spare_tx.send(values);
                    e.evaluate_ready(rows, schedule, [&mut *ea, &mut *eb, &mut *ec], stop);
                }
                e
            });
            // Owned here, so that a panicking circuit drops the sender and the evaluator ends.
            let mut cs = WitnessCs::with_capacity(inputs, aux);
            let stream = AuxStream {
                blocks: blocks_tx,
                spare: spare_rx,
                sent: 0,
                block,
                total: aux,
            };
            cs.flush_at = stream.next_block();
            cs.stream = Some(stream);
            let synthesized = circuit.synthesize(&mut cs);
            // The values not sent yet are the last block's: they go to `finish` below, which
            // evaluates the rows left in parallel. Dropping the stream ends the evaluator.
            stop.store(true, Ordering::Relaxed);
            let sent = cs.stream.take().map_or(0, |s| s.sent);
            let evaluator = evaluator
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (synthesized, cs, sent, evaluator)
        });
        synthesized?;
        self.check_shape(&cs)?;
        let (z, first_bad) = evaluator.finish(
            cs.aux.values()[sent..].iter().map(fr_from_scalar),
            cs.inputs.iter().map(fr_from_scalar),
            &rows,
            schedule,
            [a, b, c],
        );
        overlap::check(first_bad)?;
        Ok(Witness::from_assignment(inputs, z)?)
    }

    fn check_shape(&self, cs: &WitnessCs<'_>) -> Result<(), BellpepperError> {
        let (inputs, aux) = (self.r1cs.num_public(), self.r1cs.num_private());
        if cs.inputs.len() != inputs + 1 || cs.aux.len() != aux {
            return Err(BellpepperError::ShapeChanged {
                inputs,
                aux,
                found_inputs: cs.inputs.len() - 1,
                found_aux: cs.aux.len(),
            });
        }
        Ok(())
    }
}

/// The smallest block [`AuxStream::next_block`] shrinks to.
const MIN_TAIL_BLOCK: usize = 1 << 8;

/// Aux values per block handed to the evaluator: about 16 blocks a synthesis, and a few
/// smaller ones at the end. Each hand-off can wake the evaluator's thread, which costs the
/// synthesizing thread ~10 µs on a VM (64 blocks cost it 1 ms at 2^17 rows).
fn aux_block(aux: usize) -> usize {
    (aux / 16).clamp(1 << 12, 1 << 16)
}

#[cfg(test)]
mod tests;
