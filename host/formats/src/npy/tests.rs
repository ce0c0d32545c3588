//! Tests of `.npy` reading and writing: hand-built files of every accepted dtype, layout and
//! header version, and the refusals.

use super::*;

/// Builds a `.npy` file by hand: magic, version, length field, header text, data.
fn npy_file(major: u8, header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.push(major);
    out.push(0);
    if major == 1 {
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// Header text in NumPy's layout (without alignment padding, which readers ignore).
fn header(descr: &str, fortran: bool, shape: &str) -> String {
    let fortran = if fortran { "True" } else { "False" };
    format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}\n")
}

fn array(shape: &[u32], data: &[i32]) -> NpyArray {
    NpyArray {
        shape: shape.to_vec(),
        data: data.to_vec(),
    }
}

fn error(bytes: &[u8]) -> Option<NpyError> {
    read_npy(bytes).err()
}

fn message(bytes: &[u8]) -> Option<String> {
    read_npy(bytes).err().map(|error| error.to_string())
}

fn le_bytes<const N: usize, T: Copy>(values: &[T], to_bytes: fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&value| to_bytes(value)).collect()
}

/// Reads the little-endian length field of a written file (2 bytes in v1, 4 in v2).
fn header_len(bytes: &[u8]) -> usize {
    match (bytes.get(6), bytes.get(8..12)) {
        (Some(1), Some(&[low, high, _, _])) => usize::from(u16::from_le_bytes([low, high])),
        (Some(2), Some(&[b0, b1, b2, b3])) => u32::from_le_bytes([b0, b1, b2, b3]) as usize,
        _ => 0,
    }
}

fn sample_arrays() -> Vec<NpyArray> {
    vec![
        array(&[], &[42]),
        array(&[], &[i32::MIN]),
        array(&[0], &[]),
        array(&[2, 0, 3], &[]),
        // A wide leading axis next to a zero one: no elements, long header digits.
        array(&[1_000_000_000, 0], &[]),
        array(&[5], &[1, -2, 3, i32::MAX, i32::MIN]),
        array(&[2, 3], &[0, 1, 2, 3, 4, 5]),
        array(&[1, 1, 1, 1], &[-7]),
        array(
            &[2, 3, 4],
            &(0..24).map(|v| v * 1000 - 5000).collect::<Vec<_>>(),
        ),
    ]
}

#[test]
fn round_trip_preserves_shape_and_data() {
    for original in sample_arrays() {
        assert_eq!(read_npy(&write_npy(&original)), Ok(original));
    }
}

#[test]
fn files_written_piece_by_piece_equal_whole_ones() {
    for original in sample_arrays() {
        let mut pieces = header_i32(&original.shape);
        for row in original.data.chunks(3) {
            write_i32_values(&mut pieces, row).unwrap_or_default();
        }
        assert_eq!(pieces, write_npy(&original));
    }
    let floats = [0.5f32, -1.25, 3.0e7, 0.0, -0.0];
    let mut pieces = header_f32(&[5]);
    for row in floats.chunks(2) {
        write_f32_values(&mut pieces, row).unwrap_or_default();
    }
    assert_eq!(pieces, write_npy_f32(&[5], &floats));
}

#[test]
fn written_files_are_aligned_version_1_with_newline_terminated_header() {
    for original in sample_arrays() {
        let bytes = write_npy(&original);
        assert_eq!(bytes.get(..8), Some(&b"\x93NUMPY\x01\x00"[..]));
        let data_start = 10 + header_len(&bytes);
        assert_eq!(
            data_start % 64,
            0,
            "data of {original:?} is not 64-byte aligned"
        );
        assert_eq!(bytes.get(data_start - 1), Some(&b'\n'));
        assert_eq!(bytes.len(), data_start + 4 * original.data.len());
    }
}

