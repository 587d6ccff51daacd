//! Experiments made of several runs of the lab: controllers compared side by side under the same
//! conditions ([`compare`]), a scenario swept over a grid of parameters ([`sweep`]), and how much
//! each parameter moves a figure ([`sensitivity`]). Each run is the lab's own (`intlab_lab::run`).

#![forbid(unsafe_code)]

pub mod compare;
pub mod sensitivity;
pub mod sweep;
