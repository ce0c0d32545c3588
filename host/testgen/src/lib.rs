//! Test generators of the CVM engine, for tests and fuzzing only (a dev-dependency, never linked
//! by a node): random valid graphs over every operator ([`graphgen`]) and the checks behind the
//! fuzz targets in `host/fuzz` ([`robustness`]).

pub mod graphgen;
pub mod robustness;