#[test]
fn written_bytes_match_numpy_save() {
    // The exact output of `np.save(f, np.arange(6, dtype='<i4').reshape(2, 3))` with
    // NumPy 2.4: header text, 21-digit growth room for axis 0, padding to 128 bytes.
    let text = "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }";
    let mut expected = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
    expected.extend_from_slice(text.as_bytes());
    expected.resize(127, b' ');
    expected.push(b'\n');
    expected.extend_from_slice(&le_bytes(&[0i32, 1, 2, 3, 4, 5], i32::to_le_bytes));
    assert_eq!(write_npy(&array(&[2, 3], &[0, 1, 2, 3, 4, 5])), expected);

    // `np.save(f, np.array(7, dtype='<i4'))`: a scalar has no axis to leave room for.
    let text = "{'descr': '<i4', 'fortran_order': False, 'shape': (), }";
    let mut expected = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
    expected.extend_from_slice(text.as_bytes());
    expected.resize(127, b' ');
    expected.push(b'\n');
    expected.extend_from_slice(&7i32.to_le_bytes());
    assert_eq!(write_npy(&array(&[], &[7])), expected);

    // `np.save(f, np.zeros((0,), dtype='<i4'))`: 128 bytes, all header.
    let text = "{'descr': '<i4', 'fortran_order': False, 'shape': (0,), }";
    let mut expected = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
    expected.extend_from_slice(text.as_bytes());
    expected.resize(127, b' ');
    expected.push(b'\n');
    assert_eq!(write_npy(&array(&[0], &[])), expected);
}

#[test]
fn huge_header_falls_back_to_version_2() {
    let original = array(&vec![1; 30_000], &[9]);
    let bytes = write_npy(&original);
    assert_eq!(bytes.get(6), Some(&2));
    assert_eq!((12 + header_len(&bytes)) % 64, 0);
    assert_eq!(read_npy(&bytes), Ok(original));
}

#[test]
fn reads_every_integer_dtype() {
    let cases: &[(&str, Vec<u8>, [i32; 3])] = &[
        ("|i1", vec![0xfe, 0x00, 0x01], [-2, 0, 1]),
        ("<i1", vec![0xfe, 0x00, 0x01], [-2, 0, 1]),
        ("=i1", vec![0xfe, 0x00, 0x01], [-2, 0, 1]),
        ("|u1", vec![0xff, 0x00, 0x02], [255, 0, 2]),
        (">u1", vec![0xff, 0x00, 0x02], [255, 0, 2]),
        (
            "<i2",
            vec![0xfe, 0xff, 0x00, 0x00, 0x00, 0x01],
            [-2, 0, 256],
        ),
        (
            ">i2",
            vec![0xff, 0xfe, 0x00, 0x00, 0x01, 0x00],
            [-2, 0, 256],
        ),
        (
            "=i2",
            vec![0xfe, 0xff, 0x00, 0x00, 0x00, 0x01],
            [-2, 0, 256],
        ),
        (
            "<u2",
            vec![0xff, 0xff, 0x00, 0x00, 0x34, 0x12],
            [65535, 0, 0x1234],
        ),
        (
            ">u2",
            vec![0xff, 0xff, 0x00, 0x00, 0x12, 0x34],
            [65535, 0, 0x1234],
        ),
        (
            "<i4",
            le_bytes(&[i32::MIN, 0, i32::MAX], i32::to_le_bytes),
            [i32::MIN, 0, i32::MAX],
        ),
        (
            ">i4",
            le_bytes(&[i32::MIN, -1, 0x0102_0304], i32::to_be_bytes),
            [i32::MIN, -1, 0x0102_0304],
        ),
        ("=i4", le_bytes(&[-5, 6, 7], i32::to_le_bytes), [-5, 6, 7]),
        (
            "<u4",
            le_bytes(&[0u32, 7, 0x7fff_ffff], u32::to_le_bytes),
            [0, 7, i32::MAX],
        ),
        (
            ">u4",
            le_bytes(&[0u32, 7, 0x7fff_ffff], u32::to_be_bytes),
            [0, 7, i32::MAX],
        ),
        (
            "<i8",
            le_bytes(&[-2_147_483_648i64, -1, 2_147_483_647], i64::to_le_bytes),
            [i32::MIN, -1, i32::MAX],
        ),
        (
            ">i8",
            le_bytes(&[-2_147_483_648i64, -1, 300], i64::to_be_bytes),
            [i32::MIN, -1, 300],
        ),
        ("<u8", le_bytes(&[0u64, 1, 2], u64::to_le_bytes), [0, 1, 2]),
        (
            ">u8",
            le_bytes(&[0u64, 1, 0x7fff_ffff], u64::to_be_bytes),
            [0, 1, i32::MAX],
        ),
        ("|b1", vec![1, 0, 1], [1, 0, 1]),
        // NumPy reads any non-zero byte as True.
        ("|b1", vec![0, 0x80, 0xff], [0, 1, 1]),
    ];
    for (descr, data, expected) in cases {
        let bytes = npy_file(1, &header(descr, false, "(3,)"), data);
        assert_eq!(read_npy(&bytes), Ok(array(&[3], expected)), "dtype {descr}");
    }
}

