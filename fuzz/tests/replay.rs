//! Replays the committed corpus and every crash found so far through each target's harness
//! (the same function the fuzzer calls): none may panic, and each target's seeds, made from
//! valid files, must still be accepted.

use cuzk_fuzz::{Outcome, TARGETS, corpus_dir, files_in, regressions_dir};

// The fuzzer's allocation cap: an input that allocates what it did not pay for aborts here too.
#[global_allocator]
static ALLOC: cuzk_fuzz::CappedAlloc = cuzk_fuzz::CappedAlloc;

#[test]
fn every_target_has_seeds_its_parser_accepts() {
    for t in TARGETS {
        let seeds: Vec<_> = files_in(&corpus_dir(t.name))
            .unwrap()
            .into_iter()
            .filter(|p| {
                p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("seed-")
            })
            .collect();
        assert!(!seeds.is_empty(), "{}: no seed in its corpus", t.name);
        for p in seeds {
            let data = std::fs::read(&p).unwrap();
            assert_eq!(
                (t.run)(&data),
                Outcome::Accepted,
                "{}: seed {} is rejected",
                t.name,
                p.display()
            );
        }
    }
}

#[test]
fn the_rejected_seeds_are_rejected() {
    let mut n = 0;
    for t in TARGETS {
        for p in files_in(&corpus_dir(t.name)).unwrap() {
            if p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("rejected-")
            {
                let data = std::fs::read(&p).unwrap();
                assert_eq!((t.run)(&data), Outcome::Rejected, "{}", p.display());
                n += 1;
            }
        }
    }
    assert!(n > 0, "no rejected-* seed");
}

#[test]
fn the_corpus_and_every_regression_replay_without_a_panic() {
    let mut total = 0;
    for t in TARGETS {
        let mut files = files_in(&corpus_dir(t.name)).unwrap();
        files.extend(files_in(&regressions_dir(t.name)).unwrap());
        for p in &files {
            let data = std::fs::read(p).unwrap();
            // A panic here fails the test and names the file through the panic message.
            eprintln!("{}: {}", t.name, p.display());
            (t.run)(&data);
        }
        total += files.len();
    }
    eprintln!("replayed {total} inputs");
    assert!(total >= TARGETS.len());
}

#[test]
fn the_corpus_stays_small() {
    let mut bytes = 0;
    for t in TARGETS {
        for p in files_in(&corpus_dir(t.name)).unwrap() {
            bytes += std::fs::metadata(&p).unwrap().len();
        }
    }
    assert!(
        bytes < 2 << 20,
        "the corpus holds {bytes} bytes (keep it under 2 MiB)"
    );
}
