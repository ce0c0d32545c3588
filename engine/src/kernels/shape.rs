//! The geometry of one convolution ([`ConvShape`]): what the packing of weights and every
//! convolution kernel share. Which kernel runs a shape is decided in `conv/mod.rs`, and the
//! depthwise kernel's layout is derived in `conv/tap_plane.rs`; both add methods to
//! [`ConvShape`] there.

/// Geometry of one convolution (NCHW data, OIHW weights), validated by the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConvShape {
    /// N.
    pub batch: usize,
    /// C.
    pub in_channels: usize,
    /// H.
    pub height: usize,
    /// W.
    pub width: usize,
    /// OC.
    pub out_channels: usize,
    /// Groups (divides C and OC).
    pub groups: usize,
    /// KH.
    pub kernel_h: usize,
    /// KW.
    pub kernel_w: usize,
    /// Output height.
    pub out_h: usize,
    /// Output width.
    pub out_w: usize,
    /// (SH, SW), each ≥ 1.
    pub strides: [usize; 2],
    /// (PH, PW).
    pub padding: [usize; 2],
    /// (DH, DW), each ≥ 1.
    pub dilation: [usize; 2],
}

impl ConvShape {
    /// Input channels per group.
    pub fn group_in(&self) -> usize {
        self.in_channels / self.groups
    }

    /// Output channels per group.
    pub fn group_out(&self) -> usize {
        self.out_channels / self.groups
    }

    /// Reduction length per output: C/groups · KH · KW.
    pub fn depth(&self) -> usize {
        self.group_in() * self.kernel_h * self.kernel_w
    }

    /// Elements of one zero-padded input plane.
    pub(crate) fn padded_plane(&self) -> u64 {
        (self.height as u64 + 2 * self.padding[0] as u64)
            .saturating_mul(self.width as u64 + 2 * self.padding[1] as u64)
    }
}