#[test]
fn reads_versions_2_and_3() {
    let data = le_bytes(&[5i32, -6], i32::to_le_bytes);
    for major in [2, 3] {
        let bytes = npy_file(major, &header("<i4", false, "(2,)"), &data);
        assert_eq!(read_npy(&bytes), Ok(array(&[2], &[5, -6])));
    }
}

#[test]
fn fortran_order_is_reordered_to_c_order() {
    // The 2x3 matrix [[0, 1, 2], [3, 4, 5]] stored column by column, big-endian.
    let data = le_bytes(&[0i16, 3, 1, 4, 2, 5], i16::to_be_bytes);
    let bytes = npy_file(1, &header(">i2", true, "(2, 3)"), &data);
    assert_eq!(read_npy(&bytes), Ok(array(&[2, 3], &[0, 1, 2, 3, 4, 5])));

    // 2x3x4: the element at (i, j, k) has C index i*12 + j*4 + k and Fortran position
    // i + 2*j + 6*k; store each C index at its Fortran position.
    let mut fortran = [0i32; 24];
    for i in 0..2 {
        for j in 0..3 {
            for k in 0..4 {
                fortran[i + 2 * j + 6 * k] = (i * 12 + j * 4 + k) as i32;
            }
        }
    }
    let data = le_bytes(&fortran, i32::to_le_bytes);
    let bytes = npy_file(1, &header("<i4", true, "(2, 3, 4)"), &data);
    assert_eq!(
        read_npy(&bytes),
        Ok(array(&[2, 3, 4], &(0..24).collect::<Vec<_>>()))
    );

    // 1-D, scalar and zero-size arrays are the same in either order.
    let bytes = npy_file(1, &header("<i4", true, "(3,)"), &data[..12]);
    assert_eq!(read_npy(&bytes), Ok(array(&[3], &[0, 12, 4])));
    let bytes = npy_file(1, &header("|u1", true, "()"), &[200]);
    assert_eq!(read_npy(&bytes), Ok(array(&[], &[200])));
    let bytes = npy_file(1, &header("<i8", true, "(3, 0)"), &[]);
    assert_eq!(read_npy(&bytes), Ok(array(&[3, 0], &[])));
}

#[test]
fn fortran_order_out_of_range_reports_c_index() {
    // [[0, BIG], [2, 3]] in Fortran order is 0, 2, BIG, 3: file position 2, C index 1.
    let data = le_bytes(&[0i64, 2, 1 << 40, 3], i64::to_le_bytes);
    let bytes = npy_file(1, &header("<i8", true, "(2, 2)"), &data);
    assert_eq!(
        message(&bytes).as_deref(),
        Some("value 1099511627776 at flat index 1 does not fit in int32")
    );
}

#[test]
fn scalar_and_zero_size_fixtures() {
    let bytes = npy_file(1, &header("<i4", false, "()"), &(-9i32).to_le_bytes());
    assert_eq!(read_npy(&bytes), Ok(array(&[], &[-9])));
    let bytes = npy_file(1, &header("<i4", false, "(0,)"), &[]);
    assert_eq!(read_npy(&bytes), Ok(array(&[0], &[])));
    // A scalar holds exactly one item.
    let bytes = npy_file(1, &header("<i4", false, "()"), &[]);
    assert_eq!(
        error(&bytes),
        Some(NpyError::DataTooShort {
            expected: 4,
            actual: 0
        })
    );
}

