pub mod snarkjs_tools;
