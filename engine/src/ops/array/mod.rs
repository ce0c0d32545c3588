//! Data-movement operators: they rearrange, copy or select elements without arithmetic. One
//! file per operation; a file holds the CVM operator (spec 001) and its CINN counterpart
//! (spec 002), which share their shape and attribute checks.
//!
//! Output precision is the input's, except `concatenate` and `Concat` (the largest of the
//! inputs'), `cvm_lut` (the table's), `where` (the largest of its three inputs') and `Select`
//! (the larger of its two values').

pub mod concat;
pub mod gather;
pub mod repeat;
pub mod reshape;
pub mod reverse;
pub mod select;
pub mod slice;
pub mod transpose;