#[test]
fn every_truncation_is_an_error() {
    let mut files: Vec<Vec<u8>> = sample_arrays().iter().map(write_npy).collect();
    let data = le_bytes(&[0i64, 1, 2, 3, 4, 5], i64::to_be_bytes);
    files.push(npy_file(2, &header(">i8", true, "(3, 2)"), &data));
    files.push(npy_file(3, &header("|b1", false, "(2,)"), &[1, 0]));
    for file in &files {
        assert!(read_npy(file).is_ok());
        for len in 0..file.len() {
            let prefix = file.get(..len).unwrap_or_default();
            assert!(
                read_npy(prefix).is_err(),
                "prefix of {len} bytes was accepted"
            );
        }
    }
}

#[test]
fn truncation_errors_name_the_part() {
    let truncated = |part, needed, available| {
        Some(NpyError::Truncated {
            part,
            needed,
            available,
        })
    };
    assert_eq!(error(b""), truncated("magic string", 6, 0));
    assert_eq!(error(b"\x93NUM"), truncated("magic string", 6, 4));
    assert_eq!(error(b"\x93NUMPY\x01"), truncated("format version", 2, 1));
    assert_eq!(
        error(b"\x93NUMPY\x02\x00\x10\x00"),
        truncated("header length field", 4, 2)
    );
    // Header lengths that run past the end of the file.
    assert_eq!(
        error(b"\x93NUMPY\x01\x00\xff\xff{'descr'"),
        truncated("header", 65535, 8)
    );
    assert_eq!(
        error(b"\x93NUMPY\x03\x00\xff\xff\xff\xff{"),
        truncated("header", u64::from(u32::MAX), 1)
    );
    assert_eq!(
        message(b"\x93NUMPY\x01\x00\xff\xff{").as_deref(),
        Some("file is truncated: the header needs 65535 bytes but only 1 are present")
    );
}

#[test]
fn bad_magic_and_version() {
    assert_eq!(error(b"PK\x03\x04"), Some(NpyError::BadMagic));
    assert_eq!(error(b"\x93NUMPx\x01\x00"), Some(NpyError::BadMagic));
    let valid = write_npy(&array(&[1], &[1]));
    for (major, minor) in [(4, 0), (0, 0), (1, 1), (2, 1)] {
        let mut bytes = valid.clone();
        bytes.splice(6..8, [major, minor]);
        assert_eq!(
            error(&bytes),
            Some(NpyError::UnsupportedVersion { major, minor })
        );
    }
}

#[test]
fn out_of_range_values_are_reported_with_index() {
    let data = le_bytes(&[0i64, 1 << 31, 0, 0], i64::to_le_bytes);
    let bytes = npy_file(1, &header("<i8", false, "(4,)"), &data);
    assert_eq!(
        error(&bytes),
        Some(NpyError::ValueOutOfRange {
            index: 1,
            value: 1 << 31
        })
    );

    let data = le_bytes(&[0i64, 0, -(1 << 31) - 1], i64::to_be_bytes);
    let bytes = npy_file(1, &header(">i8", false, "(3,)"), &data);
    assert_eq!(
        message(&bytes).as_deref(),
        Some("value -2147483649 at flat index 2 does not fit in int32")
    );

    let data = i64::MIN.to_le_bytes();
    let bytes = npy_file(1, &header("<i8", false, "()"), &data);
    let value = i128::from(i64::MIN);
    assert_eq!(
        error(&bytes),
        Some(NpyError::ValueOutOfRange { index: 0, value })
    );

    let data = le_bytes(&[1u32, 1, 1, 1, 1, 3_000_000_000], u32::to_le_bytes);
    let bytes = npy_file(1, &header("<u4", false, "(2, 3)"), &data);
    assert_eq!(
        message(&bytes).as_deref(),
        Some("value 3000000000 at flat index 5 does not fit in int32")
    );

    let data = u64::MAX.to_be_bytes();
    let bytes = npy_file(1, &header(">u8", false, "(1,)"), &data);
    let value = i128::from(u64::MAX);
    assert_eq!(
        error(&bytes),
        Some(NpyError::ValueOutOfRange { index: 0, value })
    );

    // 2^31 is one past i32::MAX.
    let bytes = npy_file(
        1,
        &header(">u4", false, "(1,)"),
        &0x8000_0000u32.to_be_bytes(),
    );
    assert_eq!(
        error(&bytes),
        Some(NpyError::ValueOutOfRange {
            index: 0,
            value: 1 << 31
        })
    );
}

