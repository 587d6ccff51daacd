//! Text files damaged by line edits and byte changes, through a reader that must name the file
//! in every refusal.

use proptest::prelude::*;
use std::time::Instant;

use crate::mutation::*;
use crate::scenarios::{Edit, edit, edited};
use crate::{Report, Tally, finish, runner};

/// Byte damage or line edits of a text.
pub fn damaged(text: &str, edits: &[Edit], bytes: &[Mutation]) -> String {
    let t = edited(text, edits);
    String::from_utf8_lossy(&apply(t.into_bytes(), bytes)).into_owned()
}

/// Which seed, and what is done to it.
pub fn text_strategy(seeds: usize) -> impl Strategy<Value = (usize, Vec<Edit>, Vec<Mutation>)> {
    (
        0..seeds,
        proptest::collection::vec(edit(), 0..3),
        proptest::collection::vec(mutation(), 0..3),
    )
}

/// Runs a target over damaged `seeds`, each case given to `parse` as the text of `file`: a
/// refusal must name the file; what it accepted is tallied as `accepted`.
pub fn fuzz_texts(
    title: &'static str,
    cases: u32,
    seeds: &[String],
    file: &str,
    parse: impl Fn(&str) -> Result<(), String>,
    accepted: &'static str,
) -> Report {
    let tally = Tally::default();
    let started = Instant::now();
    let result = runner(cases).run(&text_strategy(seeds.len()), |(seed, edits, bytes)| {
        let text = damaged(&seeds[seed], &edits, &bytes);
        match parse(&text) {
            Ok(()) => tally.count(accepted),
            Err(e) => {
                prop_assert!(e.contains(file), "an error names the file: {}", e);
                tally.count("refused naming the file");
            }
        }
        Ok(())
    });
    finish(title, cases, started, tally, result)
}
