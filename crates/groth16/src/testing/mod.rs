//! What tests, benches and machines without a GPU prove with: demo circuits of any size and
//! share of boolean variables ([`demo`]), and [`SimBackend`], the CPU backend behind a simulated
//! device memory that an engine drives like a GPU (budgets, staging, injected failures).

pub mod demo;
mod sim;

pub use sim::SimBackend;
