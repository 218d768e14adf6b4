//! NumPy `.npy` files (format version 1.0): a little-endian `f32` matrix, row-major, that
//! `numpy.load` reads as an array of shape `(rows, cols)`.

use ndarray::ArrayView2;

/// The bytes of a `.npy` file holding `a` (dtype `<f4`, C order).
pub fn npy_f32(a: ArrayView2<'_, f32>) -> Vec<u8> {
    let (rows, cols) = a.dim();
    let mut header =
        format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({rows}, {cols}), }}");
    // Magic (6) + version (2) + header length (2) + header + '\n', padded to 64 bytes.
    let unpadded = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + 4 * rows * cols);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for row in a.rows() {
        for &v in row {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn header_is_aligned_and_data_follow_in_row_order() {
        let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, -0.5]];
        let b = npy_f32(a.view());
        assert_eq!(&b[..8], b"\x93NUMPY\x01\x00");
        let hlen = u16::from_le_bytes([b[8], b[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let header = std::str::from_utf8(&b[10..10 + hlen]).unwrap();
        assert!(header.contains("'shape': (2, 3)"), "{header}");
        assert!(header.contains("'<f4'") && header.ends_with('\n'));
        let data: Vec<f32> = b[10 + hlen..]
            .chunks(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(data, vec![1.0, 2.0, 3.0, 4.0, 5.0, -0.5]);
    }
}
