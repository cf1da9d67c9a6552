//! Exercises the cargo rules: a library function, its unit test, a PyO3 module.
use pyo3::prelude::*;

/// Sum of 1..=n, computed so that overflow is impossible for the u32 inputs used.
pub fn triangle(n: u32) -> u64 {
    let n = u64::from(n);
    n * (n + 1) / 2
}

#[pyfunction]
#[pyo3(name = "triangle")]
fn py_triangle(n: u32) -> u64 {
    triangle(n)
}

#[pymodule]
fn _example(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(py_triangle, m)?)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn triangle_of_four() {
        assert_eq!(super::triangle(4), 10);
    }
}
