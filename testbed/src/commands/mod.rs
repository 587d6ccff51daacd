//! One module per subcommand (or family of them): what `intlab ...` does once its arguments
//! are parsed.

pub(crate) mod clean;
pub(crate) mod compare;
pub(crate) mod doctor;
pub(crate) mod graph;
pub(crate) mod import;
pub(crate) mod inspect;
pub(crate) mod lab;
pub(crate) mod link;
pub(crate) mod p4;
pub(crate) mod plan;
pub(crate) mod rlcc;
pub(crate) mod run;
pub(crate) mod sensitivity;
pub(crate) mod signals;
pub(crate) mod site;
pub(crate) mod sweep;
pub(crate) mod switch;
