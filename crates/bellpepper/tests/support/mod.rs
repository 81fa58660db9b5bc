pub mod sha256_flow;
