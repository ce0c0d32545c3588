//! Detection post-processing: `get_valid_counts` and `non_max_suppression` (spec 001) and
//! `generate_proposals_v2` (spec 003).

pub mod nms;
pub mod proposals;
