//! The control plane's clients: tutorials-style runtime JSON files and `simple_switch_CLI`
//! commands, which fill a running program's tables, groups, sessions and registers.

pub mod cli_commands;
pub mod runtime_json;
