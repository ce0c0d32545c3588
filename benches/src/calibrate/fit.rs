//! Fitting a table row's prices to its measurements: least squares on relative errors with a
//! lower bound on every coefficient and an optional prior value it is drawn towards, by trying
//! every subset of the terms free above its bound (a row has at most eight) and keeping the best
//! solution that respects the bounds.

/// Weight of a term's prior, against the squared relative error of one measured row: a term the
/// rows cannot pin down stays near its prior, and one they do moves.
pub const PRIOR_WEIGHT: f64 = 0.1;

/// One coefficient to fit: its lower bound, and the value it is drawn towards, if any.
#[derive(Clone, Copy, Debug)]
pub struct Term {
    /// Least value.
    pub lower: f64,
    /// Value the fit is drawn towards with [`PRIOR_WEIGHT`].
    pub prior: Option<f64>,
}

/// Coefficients θ ≥ the terms' bounds minimising Σ_i ((x_i · θ − c_i) / c_i)² over the `rows`
/// (x_i, c_i) with c_i > 0, plus [`PRIOR_WEIGHT`] · (θ_k − prior_k)² for every term with a prior;
/// `None` when no row qualifies or every system is singular.
pub fn bounded(rows: &[(Vec<f64>, f64)], terms: &[Term]) -> Option<Vec<f64>> {
    let lower: Vec<f64> = terms.iter().map(|t| t.lower).collect();
    let n = terms.len();
    // θ = lower + φ with φ ≥ 0; relative errors: row i scaled by 1 / c_i.
    let mut scaled: Vec<(Vec<f64>, f64)> = rows
        .iter()
        .filter(|(x, c)| *c > 0.0 && c.is_finite() && x.len() == n)
        .map(|(x, c)| {
            let floor: f64 = x.iter().zip(&lower).map(|(a, b)| a * b).sum();
            (x.iter().map(|v| v / c).collect(), 1.0 - floor / c)
        })
        .collect();
    if scaled.is_empty() {
        return None;
    }
    // Priors as rows: √w · φ_k = √w · (prior − lower).
    let w = PRIOR_WEIGHT.sqrt();
    for (k, term) in terms.iter().enumerate() {
        if let Some(prior) = term.prior {
            let mut x = vec![0.0; n];
            x[k] = w;
            scaled.push((x, w * (prior - term.lower)));
        }
    }
    let terms = n;
    let residual = |phi: &[f64]| -> f64 {
        scaled
            .iter()
            .map(|(x, t)| {
                let predicted: f64 = x.iter().zip(phi).map(|(a, b)| a * b).sum();
                (predicted - t) * (predicted - t)
            })
            .sum()
    };
    // Every coefficient at its bound is always a candidate.
    let mut best = (residual(&vec![0.0; terms]), vec![0.0; terms]);
    for mask in 1u32..(1 << terms) {
        let used: Vec<usize> = (0..terms).filter(|&k| mask & (1 << k) != 0).collect();
        if used.len() > scaled.len() {
            continue;
        }
        let Some(solution) = least_squares(&scaled, &used) else {
            continue;
        };
        if solution.iter().any(|&v| v < 0.0 || !v.is_finite()) {
            continue;
        }
        let mut phi = vec![0.0; terms];
        for (&k, &v) in used.iter().zip(&solution) {
            phi[k] = v;
        }
        let r = residual(&phi);
        if r < best.0 {
            best = (r, phi);
        }
    }
    Some(best.1.iter().zip(&lower).map(|(p, l)| p + l).collect())
}

/// Ordinary least squares over the columns `used`, by the normal equations and Gaussian
/// elimination with partial pivoting; `None` when the system is singular.
fn least_squares(rows: &[(Vec<f64>, f64)], used: &[usize]) -> Option<Vec<f64>> {
    let n = used.len();
    // The augmented normal matrix [XᵀX | Xᵀy].
    let mut a = vec![vec![0.0; n + 1]; n];
    for (x, y) in rows {
        for (r, &i) in used.iter().enumerate() {
            for (c, &j) in used.iter().enumerate() {
                a[r][c] += x[i] * x[j];
            }
            a[r][n] += x[i] * y;
        }
    }
    let scale = a
        .iter()
        .flat_map(|row| row[..n].iter())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    for col in 0..n {
        let pivot = (col..n).max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))?;
        if a[pivot][col].abs() <= scale * 1e-12 {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let factor = row[col] / pivot_row[col];
                for (value, &p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                    *value -= factor * p;
                }
            }
        }
    }
    Some((0..n).map(|r| a[r][n] / a[r][r]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_exact_coefficients() {
        // c = 3 + 2·u, none of the third term.
        let rows: Vec<(Vec<f64>, f64)> = [1.0, 10.0, 100.0]
            .iter()
            .map(|&u| (vec![1.0, u, u * u], 3.0 + 2.0 * u))
            .collect();
        let free = Term {
            lower: 0.0,
            prior: None,
        };
        let theta = bounded(&rows, &[free; 3]).unwrap();
        for (got, want) in theta.iter().zip([3.0, 2.0, 0.0]) {
            assert!((got - want).abs() < 1e-9, "{theta:?}");
        }
    }

    #[test]
    fn coefficients_respect_their_bounds() {
        // Falling cost with work: the unconstrained slope is negative, so the slope stays at its
        // bound and the base takes the rest.
        let rows = vec![(vec![1.0, 1.0], 10.0), (vec![1.0, 2.0], 8.0)];
        let base = Term {
            lower: 0.0,
            prior: None,
        };
        let slope = Term {
            lower: 0.5,
            prior: None,
        };
        let theta = bounded(&rows, &[base, slope]).unwrap();
        assert_eq!(theta[1], 0.5);
        assert!(theta[0] > 7.0 && theta[0] < 9.5, "{theta:?}");
        assert_eq!(bounded(&[], &[base, slope]), None);
    }

    #[test]
    fn terms_the_rows_cannot_tell_apart_stay_at_their_prior() {
        // One row, two terms: without the prior any split of 10 fits; with it the second term
        // stays near 1.
        let rows = vec![(vec![1.0, 5.0], 10.0)];
        let terms = [
            Term {
                lower: 0.0,
                prior: None,
            },
            Term {
                lower: 0.0,
                prior: Some(1.0),
            },
        ];
        let theta = bounded(&rows, &terms).unwrap();
        assert!((theta[1] - 1.0).abs() < 0.05, "{theta:?}");
        assert!((theta[0] + 5.0 * theta[1] - 10.0).abs() < 0.5, "{theta:?}");
    }
}