#[test]
fn non_integer_dtypes_are_rejected_by_name() {
    let bytes = npy_file(1, &header("<f4", false, "(1,)"), &[0; 4]);
    assert_eq!(
        message(&bytes).as_deref(),
        Some("dtype '<f4' is not an integer type; inputs must be integer tensors")
    );
    for descr in [
        "<f8", ">f2", "<c16", "|S5", "<U3", "|O", "<M8[ns]", "<m8[s]", "|V8", "",
    ] {
        let bytes = npy_file(1, &header(descr, false, "(1,)"), &[0; 16]);
        assert_eq!(
            error(&bytes),
            Some(NpyError::NotIntegerDtype(descr.to_owned()))
        );
    }
    let structured = "{'descr': [('a', '<i4'), ('b', '<f8')], 'fortran_order': False, \
                      'shape': (1,), }";
    assert_eq!(
        message(&npy_file(1, structured, &[0; 12])).as_deref(),
        Some(
            "structured dtype [('a', '<i4'), ('b', '<f8')] is not supported; \
             inputs must be plain integer tensors"
        )
    );
    let subarray = "{'descr': ('<i4', (2,)), 'fortran_order': False, 'shape': (1,)}";
    assert!(matches!(
        error(&npy_file(1, subarray, &[0; 8])),
        Some(NpyError::StructuredDtype(_))
    ));
}

#[test]
fn malformed_integer_dtypes_are_rejected() {
    for descr in ["|i4", "|u8", "<i3", "<i16", "<b2", "i4", "<i", "<u4x"] {
        let bytes = npy_file(1, &header(descr, false, "(1,)"), &[0; 4]);
        assert!(
            matches!(error(&bytes), Some(NpyError::UnsupportedDtype { .. })),
            "{descr} was not rejected as unsupported"
        );
    }
}

#[test]
fn header_dict_variants_are_accepted() {
    let data = le_bytes(&[1i32, 2, 3, 4, 5, 6], i32::to_le_bytes);
    let expected = Ok(array(&[2, 3], &[1, 2, 3, 4, 5, 6]));
    let variants = [
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3)}",
        "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2, 3)}",
        "{'shape': (2, 3), 'descr': \"<i4\", 'fortran_order': False}",
        "{'fortran_order':False,'shape':(2,3),'descr':'<i4',}",
        "  {  'descr'  :  '<i4'  ,\n\t'fortran_order' : False ,\r\n 'shape' : ( 2 , 3 , ) , }  \n",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }          \n",
        // Parentheses around a single value only group it, as in Python.
        "{'descr': '<i4', 'fortran_order': False, 'shape': ((2), 3)}",
    ];
    for variant in variants {
        assert_eq!(
            read_npy(&npy_file(1, variant, &data)),
            expected,
            "{variant:?}"
        );
    }
    // Python 2's long suffix, which NumPy accepts in version 1.0 and 2.0 files only.
    let python2 = "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L), }";
    assert_eq!(read_npy(&npy_file(1, python2, &data)), expected);
    assert_eq!(read_npy(&npy_file(2, python2, &data)), expected);
    assert!(matches!(
        error(&npy_file(3, python2, &data)),
        Some(NpyError::HeaderSyntax { .. })
    ));
}

