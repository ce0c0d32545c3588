//! The bulk input decoder against borsh, on random encodings, truncations and corruptions.

use alloc::vec;
use alloc::vec::Vec;

use super::*;

fn xorshift(state: &mut u32) -> u32 {
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    *state
}

#[test]
fn the_bulk_decoder_accepts_exactly_what_borsh_accepts() {
    let mut state = 0x1234_5678;
    let mut encodings: Vec<Vec<u8>> = vec![Vec::new(), vec![0, 0, 0, 0]];
    for case in 0..200 {
        let tensors: Vec<InputTensor> = (0..xorshift(&mut state) % 4)
            .map(|_| {
                let shape: Vec<u32> = (0..xorshift(&mut state) % 4)
                    .map(|_| xorshift(&mut state) % 6)
                    .collect();
                let data = (0..xorshift(&mut state) % 40)
                    .map(|_| xorshift(&mut state) as i32)
                    .collect();
                InputTensor { shape, data }
            })
            .collect();
        let bytes = borsh::to_vec(&tensors).unwrap_or_default();
        assert_eq!(decode_inputs(&bytes), Some(tensors), "case {case}");
        // Every truncation, an extra byte, and a corrupted length.
        for cut in 0..bytes.len() {
            encodings.push(bytes[..cut].to_vec());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        encodings.push(longer);
        let mut corrupted = bytes.clone();
        let at = xorshift(&mut state) as usize % corrupted.len();
        corrupted[at] = corrupted[at].wrapping_add(1 + (xorshift(&mut state) % 255) as u8);
        encodings.push(corrupted);
    }
    // A huge count of tensors and a huge value count, with few bytes behind them.
    encodings.push(vec![0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0]);
    encodings.push(vec![
        1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4,
    ]);
    for bytes in &encodings {
        let borsh = borsh::from_slice::<Vec<InputTensor>>(bytes).ok();
        assert_eq!(decode_inputs(bytes), borsh, "{bytes:?}");
    }
}

#[test]
fn the_bulk_encoder_writes_what_borsh_writes() {
    let mut state = 0x8765_4321;
    for case in 0..200 {
        let tensors: Vec<InputTensor> = (0..xorshift(&mut state) % 4)
            .map(|_| {
                let shape: Vec<u32> = (0..xorshift(&mut state) % 4)
                    .map(|_| xorshift(&mut state))
                    .collect();
                let data = (0..xorshift(&mut state) % 600)
                    .map(|_| xorshift(&mut state) as i32)
                    .collect();
                InputTensor { shape, data }
            })
            .collect();
        let expected = borsh::to_vec(&tensors).unwrap_or_default();
        assert_eq!(
            encoded_inputs_len(&tensors),
            Some(expected.len()),
            "case {case}"
        );
        let mut bytes = vec![0xAA; expected.len()];
        assert!(encode_inputs_into(&tensors, &mut bytes), "case {case}");
        assert_eq!(bytes, expected, "case {case}");
        // A buffer of another length is refused.
        let mut longer = vec![0; expected.len() + 1];
        assert!(!encode_inputs_into(&tensors, &mut longer), "case {case}");
        assert!(
            !encode_inputs_into(&tensors, &mut bytes[1..]),
            "case {case}"
        );
    }
}
