//! Progress for long client work: a bar or spinner on a terminal (stderr), plain lines on
//! stdout otherwise, so logs of a non-interactive run keep every step.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A spinner with the elapsed time, for one long step (making a key, loading one).
pub(crate) fn spinner(what: impl Into<String>) -> ProgressBar {
    let what = what.into();
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} {elapsed}").expect("a valid template"),
    );
    pb.set_message(what.clone());
    pb.enable_steady_tick(Duration::from_millis(120));
    if pb.is_hidden() {
        println!("{what} ...");
    }
    pb
}

/// A bar of `n` steps.
pub(crate) fn bar(n: u64, what: &str) -> ProgressBar {
    let pb = ProgressBar::new(n);
    pb.set_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed} (eta {eta})")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    pb.set_message(what.to_owned());
    pb
}

/// A line of output above the bar, or on stdout when no bar is drawn.
pub(crate) fn line(pb: &ProgressBar, text: String) {
    if pb.is_hidden() {
        println!("{text}");
    } else {
        pb.println(text);
    }
}

/// Ends a spinner or bar with a closing line.
pub(crate) fn done(pb: ProgressBar, text: String) {
    pb.finish_and_clear();
    println!("{text}");
}