#[test]
fn malformed_headers_are_rejected() {
    let syntax_errors = [
        "",
        "   ",
        "'descr': '<i4'",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)",
        "{'descr': '<i4' 'fortran_order': False, 'shape': (2,)}",
        "{'descr' '<i4', 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)}}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)} x",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2,),,}",
        "{,}",
        "{descr: '<i4', 'fortran_order': False, 'shape': (2,)}",
        "{'descr: '<i4', 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<i4\", 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<\\x69', 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<i4\n', 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<i4', 'fortran_order': false, 'shape': (2,)}",
        "{'descr': '<i4', 'fortran_order': None, 'shape': (2,)}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2,,)}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (,)}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (0x2,)}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (02,)}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (1_0,)}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2.0,)}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (+2,)}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3]}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)\0}",
    ];
    for text in syntax_errors {
        let result = error(&npy_file(1, text, &[0; 8]));
        assert!(
            matches!(result, Some(NpyError::HeaderSyntax { .. })),
            "{text:?}: {result:?}"
        );
    }
}

#[test]
fn header_key_and_value_errors() {
    let file = |text: &str| npy_file(1, text, &[0; 8]);
    assert_eq!(
        error(&file("{'descr': '<i4', 'shape': (2,)}")),
        Some(NpyError::MissingKey("fortran_order"))
    );
    assert_eq!(error(&file("{}")), Some(NpyError::MissingKey("descr")));
    assert_eq!(
        error(&file("{'descr': '<i4', 'fortran_order': False}")),
        Some(NpyError::MissingKey("shape"))
    );
    assert_eq!(
        error(&file(
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), 'x': 1}"
        )),
        Some(NpyError::UnknownKey("x".to_owned()))
    );
    assert_eq!(
        error(&file(
            "{'descr': '<i4', 'descr': '<i4', 'fortran_order': False, 'shape': (2,)}"
        )),
        Some(NpyError::DuplicateKey("descr".to_owned()))
    );
    let invalid = [
        (
            "{'descr': '<i4', 'fortran_order': 0, 'shape': (2,)}",
            "fortran_order",
        ),
        (
            "{'descr': '<i4', 'fortran_order': 'False', 'shape': (2,)}",
            "fortran_order",
        ),
        (
            "{'descr': 4, 'fortran_order': False, 'shape': (2,)}",
            "descr",
        ),
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': 2}",
            "shape",
        ),
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2)}",
            "shape",
        ),
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': [2]}",
            "shape",
        ),
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': ('2',)}",
            "shape",
        ),
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': ((2,),)}",
            "shape",
        ),
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': (-2,)}",
            "shape",
        ),
    ];
    for (text, key) in invalid {
        let result = error(&file(text));
        assert!(
            matches!(result, Some(NpyError::InvalidValue { key: actual, .. }) if actual == key),
            "{text:?}: {result:?}"
        );
    }
    assert_eq!(
        message(&file(
            "{'descr': '<i4', 'fortran_order': False, 'shape': (2, -3)}"
        ))
        .as_deref(),
        Some("header value for 'shape' is invalid: dimension -3 on axis 1 is negative")
    );
}

#[test]
fn dimension_and_size_limits() {
    let text = "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 4294967296)}";
    assert_eq!(
        error(&npy_file(1, text, &[])),
        Some(NpyError::DimensionTooLarge {
            axis: 1,
            dimension: "4294967296".to_owned()
        })
    );
    let text = "{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999999,)}";
    assert!(matches!(
        error(&npy_file(1, text, &[])),
        Some(NpyError::DimensionTooLarge { axis: 0, .. })
    ));
    // Each dimension fits in u32, but three of them overflow u64 when multiplied.
    let text = "{'descr': '<i4', 'fortran_order': False, \
                'shape': (4294967295, 4294967295, 4294967295)}";
    assert!(matches!(
        error(&npy_file(1, text, &[])),
        Some(NpyError::SizeOverflow { .. })
    ));
    // The element count fits but the byte count does not.
    let text = "{'descr': '<i8', 'fortran_order': False, 'shape': (4294967295, 4294967295)}";
    assert!(matches!(
        error(&npy_file(1, text, &[])),
        Some(NpyError::SizeOverflow { .. })
    ));
    // A huge declared size with tiny data is an error, not a huge allocation.
    let text = "{'descr': '|u1', 'fortran_order': True, 'shape': (4294967295, 4294967295)}";
    assert_eq!(
        error(&npy_file(1, text, &[0; 8])),
        Some(NpyError::DataTooShort {
            expected: 4294967295u64 * 4294967295,
            actual: 8
        })
    );
    // A zero dimension makes the product zero however large the others are.
    let text = "{'descr': '<i4', 'fortran_order': False, 'shape': (4294967295, 0, 4294967295)}";
    assert_eq!(
        read_npy(&npy_file(1, text, &[])),
        Ok(array(&[u32::MAX, 0, u32::MAX], &[]))
    );
    // `-0` is zero, as in Python.
    let text = "{'descr': '<i4', 'fortran_order': False, 'shape': (-0,)}";
    assert_eq!(read_npy(&npy_file(1, text, &[])), Ok(array(&[0], &[])));
}

