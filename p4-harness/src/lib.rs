//! P4 programs outside a lab: p4c's STF tests run in memory or through the switch on veth
//! ([`offline`], [`on_switch`]), and a program run over a pcap file.

#![forbid(unsafe_code)]

pub mod offline;
pub mod on_switch;
