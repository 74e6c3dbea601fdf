//! Ordinary least squares for the cost model `mCPU ≈ a·(msg/s) + b·(lanes) + c`.
//! Pure: no I/O. Columns are scaled to unit maximum before solving the normal
//! equations (Gaussian elimination with partial pivoting), so rates in the tens of
//! thousands and lanes in the hundreds do not ruin the conditioning.

/// A fitted linear model `y ≈ Σ coef[i]·x[i] + intercept`.
#[derive(Debug, Clone, PartialEq)]
pub struct Fit {
    pub coefficients: Vec<f64>,
    pub intercept: f64,
    /// Coefficient of determination; 1 for a perfect fit. `NaN`-free: 1 when y is constant and fitted exactly.
    pub r_squared: f64,
    /// y − ŷ per observation, in input order.
    pub residuals: Vec<f64>,
    /// Root mean square of the residuals.
    pub rmse: f64,
    pub n: usize,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    #[error("{n} observations for {k} parameters: need at least {need} cells")]
    TooFew { n: usize, k: usize, need: usize },
    #[error("the predictors are collinear (e.g. every cell has the same lanes, or lanes grow with the rate): vary {what} independently")]
    Singular { what: String },
    #[error("observation {index} has a non-finite value")]
    NotFinite { index: usize },
}

/// Fit `y ≈ X·β + c`. `x[i]` is the predictor row of observation `i`; `names`
/// name the predictors (for the error message). Needs n > k + 1 so the fit has at
/// least one degree of freedom left to judge it by.
pub fn least_squares(x: &[Vec<f64>], y: &[f64], names: &[&str]) -> Result<Fit, FitError> {
    let n = y.len();
    let k = names.len();
    let p = k + 1;
    if n < p + 1 || x.len() != n {
        return Err(FitError::TooFew {
            n,
            k: p,
            need: p + 1,
        });
    }
    for (i, row) in x.iter().enumerate() {
        if row.len() != k || row.iter().chain([&y[i]]).any(|v| !v.is_finite()) {
            return Err(FitError::NotFinite { index: i });
        }
    }
    // Design matrix with an intercept column, scaled column by column.
    let mut scale = vec![1.0; p];
    for (j, s) in scale.iter_mut().enumerate().take(k) {
        let m = x.iter().map(|r| r[j].abs()).fold(0.0, f64::max);
        *s = if m > 0.0 { m } else { 1.0 };
    }
    let design = |i: usize, j: usize| if j == k { 1.0 } else { x[i][j] / scale[j] };
    // Normal equations A·β = b with A = DᵀD, b = Dᵀy.
    let mut a = vec![vec![0.0; p + 1]; p];
    for (r, row) in a.iter_mut().enumerate() {
        for (c, cell) in row.iter_mut().enumerate().take(p) {
            *cell = (0..n).map(|i| design(i, r) * design(i, c)).sum();
        }
        row[p] = (0..n).map(|i| design(i, r) * y[i]).sum();
    }
    let diag_max = (0..p).map(|i| a[i][i]).fold(0.0, f64::max);
    for col in 0..p {
        let piv = (col..p)
            .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
            .unwrap_or(col);
        if a[piv][col].abs() <= 1e-9 * diag_max.max(1.0) {
            return Err(FitError::Singular {
                what: names.join(" and "),
            });
        }
        a.swap(col, piv);
        let pivot_row = a[col].clone();
        for (r, row) in a.iter_mut().enumerate() {
            if r != col {
                let f = row[col] / pivot_row[col];
                for (cell, pv) in row.iter_mut().zip(&pivot_row).skip(col) {
                    *cell -= f * pv;
                }
            }
        }
    }
    let beta: Vec<f64> = (0..p).map(|i| a[i][p] / a[i][i] / scale[i]).collect();
    let predict = |i: usize| (0..k).map(|j| beta[j] * x[i][j]).sum::<f64>() + beta[k];
    let residuals: Vec<f64> = (0..n).map(|i| y[i] - predict(i)).collect();
    let mean = y.iter().sum::<f64>() / n as f64;
    let ss_tot: f64 = y.iter().map(|v| (v - mean).powi(2)).sum();
    let ss_res: f64 = residuals.iter().map(|r| r * r).sum();
    let r_squared = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else if ss_res <= 1e-12 {
        1.0
    } else {
        0.0
    };
    Ok(Fit {
        coefficients: beta[..k].to_vec(),
        intercept: beta[k],
        r_squared,
        rmse: (ss_res / n as f64).sqrt(),
        residuals,
        n,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_exact_coefficients() {
        // y = 0.05·rate + 0.002·lanes + 120
        let pts = [
            (1000.0, 100.0),
            (12000.0, 100.0),
            (6000.0, 20000.0),
            (36000.0, 4000.0),
            (24000.0, 1000.0),
        ];
        let x: Vec<Vec<f64>> = pts.iter().map(|(r, l)| vec![*r, *l]).collect();
        let y: Vec<f64> = pts
            .iter()
            .map(|(r, l)| 0.05 * r + 0.002 * l + 120.0)
            .collect();
        let f = least_squares(&x, &y, &["rate", "lanes"]).unwrap();
        assert!((f.coefficients[0] - 0.05).abs() < 1e-9, "{f:?}");
        assert!((f.coefficients[1] - 0.002).abs() < 1e-9, "{f:?}");
        assert!((f.intercept - 120.0).abs() < 1e-6, "{f:?}");
        assert!((f.r_squared - 1.0).abs() < 1e-12);
        assert!(f.residuals.iter().all(|r| r.abs() < 1e-6));
    }

    #[test]
    fn refuses_too_few_and_collinear() {
        let x = vec![vec![1.0, 1.0], vec![2.0, 1.0], vec![3.0, 1.0]];
        assert!(matches!(
            least_squares(&x, &[1.0, 2.0, 3.0], &["rate", "lanes"]),
            Err(FitError::TooFew { .. })
        ));
        let x = vec![
            vec![1.0, 100.0],
            vec![2.0, 100.0],
            vec![3.0, 100.0],
            vec![4.0, 100.0],
        ];
        assert!(matches!(
            least_squares(&x, &[1.0, 2.0, 3.0, 4.0], &["rate", "lanes"]),
            Err(FitError::Singular { .. })
        ));
    }

    #[test]
    fn noisy_fit_reports_imperfect_r_squared() {
        let x: Vec<Vec<f64>> = (0..8)
            .map(|i| vec![i as f64 * 1000.0, (i % 3) as f64 * 500.0])
            .collect();
        let noise = [3.0, -2.0, 4.0, -5.0, 1.0, 2.0, -3.0, 0.5];
        let y: Vec<f64> = x
            .iter()
            .zip(noise)
            .map(|(r, e)| 0.1 * r[0] + 0.01 * r[1] + 50.0 + e)
            .collect();
        let f = least_squares(&x, &y, &["rate", "lanes"]).unwrap();
        assert!(f.r_squared < 1.0 && f.r_squared > 0.99, "{}", f.r_squared);
        assert!((f.coefficients[0] - 0.1).abs() < 0.01);
    }
}
