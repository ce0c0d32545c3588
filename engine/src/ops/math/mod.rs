//! Elementwise arithmetic: the elementwise and broadcast operators of spec 001 on integers of a
//! known precision, and the CINN unary, binary and comparison primitives of spec 002 in Q-format
//! fixed point ([`crate::ops::fixed_point`]).

pub mod broadcast;
pub mod cinn_binary;
pub mod cinn_unary;
pub mod compare;
pub mod elemwise;
