//! The libFuzzer driver: `CUZK_FUZZ_TARGET=<name>` picks the target (`cargo xtask fuzz`
//! sets it and the coverage flags; run `cargo xtask fuzz --list` for the names).

#![no_main]

use std::sync::OnceLock;

#[global_allocator]
static ALLOC: cuzk_fuzz::CappedAlloc = cuzk_fuzz::CappedAlloc;

fn target() -> &'static cuzk_fuzz::Target {
    static T: OnceLock<&'static cuzk_fuzz::Target> = OnceLock::new();
    T.get_or_init(|| {
        let name = std::env::var("CUZK_FUZZ_TARGET").unwrap_or_default();
        cuzk_fuzz::target(&name).unwrap_or_else(|| {
            let names: Vec<_> = cuzk_fuzz::TARGETS.iter().map(|t| t.name).collect();
            eprintln!("CUZK_FUZZ_TARGET={name:?} is not a target; one of {names:?}");
            std::process::exit(2)
        })
    })
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    (target().run)(data);
});