#[test]
fn data_length_mismatches_state_byte_counts() {
    let bytes = npy_file(1, &header("<i2", false, "(2, 3)"), &[0; 10]);
    assert_eq!(
        error(&bytes),
        Some(NpyError::DataTooShort {
            expected: 12,
            actual: 10
        })
    );
    assert_eq!(
        message(&bytes).as_deref(),
        Some("data is too short: the shape needs 12 bytes of data but the file holds 10")
    );
    let bytes = npy_file(1, &header("<i2", false, "(2, 3)"), &[0; 13]);
    assert_eq!(
        error(&bytes),
        Some(NpyError::DataTooLong {
            expected: 12,
            actual: 13
        })
    );
    assert_eq!(
        message(&bytes).as_deref(),
        Some("data is too long: the shape needs 12 bytes of data but the file holds 13")
    );
}

#[test]
fn non_ascii_header_is_rejected() {
    let mut bytes = npy_file(1, &header("<i4", false, "(1,)"), &[0; 4]);
    bytes.splice(12..13, [0xc3]);
    assert_eq!(
        error(&bytes),
        Some(NpyError::HeaderNotAscii {
            offset: 2,
            byte: 0xc3
        })
    );
    // Valid UTF-8 (allowed by version 3.0) is still refused: no plain dtype needs it.
    let text = "{'descr': '<i4', 'fortran_order': False, 'shape': (1,), 'é': 1}";
    assert!(matches!(
        error(&npy_file(3, text, &[0; 4])),
        Some(NpyError::HeaderNotAscii {
            offset: 57,
            byte: 0xc3
        })
    ));
}

#[test]
fn deep_nesting_is_rejected_without_stack_overflow() {
    let depth = 100_000;
    let text = format!(
        "{{'descr': {}{}, 'fortran_order': False, 'shape': (1,)}}",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let result = error(&npy_file(2, &text, &[0; 4]));
    assert!(
        matches!(result, Some(NpyError::HeaderSyntax { .. })),
        "{result:?}"
    );
}

#[test]
fn long_error_excerpts_are_shortened() {
    let key = "k".repeat(10_000);
    let text = format!("{{'descr': '<i4', 'fortran_order': False, 'shape': (1,), '{key}': 1}}");
    let expected = format!("{}...", "k".repeat(MAX_EXCERPT));
    assert_eq!(
        error(&npy_file(2, &text, &[0; 4])),
        Some(NpyError::UnknownKey(expected))
    );
}

#[test]
fn corrupted_files_never_panic() {
    // Deterministic xorshift mutations of valid files: any result but a panic is fine.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let seeds = [
        write_npy(&array(&[2, 3], &[1, 2, 3, 4, 5, 6])),
        npy_file(
            1,
            &header(">i2", true, "(3, 2)"),
            &le_bytes(&[0i16; 6], i16::to_be_bytes),
        ),
    ];
    for seed in &seeds {
        for _ in 0..5_000 {
            let mut bytes = seed.clone();
            for _ in 0..next() % 4 + 1 {
                let at = (next() % bytes.len() as u64) as usize;
                bytes.splice(at..at + 1, [next() as u8]);
            }
            let _ = read_npy(&bytes);
        }
    }
}
