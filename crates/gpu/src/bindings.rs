/* placeholder until `cargo xtask codegen` runs */
pub const CUZK_FR_LIMBS: u32 = 8;
pub const CUZK_FP_LIMBS: u32 = 12;
pub const CUZK_DEFAULT_BLOCK: u32 = 256;
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct cuzk_smoke_params {
    pub n: u32,
    pub seed: u32,
}
